/* Tool-call grammars in the chat formats' syntaxes, the reasoning wrapper, and
 * the constraint a request's API shape asks for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"
#include "server/text/tokenizer/tokenizer.h"

/* ==== formats ============================================================================== */

enum splash_status splash_grammar_format_init(struct splash_grammar_format *f,
                                              enum splash_grammar_call_syntax calls,
                                              const struct splash_tokenizer *tok,
                                              struct splash_err *err)
{
    memset(f, 0xff, sizeof *f);
    f->calls = calls;
    f->think_open = splash_tokenizer_find_special(tok, "<think>");
    f->think_close = splash_tokenizer_find_special(tok, "</think>");
    if (calls == SPLASH_GRAMMAR_CALLS_HARMONY) {
        struct {
            const char *text;
            int32_t *id;
        } marks[] = {{"<|channel|>", &f->channel}, {"<|message|>", &f->message},
                     {"<|start|>", &f->start},     {"<|end|>", &f->end},
                     {"<|call|>", &f->call_open}};
        for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
            if ((*marks[i].id = splash_tokenizer_find_special(tok, marks[i].text)) < 0)
                return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                      "grammar format: the tokenizer has no %s token",
                                      marks[i].text);
        f->call_close = f->call_open;
        return SPLASH_OK;
    }
    struct {
        const char *text;
        int32_t *id;
        int glm_only;
    } need[] = {
        {"<tool_call>", &f->call_open, 0},      {"</tool_call>", &f->call_close, 0},
        {"<arg_key>", &f->arg_key_open, 1},     {"</arg_key>", &f->arg_key_close, 1},
        {"<arg_value>", &f->arg_value_open, 1}, {"</arg_value>", &f->arg_value_close, 1},
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        if (need[i].glm_only && calls != SPLASH_GRAMMAR_CALLS_GLM_ARGS)
            continue;
        *need[i].id = splash_tokenizer_find_special(tok, need[i].text);
        if (*need[i].id < 0)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "grammar format: the tokenizer has no %s token", need[i].text);
    }
    return SPLASH_OK;
}

/* ==== tool calls =========================================================================== */

int gram_tool_fields(const json_t *t, struct gram_tool *out)
{
    const json_t *fn = json_object_get(t, "function");
    const json_t *src = json_is_object(fn) ? fn : t;
    const json_t *name = json_object_get(src, "name");
    if (!json_is_string(name))
        return -1;
    out->name = json_string_value(name);
    out->params = json_object_get(src, "parameters");
    if (!out->params)
        out->params = json_object_get(src, "input_schema");
    if (json_is_null(out->params))
        out->params = NULL;
    return 0;
}

static void seq_tok(struct gram_builder *b, struct gram_seq *s, int32_t id)
{
    gram_seq_push(b, s, GE_TOKEN, (uint32_t)id);
}

/* The arguments of one function: its declared parameters in schema order,
 * required ones always. Returns the rule, GRAM_INF with err on failure. */
