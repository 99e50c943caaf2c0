/* The later-system probe: render a canary conversation whose later system message carries a
 * marker; where the template raises or drops it, find the construct responsible in the AST,
 * patch in the template's own leading-system block, and keep the patch only if every ordinary
 * conversation renders byte-identically and the canary renders in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/jinja_ast.h"
#include "server/chat/template_probe.h"

#define CANARY "SPLASH-LATER-SYSTEM-CANARY-5c1e"

/* Conversations as requests render them: with and without tools, tool calls and results,
 * preserved thinking, images. Each renders at every effort below. */
static const char ordinary_json[] =
    "["
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]},"
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hello\"}]},"
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},"
    "{\"role\":\"user\",\"content\":\"Thanks\"}]},"
    "{\"tools\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]},"
    "{\"tools\":true,\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Call the tool.\","
    "\"tool_calls\":[{\"type\":\"function\",\"id\":\"c1\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":{\"city\":\"Paris\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"get_weather\",\"content\":\"18C\"}]},"
    "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"},"
    "{\"role\":\"assistant\",\"content\":\"4\",\"reasoning_content\":\"Easy.\"},"
    "{\"role\":\"user\",\"content\":\"3+3?\"}]},"
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is this?\"},"
    "{\"type\":\"image\"}]}]}"
    "]";

static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather.\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"city\"]}}}]";

static const char *const effort_kwargs[] = {
    "{}",
    "{\"enable_thinking\":false,\"reasoning_effort\":\"none\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"minimal\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"low\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"medium\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"high\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"xhigh\"}",
    "{\"enable_thinking\":true,\"reasoning_effort\":\"max\"}",
};

const char *splash_later_system_name(enum splash_later_system outcome)
{
    switch (outcome) {
    case SPLASH_LATER_SYSTEM_NATIVE: return "native";
    case SPLASH_LATER_SYSTEM_PATCHED: return "patched";
    case SPLASH_LATER_SYSTEM_UNSUPPORTED: return "unsupported";
    }
    return "unknown";
}

void splash_later_system_describe(const struct splash_later_system_probe *p, const char *name,
                                  char *buf, size_t size)
{
    snprintf(buf, size, "Chat template · %s · later system messages: %s (%s)", name,
             splash_later_system_name(p->outcome), p->reason);
}

/* ---- rendering ------------------------------------------------------------------------------- */

struct rendering {
    enum splash_status st;
    char *text;
    size_t len;
    struct splash_err err;
};

static json_t *probe_vars(const json_t *special, json_t *messages, bool tools,
                          const char *kwargs_json)
{
    json_t *vars = json_object();
    json_object_set(vars, "messages", messages);
    json_object_set_new(vars, "tools", tools ? json_loads(tools_json, 0, NULL) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_true());
    if (special)
        json_object_update(vars, (json_t *)special);
    if (kwargs_json) {
        json_t *kw = json_loads(kwargs_json, 0, NULL);
        json_object_update(vars, kw);
        json_decref(kw);
    }
    return vars;
}

static void render(const struct splash_jinja_template *t, const json_t *vars,
                   struct rendering *r)
{
    /* a fixed clock, so templates that print the date render alike twice */
    struct splash_jinja_render_opts opts = {.now = 1768478400};
    r->st = splash_jinja_render(t, vars, &opts, &r->text, &r->len, &r->err);
}

