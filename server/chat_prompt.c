/* Request preparation and prompt rendering. */
#include "server/chat_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/chat_format.h"
#include "server/chat/chat_request.h"
#include "server/chat/jinja.h"
#include "server/chat/template_probe.h"

/* A part's text: a text part's, or a refusal part's as an assistant turn replays it. */
static json_t *part_text(const json_t *part)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    return json_object_get(part, type && !strcmp(type, "refusal") ? "refusal" : "text");
}

/* content: a string, null, or an array of text parts; images are refused (text-only). */
static json_t *text_of(const json_t *content, const char *where, struct splash_err *err)
{
    if (!content || json_is_null(content))
        return json_string("");
    if (json_is_string(content))
        return json_incref((json_t *)content);
    if (!json_is_array(content)) {
        splash_err_set(err, SPLASH_ERR_INVALID, "%s.content must be a string or an array of parts", where);
        return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < json_array_size(content); i++) {
        json_t *part = json_array_get(content, i);
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.content[%zu].type is missing", where, i);
            return NULL;
        }
        if (!strcmp(type, "image_url") || !strcmp(type, "input_image") || !strcmp(type, "image") ||
            !strcmp(type, "file") || !strcmp(type, "input_file")) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.content[%zu]: image and file input are not supported: this "
                                    "model serves text only", where, i);
            return NULL;
        }
        json_t *t = part_text(part);
        if (!json_is_string(t)) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.content[%zu].%s must be a string", where, i,
                     strcmp(type, "refusal") ? "text" : "refusal");
            return NULL;
        }
        total += json_string_length(t);
    }
    char *buf = malloc(total + 1);
    if (!buf) {
        splash_err_set(err, SPLASH_ERR_NOMEM, "%s.content: out of memory", where);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < json_array_size(content); i++) {
        json_t *t = part_text(json_array_get(content, i));
        memcpy(buf + off, json_string_value(t), json_string_length(t));
        off += json_string_length(t);
    }
    json_t *s = json_stringn(buf, off);
    free(buf);
    return s;
}

static json_t *normalize_calls(const json_t *calls, const char *where,
                               struct splash_err *err)
{
    if (!json_is_array(calls)) {
        splash_err_set(err, SPLASH_ERR_INVALID, "%s.tool_calls must be an array", where);
        return NULL;
    }
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *c = json_array_get(calls, i);
        json_t *fn = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.tool_calls[%zu].function.name must be a string", where, i);
            json_decref(out);
            return NULL;
        }
        json_t *args = json_object_get(fn, "arguments");
        json_t *obj;
        if (json_is_string(args) &&
            !json_string_value(args)[strspn(json_string_value(args), " \t\r\n")]) {
            /* a call without arguments, as clients replay one whose deltas carried none */
            obj = json_object();
        } else if (json_is_string(args)) {
            /* templates iterate the arguments: give them the object */
            obj = json_loads(json_string_value(args), 0, NULL);
            if (!json_is_object(obj)) {
                if (obj)
                    json_decref(obj);
                obj = json_incref(args);
            }
        } else if (json_is_object(args)) {
            obj = json_incref(args);
        } else {
            obj = json_object();
        }
        json_t *nc = json_pack("{s:s, s:{s:s, s:o}}", "type", "function", "function", "name", name,
                               "arguments", obj);
        json_t *id = json_object_get(c, "id");
        if (json_is_string(id))
            json_object_set(nc, "id", id);
        json_array_append_new(out, nc);
    }
    return out;
}