static uint32_t call_args(struct gram_builder *b, struct json_gen *jg,
                          const struct splash_grammar_format *f, const struct gram_tool *t,
                          const char *path, struct splash_err *err, enum splash_status *st)
{
    const json_t *params = t->params;
    struct gram_seq s = {0};
    if (params && !json_is_object(params)) {
        *st = splash_err_set(err, SPLASH_ERR_INVALID, "%s.parameters: not an object schema", path);
        return GRAM_INF;
    }
    static const char *const allowed[] = {
        "type",        "properties", "required", "additionalProperties", "title",
        "description", "$schema",    "$defs",    "definitions",          "$id",
        "$comment",    "strict",     NULL};
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)params, key, val)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= !strcmp(allowed[i], key);
        if (!ok) {
            *st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                 "%s.parameters: unsupported keyword \"%s\"", path, key);
            return GRAM_INF;
        }
    }
    const json_t *type = json_object_get(params, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "object"))) {
        *st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s.parameters: type must be \"object\"",
                             path);
        return GRAM_INF;
    }
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    if (props && !json_is_object(props)) {
        *st = splash_err_set(err, SPLASH_ERR_INVALID, "%s.parameters.properties: not an object",
                             path);
        return GRAM_INF;
    }
    size_t n = json_object_size(props), n_req = json_array_size(req);
    const char **names = calloc(n + n_req + 1, sizeof *names);
    const json_t **schemas = calloc(n + n_req + 1, sizeof *schemas);
    int *required = calloc(n + n_req + 1, sizeof *required);
    uint32_t result = GRAM_INF;
    if (!names || !schemas || !required) {
        *st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t k = 0;
    json_object_foreach((json_t *)props, key, val)
    {
        names[k] = key;
        schemas[k] = val;
        for (size_t i = 0; i < n_req; i++)
            required[k] |= json_is_string(json_array_get(req, i)) &&
                           !strcmp(json_string_value(json_array_get(req, i)), key);
        k++;
    }
    for (size_t i = 0; i < n_req; i++) {
        const char *name = json_string_value(json_array_get(req, i));
        if (!name) {
            *st = splash_err_set(err, SPLASH_ERR_INVALID,
                                 "%s.parameters.required: not a string "
                                 "list",
                                 path);
            goto out;
        }
        int found = 0;
        for (size_t q = 0; q < k; q++)
            found |= !strcmp(names[q], name);
        if (!found) {
            names[k] = name;
            schemas[k] = NULL;
            required[k++] = 1;
        }
    }
    n = k;
    /* seq[i]: parameters i.. still to write */
    uint32_t *rest = malloc((n + 1) * sizeof *rest);
    if (!rest) {
        *st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i <= n; i++)
        rest[i] = gram_rule_new(b);
    gram_alt_add(b, rest[n], &s);
    int qwen = f->calls == SPLASH_GRAMMAR_CALLS_QWEN_XML;
    static const char qstop[] = "\n</parameter>";
    for (size_t i = 0; i < n; i++) {
        char sp[256];
        snprintf(sp, sizeof sp, "%s.parameters.properties.%s", path, names[i]);
        /* a raw string value (with the Qwen close inside it), else JSON */
        uint32_t value = GRAM_INF;
        int raw = 0;
        if (schemas[i] && json_is_object(schemas[i])) {
            value = json_gen_raw_string(jg, schemas[i], qwen ? qstop : "", qwen ? strlen(qstop) : 0,
                                        sp, err, st);
            if (value == GRAM_INF && *st != SPLASH_OK)
                break;
            raw = value != GRAM_INF;
        }
        if (!raw) {
            json_t *any = json_object();
            value = json_gen_value(jg, schemas[i] ? schemas[i] : any, sp, err, st);
            json_decref(any);
            if (value == GRAM_INF)
                break;
        }
        gram_seq_reset(&s);
        if (qwen) {
            gram_seq_lit(b, &s, "<parameter=", 11);
            gram_seq_lit(b, &s, names[i], strlen(names[i]));
            gram_seq_lit(b, &s, ">\n", 2);
            gram_seq_ref(b, &s, value);
            if (!raw)
                gram_seq_lit(b, &s, qstop, strlen(qstop));
            gram_seq_byte(b, &s, '\n');
        } else {
            seq_tok(b, &s, f->arg_key_open);
            gram_seq_lit(b, &s, names[i], strlen(names[i]));
            seq_tok(b, &s, f->arg_key_close);
            seq_tok(b, &s, f->arg_value_open);
            gram_seq_ref(b, &s, value);
            seq_tok(b, &s, f->arg_value_close);
        }
        gram_seq_ref(b, &s, rest[i + 1]);
        gram_alt_add(b, rest[i], &s);
        if (!required[i]) {
            gram_seq_reset(&s);
            gram_seq_ref(b, &s, rest[i + 1]);
            gram_alt_add(b, rest[i], &s);
        }
    }
    if (*st == SPLASH_OK)
        result = rest[0];
    free(rest);
out:
    free(names);
    free(schemas);
    free(required);
    gram_seq_free(&s);
    return result;
}