static bool same_rendering(const struct rendering *a, const struct rendering *b)
{
    if ((a->st == SPLASH_OK) != (b->st == SPLASH_OK))
        return false;
    if (a->st != SPLASH_OK)
        return strcmp(a->err.msg, b->err.msg) == 0;
    return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

static json_t *canary_messages(void)
{
    return json_loads("[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
                      "{\"role\":\"user\",\"content\":\"Hi\"},"
                      "{\"role\":\"assistant\",\"content\":\"Hello!\"},"
                      "{\"role\":\"system\",\"content\":\"" CANARY "\"},"
                      "{\"role\":\"user\",\"content\":\"Thanks\"}]", 0, NULL);
}

enum canary { CANARY_IN_PLACE, CANARY_RAISED, CANARY_DROPPED, CANARY_OUT_OF_PLACE };

static enum canary run_canary(const struct splash_jinja_template *t, const json_t *special,
                              bool tools, char *why, size_t why_size)
{
    json_t *messages = canary_messages();
    json_t *vars = probe_vars(special, messages, tools, NULL);
    struct rendering r;
    render(t, vars, &r);
    enum canary result;
    if (r.st != SPLASH_OK) {
        snprintf(why, why_size, "raises \"%.120s\"", r.err.msg);
        result = CANARY_RAISED;
    } else {
        const char *marker = strstr(r.text, CANARY);
        const char *hello = strstr(r.text, "Hello!");
        if (!marker) {
            snprintf(why, why_size, "drops it");
            result = CANARY_DROPPED;
        } else if (!hello || hello > marker || !strstr(marker, "Thanks")) {
            snprintf(why, why_size, "renders it out of place");
            result = CANARY_OUT_OF_PLACE;
        } else {
            snprintf(why, why_size, "renders it in place");
            result = CANARY_IN_PLACE;
        }
    }
    free(r.text);
    json_decref(vars);
    json_decref(messages);
    return result;
}

/* Every ordinary conversation at every effort renders as under the shipped template. */
static bool ordinary_identical(const struct splash_jinja_template *a,
                               const struct splash_jinja_template *b, const json_t *special,
                               char *why, size_t why_size)
{
    json_t *convs = json_loads(ordinary_json, 0, NULL);
    size_t i;
    json_t *conv;
    bool ok = true;
    json_array_foreach(convs, i, conv) {
        bool tools = json_is_true(json_object_get(conv, "tools"));
        for (size_t e = 0; ok && e < sizeof effort_kwargs / sizeof *effort_kwargs; e++) {
            for (int with_tools = 0; ok && with_tools <= 1; with_tools++) {
                if (tools && !with_tools)
                    continue;
                json_t *vars = probe_vars(special, json_object_get(conv, "messages"),
                                          with_tools, effort_kwargs[e]);
                struct rendering ra, rb;
                render(a, vars, &ra);
                render(b, vars, &rb);
                if (!same_rendering(&ra, &rb)) {
                    snprintf(why, why_size, "conversation %zu renders differently", i + 1);
                    ok = false;
                }
                free(ra.text);
                free(rb.text);
                json_decref(vars);
            }
        }
        if (!ok)
            break;
    }
    json_decref(convs);
    return ok;
}

/* ---- finding the construct ------------------------------------------------------------------- */

struct site {
    struct jj_nodes *list; /* the raise's statement list */
    size_t index;
    struct jj_node *loop;  /* the message loop around it */
};

struct finds {
    struct site raises[8];
    size_t n_raises;
    struct jj_node *filters[8]; /* message loops whose condition skips system messages */
    size_t n_filters;
    struct jj_node *blocks[8]; /* IFs on messages[0] being a system message */
    size_t n_blocks;
};

static bool mentions_first_message(const struct jj_node *n, const char *messages)
{
    if (!n)
        return false;
    if (jj_ast_is_first_message(n, messages))
        return true;
    if (mentions_first_message(n->a, messages) || mentions_first_message(n->b, messages) ||
        mentions_first_message(n->c, messages))
        return true;
    for (size_t i = 0; i < n->args.n; i++)
        if (mentions_first_message(n->args.items[i], messages))
            return true;
    return false;
}

static void walk(struct jj_nodes *list, struct jj_node *loop, bool system_branch,
                 const char *messages, struct finds *f)
{
    for (size_t i = 0; i < list->n; i++) {
        struct jj_node *n = list->items[i];
        switch (n->kind) {
        case JN_OUTPUT:
            if (loop && system_branch && jj_ast_is_call_to(n->a, "raise_exception") &&
                f->n_raises < 8)
                f->raises[f->n_raises++] = (struct site){list, i, loop};
            break;
        case JN_IF: {
            bool sys = jj_ast_tests_role(n->a, "system", JJ_OP_EQ);
            if (sys && !loop && mentions_first_message(n->a, messages) && f->n_blocks < 8)
                f->blocks[f->n_blocks++] = n;
            walk(&n->body, loop, system_branch || (sys && loop), messages, f);
            walk(&n->orelse, loop, system_branch, messages, f);
            break;
        }
        case JN_FOR: {
            bool message_loop = n->targets.n == 1 && n->targets.items[0]->kind == JN_NAME;
            if (message_loop && n->b && (jj_ast_tests_role(n->b, "system", JJ_OP_NE) ||
                                         jj_ast_tests_role(n->b, "system", JJ_OP_NOTIN)) &&
                f->n_filters < 8)
                f->filters[f->n_filters++] = n;
            walk(&n->body, message_loop ? n : loop, false, messages, f);
            walk(&n->orelse, loop, system_branch, messages, f);
            break;
        }
        case JN_WITH:
        case JN_SCOPE:
        case JN_FILTER_BLOCK:
            walk(&n->body, loop, system_branch, messages, f);
            break;
        default: break;
        }
    }
}

static struct jj_node *role_is_system(struct splash_jinja_template *t, const char *var, int line)
{
    struct jj_node *name = jj_ast_new(t, JN_NAME, line);
    struct jj_node *role = jj_ast_new(t, JN_GETATTR, line);
    struct jj_node *sys = jj_ast_new(t, JN_CONST, line);
    struct jj_node *cmp = jj_ast_new(t, JN_COMPARE, line);
    int *ops = jj_arena_alloc(&t->arena, sizeof *ops);
    if (!name || !role || !sys || !cmp || !ops)
        return NULL;
    name->name = var;
    role->a = name;
    role->name = jj_intern(t, "role", 4);
    sys->value = jj_str("system", 6);
    cmp->a = role;
    ops[0] = JJ_OP_EQ;
    cmp->ops = ops;
    if (!role->name || !jj_ast_push(t, &cmp->args, sys))
        return NULL;
    return cmp;
}

/* Patches the fresh parse t with leading-system block number `block`. */
static bool apply_patch(struct splash_jinja_template *t, size_t block, char *why,
                        size_t why_size)
{
    const char *messages = jj_intern(t, "messages", 8);
    struct finds f = {0};
    walk(&t->body, NULL, false, messages, &f);
    if (block >= f.n_blocks)
        return false;
    struct jj_node *loop = f.n_raises == 1 ? f.raises[0].loop : f.filters[0];
    const char *var = loop->targets.items[0]->name;
    struct jj_ast_subst subst = {messages, var};
    struct jj_node *patch = jj_ast_new(t, JN_SCOPE, loop->line);
    if (!patch)
        return false;
    const struct jj_node *src = f.blocks[block];
    for (size_t i = 0; i < src->body.n; i++) {
        struct jj_node *c = jj_ast_clone(t, src->body.items[i], &subst);
        if (!c || !jj_ast_push(t, &patch->body, c))
            return false;
    }
    if (f.n_raises == 1) {
        /* the raise in the system branch becomes the system block */
        snprintf(why, why_size, "raise_exception in the system branch, line %d",
                 f.raises[0].list->items[f.raises[0].index]->line);
        f.raises[0].list->items[f.raises[0].index] = patch;
        return true;
    }
    /* for m in messages if COND  ->  for m in messages if COND or (m is a later system
     * message), with the body rendering system messages as the system block */
    struct jj_node *sys_filter = role_is_system(t, var, loop->line);
    struct jj_node *not_first = jj_ast_new(t, JN_TEST, loop->line);
    struct jj_node *subject = jj_ast_new(t, JN_NAME, loop->line);
    struct jj_node *first = jj_ast_new(t, JN_GETITEM, loop->line);
    struct jj_node *msgs = jj_ast_new(t, JN_NAME, loop->line);
    struct jj_node *zero = jj_ast_new(t, JN_CONST, loop->line);
    struct jj_node *both = jj_ast_new(t, JN_AND, loop->line);
    struct jj_node *either = jj_ast_new(t, JN_OR, loop->line);
    struct jj_node *branch = jj_ast_new(t, JN_IF, loop->line);
    if (!sys_filter || !not_first || !subject || !first || !msgs || !zero || !both ||
        !either || !branch)
        return false;
    subject->name = var;
    msgs->name = messages;
    zero->value = jj_int(0);
    first->a = msgs;
    first->b = zero;
    not_first->name = jj_intern(t, "sameas", 6);
    not_first->flags = JJ_TEST_NEGATED;
    not_first->a = subject;
    if (!not_first->name || !jj_ast_push(t, &not_first->args, first))
        return false;
    both->a = sys_filter;
    both->b = not_first;
    either->a = loop->b;
    either->b = both;
    branch->a = role_is_system(t, var, loop->line);
    if (!branch->a || !jj_ast_push(t, &branch->body, patch))
        return false;
    branch->orelse = loop->body;
    loop->b = either;
    loop->body = (struct jj_nodes){0};
    if (!jj_ast_push(t, &loop->body, branch))
        return false;
    snprintf(why, why_size, "loop condition excluding system messages, line %d", loop->line);
    return true;
}

static bool contains(const struct jj_node *n, const struct jj_node *target)
{
    if (!n)
        return false;
    if (n == target)
        return true;
    const struct jj_nodes *lists[] = {&n->body, &n->orelse};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++)
            if (contains(lists[l]->items[i], target))
                return true;
    return false;
}

