/* What reasoning efforts do to a template: each effort reaches it as enable_thinking and
 * reasoning_effort; a rejected effort renders its alias; /v1/models reports the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/template_probe.h"

static const char *const effort_names[SPLASH_EFFORT_COUNT] = {
    "none", "minimal", "low", "medium", "high", "xhigh", "max",
};

/* The alias a template that rejects an effort renders instead (server.md). */
static const enum splash_effort effort_alias[SPLASH_EFFORT_COUNT] = {
    [SPLASH_EFFORT_NONE] = SPLASH_EFFORT_NONE,
    [SPLASH_EFFORT_MINIMAL] = SPLASH_EFFORT_LOW,
    [SPLASH_EFFORT_LOW] = SPLASH_EFFORT_LOW,
    [SPLASH_EFFORT_MEDIUM] = SPLASH_EFFORT_MEDIUM,
    [SPLASH_EFFORT_HIGH] = SPLASH_EFFORT_XHIGH,
    [SPLASH_EFFORT_XHIGH] = SPLASH_EFFORT_XHIGH,
    [SPLASH_EFFORT_MAX] = SPLASH_EFFORT_XHIGH,
};

const char *splash_effort_name(enum splash_effort e)
{
    return (unsigned)e < SPLASH_EFFORT_COUNT ? effort_names[e] : "unknown";
}

bool splash_effort_parse(const char *s, enum splash_effort *out)
{
    for (int e = 0; s && e < SPLASH_EFFORT_COUNT; e++)
        if (strcmp(s, effort_names[e]) == 0) {
            *out = (enum splash_effort)e;
            return true;
        }
    return false;
}

struct rendering {
    enum splash_status st;
    char *text;
    size_t len;
};

static void render_effort(const struct splash_jinja_template *t, const json_t *special,
                          int effort, bool switch_only, struct rendering *r)
{
    json_t *vars = json_pack("{s:[{s:s,s:s}],s:n,s:n,s:b}", "messages", "role", "user",
                             "content", "Hello", "tools", "documents", "add_generation_prompt",
                             1);
    if (special)
        json_object_update(vars, (json_t *)special);
    if (effort >= 0) {
        json_object_set_new(vars, "enable_thinking", json_boolean(effort != SPLASH_EFFORT_NONE));
        if (!switch_only)
            json_object_set_new(vars, "reasoning_effort", json_string(effort_names[effort]));
    }
    struct splash_jinja_render_opts opts = {.now = 1768478400};
    struct splash_err err;
    r->st = splash_jinja_render(t, vars, &opts, &r->text, &r->len, &err);
    json_decref(vars);
}

static bool same(const struct rendering *a, const struct rendering *b)
{
    return a->st == SPLASH_OK && b->st == SPLASH_OK && a->len == b->len &&
           memcmp(a->text, b->text, a->len) == 0;
}

/* Generation starts inside a think block: the last <think> is not closed. */
static int opens_think(const struct rendering *r)
{
    if (r->st != SPLASH_OK)
        return -1;
    const char *last = NULL;
    for (const char *p = r->text; (p = strstr(p, "<think>")); p++)
        last = p;
    return last && !strstr(last, "</think>");
}

enum splash_status splash_template_probe_efforts(const struct splash_jinja_template *t,
                                                 const json_t *special, bool model_decides,
                                                 struct splash_effort_report *out,
                                                 struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    out->default_effort = -1;
    out->thinks = -1;
    for (int e = 0; e < SPLASH_EFFORT_COUNT; e++)
        out->render_as[e] = (enum splash_effort)e;
    if (model_decides)
        return SPLASH_OK;
    struct rendering r[SPLASH_EFFORT_COUNT] = {{0}}, dflt = {0};
    render_effort(t, special, -1, false, &dflt);
    if (dflt.st != SPLASH_OK) {
        free(dflt.text);
        return splash_err_set(err, SPLASH_ERR_INVALID, "chat template: a plain conversation "
                              "fails to render");
    }
    for (int e = 0; e < SPLASH_EFFORT_COUNT; e++) {
        render_effort(t, special, e, false, &r[e]);
        if (r[e].st == SPLASH_OK)
            continue;
        free(r[e].text);
        r[e].text = NULL;
        if (e == SPLASH_EFFORT_NONE) {
            out->none_by_switch_only = true;
            render_effort(t, special, e, true, &r[e]);
        } else if ((int)effort_alias[e] != e) {
            out->render_as[e] = effort_alias[e];
            render_effort(t, special, effort_alias[e], false, &r[e]);
        }
        if (r[e].st != SPLASH_OK)
            out->rejected[e] = true;
    }
    /* it reasons where generation starts in a think block, or where it renders unlike none */
    out->thinks = opens_think(&dflt) == 1 || !same(&dflt, &r[SPLASH_EFFORT_NONE]);
    /* group the efforts besides none by their rendering */
    int group_of[SPLASH_EFFORT_COUNT];
    enum splash_effort names[SPLASH_EFFORT_COUNT];
    size_t n_groups = 0;
    for (int e = 1; e < SPLASH_EFFORT_COUNT; e++) {
        group_of[e] = -1;
        if (out->rejected[e])
            continue;
        for (int k = 1; k < e && group_of[e] < 0; k++)
            if (group_of[k] >= 0 && same(&r[e], &r[k]))
                group_of[e] = group_of[k];
        if (group_of[e] < 0) {
            group_of[e] = (int)n_groups;
            names[n_groups++] = out->render_as[e];
        }
        /* a group is named by a member no alias stands in for */
        if ((int)out->render_as[e] == e &&
            out->render_as[names[group_of[e]]] != names[group_of[e]])
            names[group_of[e]] = (enum splash_effort)e;
    }
    if (n_groups >= 2) {
        for (size_t g = 0; g < n_groups; g++)
            out->efforts[out->n_efforts++] = names[g];
        for (int e = 1; e < SPLASH_EFFORT_COUNT; e++)
            if (group_of[e] >= 0 && same(&dflt, &r[e])) {
                out->default_effort = (int)names[group_of[e]];
                break;
            }
    }
    for (int e = 0; e < SPLASH_EFFORT_COUNT; e++)
        free(r[e].text);
    free(dflt.text);
    return SPLASH_OK;
}

json_t *splash_effort_report_json(const struct splash_effort_report *r, int default_override)
{
    json_t *efforts = json_array();
    for (size_t i = 0; i < r->n_efforts; i++)
        json_array_append_new(efforts, json_string(effort_names[r->efforts[i]]));
    int dflt = r->default_effort;
    if (default_override >= 0 && default_override < SPLASH_EFFORT_COUNT)
        dflt = (int)r->render_as[default_override];
    return json_pack("{s:o,s:o,s:o}", "thinks",
                     r->thinks < 0 ? json_null() : json_boolean(r->thinks), "efforts", efforts,
                     "default", dflt < 0 ? json_null() : json_string(effort_names[dflt]));
}