enum splash_status splash_grammar_compile_tool_calls(const json_t *tools, const char *only_name,
                                                     int parallel,
                                                     const struct splash_grammar_format *f,
                                                     struct splash_grammar **out,
                                                     struct splash_err *err)
{
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "tools: not a non-empty array");
    if (f->call_open < 0 || f->call_close < 0 ||
        (f->calls == SPLASH_GRAMMAR_CALLS_GLM_ARGS &&
         (f->arg_key_open < 0 || f->arg_key_close < 0 || f->arg_value_open < 0 ||
          f->arg_value_close < 0)))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "tools: the format lacks call tokens");
    struct gram_builder b;
    gram_builder_init(&b);
    enum splash_status st = SPLASH_OK;
    struct gram_seq s = {0};
    uint32_t fns = gram_rule_new(&b);
    size_t n_fns = 0;
    int qwen = f->calls == SPLASH_GRAMMAR_CALLS_QWEN_XML;
    for (size_t i = 0; i < json_array_size(tools) && st == SPLASH_OK; i++) {
        const json_t *t = json_array_get(tools, i);
        struct gram_tool tool;
        const json_t *type = json_object_get(t, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "function") &&
            strcmp(json_string_value(type), "custom"))
            continue; /* hosted tools the model does not call */
        char path[64];
        snprintf(path, sizeof path, "tools[%zu]", i);
        if (gram_tool_fields(t, &tool)) {
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: no function name", path);
            break;
        }
        if (only_name && strcmp(only_name, tool.name))
            continue;
        /* each function's parameters are a document of their own for $ref */
        struct json_gen *jg = json_gen_create(&b, tool.params, 0);
        if (!jg) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "tools: out of memory");
            break;
        }
        uint32_t args = call_args(&b, jg, f, &tool, path, err, &st);
        json_gen_destroy(jg);
        if (args == GRAM_INF) {
            if (st == SPLASH_OK)
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        gram_seq_reset(&s);
        gram_seq_lit(&b, &s, tool.name, strlen(tool.name));
        if (qwen)
            gram_seq_lit(&b, &s, ">\n", 2);
        gram_seq_ref(&b, &s, args);
        gram_alt_add(&b, fns, &s);
        n_fns++;
    }
    if (st == SPLASH_OK && n_fns == 0) {
        if (only_name)
            st = splash_err_set(err, SPLASH_ERR_INVALID,
                                "tool_choice: no function named \"%s\" among the tools", only_name);
        else
            st = splash_err_set(err, SPLASH_ERR_INVALID, "tools: no function tool to call");
    }
    if (st == SPLASH_OK) {
        uint32_t call = gram_rule_new(&b);
        gram_seq_reset(&s);
        seq_tok(&b, &s, f->call_open);
        if (qwen)
            gram_seq_lit(&b, &s, "\n<function=", 11);
        gram_seq_ref(&b, &s, fns);
        if (qwen)
            gram_seq_lit(&b, &s, "</function>\n", 12);
        seq_tok(&b, &s, f->call_close);
        gram_alt_add(&b, call, &s);
        /* calls ::= call | call sep calls */
        uint32_t calls = gram_rule_new(&b);
        gram_seq_reset(&s);
        gram_seq_ref(&b, &s, call);
        gram_alt_add(&b, calls, &s);
        if (parallel) {
            gram_seq_reset(&s);
            gram_seq_ref(&b, &s, call);
            if (qwen)
                gram_seq_byte(&b, &s, '\n');
            gram_seq_ref(&b, &s, calls);
            gram_alt_add(&b, calls, &s);
        }
        st = gram_finalize(&b, calls, "tools", out, err);
    }
    gram_seq_free(&s);
    gram_builder_free(&b);
    return st;
}