/* The block alone must open the rendering of [system, user]: nothing (a BOS token, a preamble)
 * may come before the template's system block. */
static bool block_opens_rendering(struct splash_jinja_template *t, size_t block,
                                  const struct splash_jinja_template *orig,
                                  const json_t *special)
{
    const char *messages = jj_intern(t, "messages", 8);
    struct finds f = {0};
    walk(&t->body, NULL, false, messages, &f);
    if (block >= f.n_blocks)
        return false;
    /* the block, after the macros and variables the template defines before it */
    struct splash_jinja_template alone = *t;
    alone.body = (struct jj_nodes){0};
    for (size_t i = 0; i < t->body.n && !contains(t->body.items[i], f.blocks[block]); i++)
        if ((t->body.items[i]->kind == JN_MACRO || t->body.items[i]->kind == JN_SET) &&
            !jj_ast_push(t, &alone.body, t->body.items[i]))
            return false;
    for (size_t i = 0; i < f.blocks[block]->body.n; i++)
        if (!jj_ast_push(t, &alone.body, f.blocks[block]->body.items[i]))
            return false;
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"" CANARY "\"},"
                              "{\"role\":\"user\",\"content\":\"Hi\"}]", 0, NULL);
    json_t *vars = probe_vars(special, msgs, false, NULL);
    struct rendering rb, rf;
    render(&alone, vars, &rb);
    render(orig, vars, &rf);
    bool ok = rb.st == SPLASH_OK && rf.st == SPLASH_OK && rb.len > 0 &&
              strstr(rb.text, CANARY) && rb.len <= rf.len &&
              memcmp(rb.text, rf.text, rb.len) == 0;
    free(rb.text);
    free(rf.text);
    json_decref(vars);
    json_decref(msgs);
    return ok;
}

