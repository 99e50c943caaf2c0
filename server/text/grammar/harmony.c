/* Output grammars in OpenAI's harmony (gpt-oss). The prompt ends <|start|>assistant; the
 * model then writes one message: its header up to <|message|>, then its body. A
 * constrained request's message is the final channel's (its body the JSON asked for) or a
 * call's (" to=functions.NAME", the commentary channel, its arguments as a JSON object);
 * before it, when the request lets the model reason, an analysis message of free text
 * closed by <|end|> and a new <|start|>assistant. The stop (<|return|> after an answer,
 * <|call|> after a call) comes where the body is complete. */
#include <stdio.h>
#include <string.h>

#include "server/text/grammar/internal.h"

static void seq_tok(struct gram_builder *b, struct gram_seq *s, int32_t id)
{
    gram_seq_push(b, s, GE_TOKEN, (uint32_t)id);
}

/* <|channel|>analysis<|message|> any text <|end|><|start|>assistant */
static uint32_t analysis_message(struct gram_builder *b, const struct splash_grammar_format *f)
{
    struct gram_seq s = {0};
    struct gram_class any;
    memset(&any, 0xff, sizeof any);
    /* text ::= "" | byte text */
    uint32_t text = gram_rule_new(b);
    gram_alt_add(b, text, &s);
    gram_seq_class(b, &s, &any);
    gram_seq_ref(b, &s, text);
    gram_alt_add(b, text, &s);
    uint32_t msg = gram_rule_new(b);
    gram_seq_reset(&s);
    seq_tok(b, &s, f->channel);
    gram_seq_lit(b, &s, "analysis", 8);
    seq_tok(b, &s, f->message);
    gram_seq_ref(b, &s, text);
    seq_tok(b, &s, f->end);
    seq_tok(b, &s, f->start);
    gram_seq_lit(b, &s, "assistant", 9);
    gram_alt_add(b, msg, &s);
    gram_seq_free(&s);
    return msg;
}

/* The final channel's message whose body is a JSON value of schema. */
static uint32_t final_message(struct gram_builder *b, const struct splash_grammar_format *f,
                              const json_t *schema, unsigned flags, const char *path,
                              struct splash_err *err, enum splash_status *st)
{
    struct json_gen *jg = json_gen_create(b, schema, flags);
    if (!jg) {
        *st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
        return GRAM_INF;
    }
    uint32_t body = json_gen_value(jg, schema, path, err, st);
    json_gen_destroy(jg);
    if (body == GRAM_INF)
        return GRAM_INF;
    struct gram_seq s = {0};
    uint32_t msg = gram_rule_new(b);
    seq_tok(b, &s, f->channel);
    gram_seq_lit(b, &s, "final", 5);
    seq_tok(b, &s, f->message);
    gram_seq_ref(b, &s, body);
    gram_alt_add(b, msg, &s);
    gram_seq_free(&s);
    return msg;
}

/* A call's message to one of the function tools (only_name's alone when set): its
 * recipient, the commentary channel and JSON arguments matching its parameters. */
static uint32_t call_message(struct gram_builder *b, const struct splash_grammar_format *f,
                             const json_t *tools, const char *only_name, struct splash_err *err,
                             enum splash_status *st)
{
    if (!json_is_array(tools) || json_array_size(tools) == 0) {
        *st = splash_err_set(err, SPLASH_ERR_INVALID, "tools: not a non-empty array");
        return GRAM_INF;
    }
    json_t *object = json_pack("{s:s}", "type", "object");
    struct gram_seq s = {0};
    uint32_t msg = gram_rule_new(b);
    size_t n_fns = 0;
    for (size_t i = 0; i < json_array_size(tools) && *st == SPLASH_OK; i++) {
        const json_t *t = json_array_get(tools, i);
        const json_t *type = json_object_get(t, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "function"))
            continue; /* hosted and free-form tools take no JSON arguments here */
        char path[64];
        snprintf(path, sizeof path, "tools[%zu]", i);
        struct gram_tool tool;
        if (gram_tool_fields(t, &tool)) {
            *st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: no function name", path);
            break;
        }
        if (only_name && strcmp(only_name, tool.name))
            continue;
        const json_t *params = tool.params ? tool.params : object;
        struct json_gen *jg = json_gen_create(b, params, 0);
        if (!jg || !object) {
            json_gen_destroy(jg);
            *st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        uint32_t args = json_gen_value(jg, params, path, err, st);
        json_gen_destroy(jg);
        if (args == GRAM_INF)
            break;
        gram_seq_reset(&s);
        gram_seq_lit(b, &s, " to=functions.", 14);
        gram_seq_lit(b, &s, tool.name, strlen(tool.name));
        seq_tok(b, &s, f->channel);
        gram_seq_lit(b, &s, "commentary json", 15);
        seq_tok(b, &s, f->message);
        gram_seq_ref(b, &s, args);
        gram_alt_add(b, msg, &s);
        n_fns++;
    }
    json_decref(object);
    gram_seq_free(&s);
    if (*st == SPLASH_OK && n_fns == 0)
        *st = only_name ? splash_err_set(err, SPLASH_ERR_INVALID,
                                         "tool_choice: no function named \"%s\" among the tools",
                                         only_name)
                        : splash_err_set(err, SPLASH_ERR_INVALID, "tools: no function tool to call");
    return *st == SPLASH_OK ? msg : GRAM_INF;
}

enum splash_status gram_compile_harmony(const json_t *spec, int analysis,
                                        const struct splash_grammar_format *f,
                                        struct splash_grammar **out, struct splash_err *err)
{
    if (f->channel < 0 || f->message < 0 || f->start < 0 || f->end < 0)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "harmony: the format lacks its message tokens");
    const char *type = json_string_value(json_object_get(spec, "type"));
    struct gram_builder b;
    gram_builder_init(&b);
    enum splash_status st = SPLASH_OK;
    uint32_t msg = GRAM_INF;
    if (!type) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "grammar spec: no type");
    } else if (!strcmp(type, "json_object")) {
        json_t *object = json_pack("{s:s}", "type", "object");
        msg = object ? final_message(&b, f, object, 0, "schema", err, &st) : GRAM_INF;
        if (!object)
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "json_object: out of memory");
        json_decref(object);
    } else if (!strcmp(type, "json_schema")) {
        unsigned flags =
            json_is_true(json_object_get(spec, "strict")) ? SPLASH_GRAMMAR_JSON_STRICT : 0;
        msg = final_message(&b, f, json_object_get(spec, "schema"), flags, "schema", err, &st);
    } else if (!strcmp(type, "tool_calls")) {
        msg = call_message(&b, f, json_object_get(spec, "tools"),
                           json_string_value(json_object_get(spec, "name")), err, &st);
    } else {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "grammar spec: type \"%s\"", type);
    }
    if (msg == GRAM_INF && st == SPLASH_OK)
        st = b.nomem ? SPLASH_ERR_NOMEM : SPLASH_ERR_INTERNAL;
    if (st == SPLASH_OK) {
        /* output ::= msg | analysis msg */
        uint32_t root = gram_rule_new(&b);
        struct gram_seq s = {0};
        gram_seq_ref(&b, &s, msg);
        gram_alt_add(&b, root, &s);
        if (analysis) {
            gram_seq_reset(&s);
            gram_seq_ref(&b, &s, analysis_message(&b, f));
            gram_seq_ref(&b, &s, msg);
            gram_alt_add(&b, root, &s);
        }
        gram_seq_free(&s);
        st = gram_finalize(&b, root, "harmony", out, err);
    }
    gram_builder_free(&b);
    return st;
}