/* ==== reasoning ============================================================================== */

enum splash_status splash_grammar_wrap_reasoning(const struct splash_grammar *g,
                                                 enum splash_grammar_reasoning mode,
                                                 const struct splash_grammar_format *f,
                                                 struct splash_grammar **out,
                                                 struct splash_err *err)
{
    if (mode != SPLASH_GRAMMAR_REASONING_NONE &&
        (f->think_close < 0 || (mode == SPLASH_GRAMMAR_REASONING_OPTIONAL && f->think_open < 0)))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "reasoning: the format has no think tokens");
    struct gram_builder b;
    if (gram_builder_from(&b, g)) {
        gram_builder_free(&b);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "reasoning: out of memory");
    }
    uint32_t root = g->root;
    if (mode != SPLASH_GRAMMAR_REASONING_NONE) {
        /* after </think>: up to two line breaks, then the constrained output */
        struct gram_seq s = {0};
        root = gram_rule_new(&b);
        for (int nl = 0; nl <= 2; nl++) {
            gram_seq_reset(&s);
            for (int k = 0; k < nl; k++)
                gram_seq_byte(&b, &s, '\n');
            gram_seq_ref(&b, &s, g->root);
            gram_alt_add(&b, root, &s);
        }
        gram_seq_free(&s);
    }
    enum splash_status st = gram_finalize(&b, root, "reasoning", out, err);
    gram_builder_free(&b);
    if (st == SPLASH_OK) {
        (*out)->reasoning = mode;
        (*out)->think_open = f->think_open;
        (*out)->think_close = f->think_close;
    }
    return st;
}

/* ==== requests ================================================================================ */

static enum splash_status spec_schema(json_t **spec, const json_t *schema, int strict,
                                      const char *field, struct splash_err *err)
{
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: missing or not a schema", field);
    *spec = json_pack("{s:s, s:O, s:b}", "type", "json_schema", "schema", schema, "strict", strict);
    return *spec ? SPLASH_OK : splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
}

/* type json_object / json_schema / text from an OpenAI-shaped format object */
static enum splash_status spec_format(json_t **spec, const json_t *fmt, const char *field,
                                      int nested, struct splash_err *err)
{
    if (!fmt || json_is_null(fmt))
        return SPLASH_OK;
    const char *type = json_string_value(json_object_get(fmt, "type"));
    if (!json_is_object(fmt) || !type)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s.type: missing", field);
    if (!strcmp(type, "text"))
        return SPLASH_OK;
    if (!strcmp(type, "json_object")) {
        *spec = json_pack("{s:s}", "type", "json_object");
        return *spec ? SPLASH_OK : splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    if (!strcmp(type, "json_schema")) {
        const json_t *holder = nested ? json_object_get(fmt, "json_schema") : fmt;
        char where[96];
        snprintf(where, sizeof where, "%s%s.schema", field, nested ? ".json_schema" : "");
        if (nested && !json_is_object(holder))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s.json_schema: missing", field);
        return spec_schema(spec, json_object_get(holder, "schema"),
                           json_is_true(json_object_get(holder, "strict")), where, err);
    }
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s.type: \"%s\" is not a format", field, type);
}

/* tool_choice: "required"/"any" -> all; a named function -> one; else none */
static enum splash_status spec_tools(json_t **spec, const json_t *tools, const char *name,
                                     int parallel, struct splash_err *err)
{
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "tool_choice: calls are required but there are no tools");
    json_t *s =
        json_pack("{s:s, s:O, s:b}", "type", "tool_calls", "tools", tools, "parallel", parallel);
    if (s && name)
        json_object_set_new(s, "name", json_string(name));
    if (!s)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    json_decref(*spec); /* a forced call outranks a response format */
    *spec = s;
    return SPLASH_OK;
}