enum splash_status splash_template_probe_later_system(const char *src, size_t len,
                                                      const json_t *special,
                                                      struct splash_jinja_template **use,
                                                      struct splash_later_system_probe *out,
                                                      struct splash_err *err)
{
    struct splash_jinja_template *orig = NULL;
    *use = NULL;
    memset(out, 0, sizeof *out);
    enum splash_status st = splash_jinja_parse(src, len, &orig, err);
    if (st != SPLASH_OK)
        return st;
    char why[200];
    enum canary c = run_canary(orig, special, false, why, sizeof why);
    if (c == CANARY_IN_PLACE)
        c = run_canary(orig, special, true, why, sizeof why);
    if (c == CANARY_IN_PLACE) {
        out->outcome = SPLASH_LATER_SYSTEM_NATIVE;
        snprintf(out->reason, sizeof out->reason, "the template renders it in place");
        *use = orig;
        return SPLASH_OK;
    }
    out->outcome = SPLASH_LATER_SYSTEM_UNSUPPORTED;
    *use = orig;
    if (c == CANARY_OUT_OF_PLACE) {
        snprintf(out->reason, sizeof out->reason, "the template renders it out of place");
        return SPLASH_OK;
    }
    /* find the single construct responsible */
    struct finds f = {0};
    walk(&orig->body, NULL, false, jj_intern(orig, "messages", 8), &f);
    size_t constructs = f.n_raises + f.n_filters;
    if (constructs != 1) {
        snprintf(out->reason, sizeof out->reason, "the template %.100s; %s", why,
                 constructs ? "more than one construct rejects system messages"
                            : "no single construct rejects system messages");
        return SPLASH_OK;
    }
    if (f.n_blocks == 0) {
        snprintf(out->reason, sizeof out->reason, "the template %.100s; it has no leading system "
                 "block to render it with", why);
        return SPLASH_OK;
    }
    char failed[200] = "";
    for (size_t b = 0; b < f.n_blocks; b++) {
        struct splash_jinja_template *patched = NULL;
        if (splash_jinja_parse(src, len, &patched, err) != SPLASH_OK)
            break;
        char where[160] = "";
        char check[200] = "";
        bool ok = apply_patch(patched, b, where, sizeof where);
        if (!ok)
            snprintf(check, sizeof check, "the patch could not be applied");
        if (ok && !block_opens_rendering(patched, b, orig, special)) {
            ok = false;
            snprintf(check, sizeof check, "something renders before its system block");
        }
        if (ok && !ordinary_identical(orig, patched, special, check, sizeof check))
            ok = false;
        for (int tools = 0; ok && tools <= 1; tools++)
            if (run_canary(patched, special, tools, check, sizeof check) != CANARY_IN_PLACE)
                ok = false;
        if (ok) {
            out->outcome = SPLASH_LATER_SYSTEM_PATCHED;
            snprintf(out->reason, sizeof out->reason, "the template %.80s; patched its %.80s with "
                     "the leading system block", why, where);
            splash_jinja_free(orig);
            *use = patched;
            return SPLASH_OK;
        }
        snprintf(failed, sizeof failed, "%s", check);
        splash_jinja_free(patched);
    }
    snprintf(out->reason, sizeof out->reason,
             "the template %.80s; the patch failed a probe: %.100s", why, failed);
    return SPLASH_OK;
}