enum splash_status splash_chat_normalize(struct splash_app *app, const json_t *messages,
                                         json_t **normalized, struct splash_err *err)
{
    *normalized = NULL;
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "messages must be a non-empty array");
    json_t *out = json_array();
    int leading = 1, saw_later_system = 0;
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.role must be a string", where);
            goto fail;
        }
        int is_system = !strcmp(role, "system") || !strcmp(role, "developer");
        if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool") && !is_system) {
            splash_err_set(err, SPLASH_ERR_INVALID, "%s.role %s is not system, developer, user, assistant or tool",
                     where, role);
            goto fail;
        }
        json_t *text = text_of(json_object_get(m, "content"), where, err);
        if (!text)
            goto fail;
        leading &= is_system;
        saw_later_system |= is_system && !leading;
        json_t *nm = json_pack("{s:s, s:o}", "role", role, "content", text);
        if (!strcmp(role, "assistant")) {
            json_t *calls = json_object_get(m, "tool_calls");
            if (calls && !json_is_null(calls)) {
                json_t *nc = normalize_calls(calls, where, err);
                if (!nc) {
                    json_decref(nm);
                    goto fail;
                }
                json_object_set_new(nm, "tool_calls", nc);
            }
            json_t *rc = json_object_get(m, "reasoning_content");
            if (json_is_string(rc))
                json_object_set(nm, "reasoning_content", rc);
        }
        if (!strcmp(role, "tool")) {
            json_t *id = json_object_get(m, "tool_call_id");
            if (json_is_string(id))
                json_object_set(nm, "tool_call_id", id);
            json_t *name = json_object_get(m, "name");
            if (json_is_string(name))
                json_object_set(nm, "name", name);
        }
        json_array_append_new(out, nm);
    }
    if (saw_later_system && app->later_system == SPLASH_LATER_SYSTEM_UNSUPPORTED) {
        splash_err_set(err, SPLASH_ERR_INVALID, "messages: this model's chat template cannot render a system "
                                "message after the conversation starts");
        goto fail;
    }
    *normalized = splash_chat_merge_leading_system(out);
    json_decref(out);
    return *normalized ? SPLASH_OK : splash_err_set(err, SPLASH_ERR_NOMEM, "messages: out of memory");
fail:
    json_decref(out);
    /* a part's text whose copy ran out of memory set NOMEM; everything else is the request's */
    return strstr(err->msg, "out of memory") ? SPLASH_ERR_NOMEM : SPLASH_ERR_INVALID;
}

/* The messages as harmony templates read them: an assistant turn's reasoning_content is
 * also its `thinking` (the gpt-oss template renders that field as the analysis channel). A
 * new reference; the input is left as it is. */
static json_t *harmony_messages(const json_t *messages)
{
    json_t *out = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        const json_t *rc = json_object_get(m, "reasoning_content");
        if (json_is_string(rc) && !json_object_get(m, "thinking")) {
            json_t *copy = json_copy((json_t *)m);
            json_object_set(copy, "thinking", (json_t *)rc);
            json_array_append_new(out, copy);
        } else {
            json_array_append(out, (json_t *)m);
        }
    }
    return out;
}

enum splash_status splash_chat_render(struct splash_app *app, const json_t *messages,
                                      const json_t *tools, int effort, const json_t *kwargs,
                                      struct splash_prompt *out, struct splash_err *err,
                                      char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    if (effort < 0)
        effort = app->default_effort;
    json_t *harmony = app->format->calls == SPLASH_CALLS_HARMONY ? harmony_messages(messages)
                                                                 : NULL;
    if (harmony)
        messages = harmony;
    struct splash_chat_vars_opts vo = {
        .messages = messages,
        .tools = tools && json_array_size(tools) ? tools : NULL,
        .add_generation_prompt = true,
        .effort = effort,
        .kwargs = kwargs,
        .special = app->special,
        .report = app->effort_report,
    };
    json_t *vars;
    enum splash_status st = splash_chat_template_vars(&vo, &vars, err);
    if (st != SPLASH_OK) {
        json_decref(harmony);
        if (why && why_size)
            snprintf(why, why_size, "%s", err->msg);
        return st;
    }
    struct splash_err jerr;
    /* raise_exception's reason is up to 4000 bytes; the rest of the message fits beside */
    char whole[4200];
    struct splash_jinja_render_opts ro = {.message = whole, .message_size = sizeof whole};
    st = splash_jinja_render(app->chat_template, vars, &ro, &out->text, &out->len, &jerr);
    json_decref(vars);
    json_decref(harmony);
    if (st != SPLASH_OK) {
        if (why && why_size)
            snprintf(why, why_size, "the chat template refused the request: %s", whole);
        return splash_err_set(err, st, "the chat template refused the request: %s", jerr.msg);
    }
    out->thinks = splash_chat_prompt_opens_think(app->format, out->text, out->len);
    out->effort = effort;
    return SPLASH_OK;
}

void splash_prompt_free(struct splash_prompt *p)
{
    free(p->text);
    p->text = NULL;
}