enum splash_status splash_grammar_spec_from_chat(const json_t *body, json_t **spec,
                                                 struct splash_err *err)
{
    *spec = NULL;
    enum splash_status st =
        spec_format(spec, json_object_get(body, "response_format"), "response_format", 1, err);
    if (st)
        return st;
    const json_t *choice = json_object_get(body, "tool_choice");
    int parallel = !json_is_false(json_object_get(body, "parallel_tool_calls"));
    const char *name = NULL;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        if (!strcmp(c, "auto") || !strcmp(c, "none"))
            return SPLASH_OK;
        if (strcmp(c, "required"))
            goto bad;
    } else if (json_is_object(choice)) {
        const json_t *fn = json_object_get(choice, "function");
        name = json_string_value(json_object_get(fn, "name"));
        if (!name)
            goto bad;
        parallel = 0;
    } else if (choice && !json_is_null(choice)) {
        goto bad;
    } else {
        return SPLASH_OK;
    }
    st = spec_tools(spec, json_object_get(body, "tools"), name, parallel, err);
    if (st) {
        json_decref(*spec);
        *spec = NULL;
    }
    return st;
bad:
    json_decref(*spec);
    *spec = NULL;
    return splash_err_set(err, SPLASH_ERR_INVALID,
                          "tool_choice: \"none\", \"auto\", \"required\" or a named function");
}

enum splash_status splash_grammar_spec_from_responses(const json_t *body, json_t **spec,
                                                      struct splash_err *err)
{
    *spec = NULL;
    const json_t *text = json_object_get(body, "text");
    enum splash_status st =
        spec_format(spec, json_object_get(text, "format"), "text.format", 0, err);
    if (st)
        return st;
    const json_t *choice = json_object_get(body, "tool_choice");
    int parallel = !json_is_false(json_object_get(body, "parallel_tool_calls"));
    const char *name = NULL;
    if (!choice || json_is_null(choice))
        return SPLASH_OK;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        if (!strcmp(c, "auto") || !strcmp(c, "none"))
            return SPLASH_OK;
        if (strcmp(c, "required"))
            goto bad;
    } else if (json_is_object(choice)) {
        const char *type = json_string_value(json_object_get(choice, "type"));
        name = json_string_value(json_object_get(choice, "name"));
        if (!type || strcmp(type, "function") || !name)
            goto bad;
        parallel = 0;
    } else {
        goto bad;
    }
    st = spec_tools(spec, json_object_get(body, "tools"), name, parallel, err);
    if (st) {
        json_decref(*spec);
        *spec = NULL;
    }
    return st;
bad:
    json_decref(*spec);
    *spec = NULL;
    return splash_err_set(
        err, SPLASH_ERR_INVALID,
        "tool_choice: \"none\", \"auto\", \"required\" or {type: function, name}");
}

enum splash_status splash_grammar_spec_from_messages(const json_t *body, json_t **spec,
                                                     struct splash_err *err)
{
    *spec = NULL;
    const json_t *fmt = json_object_get(body, "output_format");
    const char *field = "output_format";
    if (!fmt) {
        fmt = json_object_get(json_object_get(body, "output_config"), "format");
        field = "output_config.format";
    }
    enum splash_status st = spec_format(spec, fmt, field, 0, err);
    if (st)
        return st;
    const json_t *choice = json_object_get(body, "tool_choice");
    if (!choice || json_is_null(choice))
        return SPLASH_OK;
    const char *type = json_string_value(json_object_get(choice, "type"));
    const char *name = NULL;
    int parallel = !json_is_true(json_object_get(choice, "disable_parallel_tool_use"));
    if (!json_is_object(choice) || !type)
        goto bad;
    if (!strcmp(type, "auto") || !strcmp(type, "none"))
        return SPLASH_OK;
    if (!strcmp(type, "tool")) {
        name = json_string_value(json_object_get(choice, "name"));
        if (!name)
            goto bad;
    } else if (strcmp(type, "any")) {
        goto bad;
    }
    st = spec_tools(spec, json_object_get(body, "tools"), name, parallel, err);
    if (st) {
        json_decref(*spec);
        *spec = NULL;
    }
    return st;
bad:
    json_decref(*spec);
    *spec = NULL;
    return splash_err_set(err, SPLASH_ERR_INVALID,
                          "tool_choice.type: \"auto\", \"any\", \"tool\" or \"none\"");
}

enum splash_status splash_grammar_compile_spec(const json_t *spec,
                                               const struct splash_grammar_format *f,
                                               struct splash_grammar **out, struct splash_err *err)
{
    const char *type = json_string_value(json_object_get(spec, "type"));
    const char *reasoning = json_string_value(json_object_get(spec, "reasoning"));
    enum splash_grammar_reasoning mode = SPLASH_GRAMMAR_REASONING_NONE;
    if (reasoning && !strcmp(reasoning, "open"))
        mode = SPLASH_GRAMMAR_REASONING_OPEN;
    else if (reasoning && !strcmp(reasoning, "optional"))
        mode = SPLASH_GRAMMAR_REASONING_OPTIONAL;
    else if (reasoning && strcmp(reasoning, "none"))
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar spec: reasoning \"%s\"", reasoning);
    if (f && f->calls == SPLASH_GRAMMAR_CALLS_HARMONY)
        return gram_compile_harmony(spec, mode != SPLASH_GRAMMAR_REASONING_NONE, f, out, err);
    struct splash_grammar *g = NULL;
    enum splash_status st;
    if (!type) {
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar spec: no type");
    } else if (!strcmp(type, "json_object")) {
        st = splash_grammar_compile_json_object(&g, err);
    } else if (!strcmp(type, "json_schema")) {
        unsigned flags =
            json_is_true(json_object_get(spec, "strict")) ? SPLASH_GRAMMAR_JSON_STRICT : 0;
        st = splash_grammar_compile_json_schema(json_object_get(spec, "schema"), flags, &g, err);
    } else if (!strcmp(type, "tool_calls")) {
        st = splash_grammar_compile_tool_calls(
            json_object_get(spec, "tools"), json_string_value(json_object_get(spec, "name")),
            !json_is_false(json_object_get(spec, "parallel")), f, &g, err);
    } else {
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar spec: type \"%s\"", type);
    }
    if (st)
        return st;
    if (mode == SPLASH_GRAMMAR_REASONING_NONE) {
        *out = g;
        return SPLASH_OK;
    }
    st = splash_grammar_wrap_reasoning(g, mode, f, out, err);
    splash_grammar_destroy(g);
    return st;
}

/* ==== warm-up ====================================================================================
 */

static void warm_grammar(const struct splash_grammar *g, const struct splash_grammar_vocab *v)
{
    for (uint32_t p = 0; p < g->n_elems; p++)
        if (g->elems[p].kind == GE_CLASS)
            gram_cache_get(g, v, &p, 1);
}

enum splash_status splash_grammar_vocab_warm(struct splash_grammar_vocab *v,
                                             const struct splash_grammar_format *f,
                                             struct splash_err *err)
{
    struct splash_grammar *g;
    enum splash_status st = splash_grammar_compile_json_object(&g, err);
    if (st)
        return st;
    warm_grammar(g, v);
    splash_grammar_destroy(g);
    /* harmony writes arguments as JSON only: the object above covers them */
    if (!f || f->calls == SPLASH_GRAMMAR_CALLS_HARMONY)
        return SPLASH_OK;
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                               "\"parameters\":{\"type\":\"object\",\"properties\":{"
                               "\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"}}}}}]",
                               0, NULL);
    if (!tools)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "grammar warm-up: out of memory");
    st = splash_grammar_compile_tool_calls(tools, NULL, 1, f, &g, err);
    json_decref(tools);
    if (st)
        return st;
    warm_grammar(g, v);
    splash_grammar_destroy(g);
    return SPLASH_OK;
}
