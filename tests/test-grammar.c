/* The grammar matcher beyond JSON Schema: tool calls in Qwen XML and GLM argument
 * tags (random walks parsed by a parser written here), the reasoning wrapper,
 * UTF-8 characters split across tokens, stop tokens, rollback, and the request
 * shapes of the three APIs. Real vocabularies from ../shared/testdata. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/grammar.h"
#include "server/text/tokenizer/tokenizer.h"
#include "tests/support/testdata.h"

/* ---- vocabularies --------------------------------------------------------------------------- */

struct wv {
    struct splash_tokenizer *tok;
    struct splash_grammar_vocab *v;
    size_t n;
    const char **piece; /* special tokens by their text */
    size_t *len;
    uint8_t *special;
    int32_t stops[2];
    int32_t single[256];
    size_t n_single;
    struct splash_grammar_format fmt;
};

static struct wv qwen3, glm, small, harmony;

static void wv_finish(struct wv *w)
{
    w->n_single = 0;
    for (size_t i = 0; i < w->n; i++)
        if (!w->special[i] && w->len[i] == 1 && w->n_single < 256)
            w->single[w->n_single++] = (int32_t)i;
    struct splash_err err = {{0}};
    if (splash_grammar_vocab_create_raw(w->n, w->piece, w->len, w->special, w->stops, 2, &w->v,
                                        &err))
        fail_msg("vocab: %s", err.msg);
}

static void wv_load(struct wv *w, const char *rel, size_t extra)
{
    char path[512];
    struct splash_err err = {{0}};
    test_testdata_path(path, sizeof path, rel);
    if (splash_tokenizer_load(path, &w->tok, &err))
        fail_msg("%s: %s", rel, err.msg);
    size_t n = splash_tokenizer_n_tokens(w->tok);
    w->n = n + extra;
    w->piece = calloc(w->n, sizeof *w->piece);
    w->len = calloc(w->n, sizeof *w->len);
    w->special = calloc(w->n, 1);
    for (size_t i = 0; i < n; i++) {
        int type = splash_tokenizer_token_type(w->tok, (int32_t)i);
        w->special[i] = type != SPLASH_TOKEN_NORMAL && type != SPLASH_TOKEN_BYTE;
        w->piece[i] = splash_tokenizer_piece(w->tok, (int32_t)i, SPLASH_DETOK_SPECIAL, &w->len[i]);
    }
    w->stops[0] = splash_tokenizer_find_special(w->tok, "<|im_end|>");
    w->stops[1] = splash_tokenizer_find_special(w->tok, "<|endoftext|>");
}

static int setup(void **state)
{
    struct splash_err err = {{0}};
    wv_load(&qwen3, "tokenizer/qwen3-vocab.gguf", 0);
    wv_finish(&qwen3);
    if (splash_grammar_format_init(&qwen3.fmt, SPLASH_GRAMMAR_CALLS_QWEN_XML, qwen3.tok, &err))
        fail_msg("format: %s", err.msg);
    wv_load(&small, "vocab-small/qwen-small-vocab.gguf", 0);
    wv_finish(&small);
    assert_int_equal(
        splash_grammar_format_init(&small.fmt, SPLASH_GRAMMAR_CALLS_QWEN_XML, small.tok, &err),
        SPLASH_OK);
    /* GLM's argument tags as four more special tokens after the small vocabulary */
    wv_load(&glm, "vocab-small/qwen-small-vocab.gguf", 4);
    static const char *const tags[] = {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
    size_t base = glm.n - 4;
    for (size_t k = 0; k < 4; k++) {
        glm.piece[base + k] = tags[k];
        glm.len[base + k] = strlen(tags[k]);
        glm.special[base + k] = 1;
    }
    wv_finish(&glm);
    glm.fmt = (struct splash_grammar_format){
        .calls = SPLASH_GRAMMAR_CALLS_GLM_ARGS,
        .think_open = splash_tokenizer_find_special(glm.tok, "<think>"),
        .think_close = splash_tokenizer_find_special(glm.tok, "</think>"),
        .call_open = splash_tokenizer_find_special(glm.tok, "<tool_call>"),
        .call_close = splash_tokenizer_find_special(glm.tok, "</tool_call>"),
        .arg_key_open = (int32_t)base,
        .arg_key_close = (int32_t)base + 1,
        .arg_value_open = (int32_t)base + 2,
        .arg_value_close = (int32_t)base + 3,
    };
    /* harmony's message tokens after the small vocabulary, its stops <|call|> and <|return|> */
    wv_load(&harmony, "vocab-small/qwen-small-vocab.gguf", 6);
    static const char *const marks[] = {"<|channel|>", "<|message|>", "<|start|>",
                                        "<|end|>",     "<|call|>",    "<|return|>"};
    base = harmony.n - 6;
    for (size_t k = 0; k < 6; k++) {
        harmony.piece[base + k] = marks[k];
        harmony.len[base + k] = strlen(marks[k]);
        harmony.special[base + k] = 1;
    }
    harmony.stops[0] = (int32_t)base + 4;
    harmony.stops[1] = (int32_t)base + 5;
    wv_finish(&harmony);
    harmony.fmt = (struct splash_grammar_format){.calls = SPLASH_GRAMMAR_CALLS_HARMONY,
                                                 .think_open = -1,
                                                 .think_close = -1,
                                                 .call_open = (int32_t)base + 4,
                                                 .call_close = (int32_t)base + 4,
                                                 .arg_key_open = -1,
                                                 .arg_key_close = -1,
                                                 .arg_value_open = -1,
                                                 .arg_value_close = -1,
                                                 .channel = (int32_t)base,
                                                 .message = (int32_t)base + 1,
                                                 .start = (int32_t)base + 2,
                                                 .end = (int32_t)base + 3};
    return 0;
}

static void wv_free(struct wv *w)
{
    splash_grammar_vocab_destroy(w->v);
    splash_tokenizer_destroy(w->tok);
    free(w->piece);
    free(w->len);
    free(w->special);
}

static int teardown(void **state)
{
    wv_free(&qwen3);
    wv_free(&small);
    wv_free(&glm);
    wv_free(&harmony);
    return 0;
}

/* ---- walks ------------------------------------------------------------------------------------
 */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int allowed(const uint32_t *mask, int32_t id)
{
    return (mask[id / 32] >> (id % 32)) & 1u;
}

static int is_stop(const struct wv *w, int32_t id)
{
    return id == w->stops[0] || id == w->stops[1];
}

struct text {
    char *s;
    size_t n, cap;
};

static void text_add(struct text *t, const char *p, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
    t->s[t->n] = 0;
}

/* Random allowed tokens for budget steps (think_steps of them inside a think
 * block), then the tokens nearest the end, until a stop. check_all tries every
 * token at every step against the mask. */
static char *walk(struct wv *w, const struct splash_grammar *g, uint64_t seed, int think_steps,
                  int budget, int check_all)
{
    struct splash_err err = {{0}};
    struct splash_grammar_matcher *m;
    if (splash_grammar_matcher_create(g, w->v, &m, &err))
        fail_msg("matcher: %s", err.msg);
    uint32_t *mask = malloc(splash_grammar_mask_words(w->v) * sizeof *mask);
    int32_t *ids = malloc(w->n * sizeof *ids);
    struct text t = {0};
    text_add(&t, "", 0);
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 3;
    int thought = 0;
    for (int step = 0;; step++) {
        if (step > 4000)
            fail_msg("walk did not end: %s", t.s);
        splash_grammar_matcher_fill_mask(m, mask);
        size_t n = 0;
        int32_t stop = -1;
        for (size_t i = 0; i < w->n; i++)
            if (allowed(mask, (int32_t)i)) {
                if (is_stop(w, (int32_t)i))
                    stop = (int32_t)i;
                else
                    ids[n++] = (int32_t)i;
            }
        if (check_all)
            for (size_t i = 0; i < w->n; i++) {
                enum splash_status st = splash_grammar_matcher_accept_token(m, (int32_t)i, &err);
                if ((st == SPLASH_OK) != allowed(mask, (int32_t)i))
                    fail_msg("token %zu: mask %d, matcher %s, after \"%s\"", i,
                             allowed(mask, (int32_t)i), st ? err.msg : "takes it", t.s);
                if (st == SPLASH_OK)
                    assert_int_equal(splash_grammar_matcher_rollback(m, 1), 1);
            }
        assert_int_equal(stop >= 0, splash_grammar_matcher_is_complete(m));
        if (n == 0 && stop < 0)
            fail_msg("nothing allowed after \"%s\"", t.s);
        int32_t pick = -1;
        int32_t close = splash_grammar_matcher_in_thinking(m) ? w->fmt.think_close : -1;
        if (close >= 0) {
            /* think freely, then close between whole characters */
            if (thought++ >= think_steps && allowed(mask, close))
                pick = close;
            else
                do
                    pick = ids[rnd(&rng) % n];
                while (pick == close);
        } else if (stop >= 0 && (step >= budget || n == 0 || rnd(&rng) % 4 == 0)) {
            pick = stop;
        } else if (step < budget) {
            pick = ids[rnd(&rng) % n];
        } else {
            size_t best = SIZE_MAX;
            for (size_t k = 0; k < w->n_single + 64 + n; k++) {
                int32_t c =
                    k < w->n_single ? w->single[k]
                    : k < w->n_single + 64
                        ? ids[rnd(&rng) % n]
                        : (w->special[ids[k - w->n_single - 64]] ? ids[k - w->n_single - 64] : -1);
                if (c < 0 || !allowed(mask, c) || is_stop(w, c))
                    continue;
                if (splash_grammar_matcher_accept_token(m, c, &err))
                    fail_msg("allowed token %d refused: %s", c, err.msg);
                size_t d = splash_grammar_matcher_distance(m);
                splash_grammar_matcher_rollback(m, 1);
                if (d < best || (d == best && rnd(&rng) % 2)) {
                    best = d;
                    pick = c;
                }
            }
        }
        if (splash_grammar_matcher_accept_token(m, pick, &err))
            fail_msg("allowed token %d refused: %s", pick, err.msg);
        if (pick == stop)
            break;
        text_add(&t, w->piece[pick], w->len[pick]);
    }
    assert_true(splash_grammar_matcher_is_stopped(m));
    splash_grammar_matcher_destroy(m);
    free(mask);
    free(ids);
    return t.s;
}

/* ---- tool calls: a parser and a validator of their own -----------------------------------------
 */

static int value_ok(const json_t *schema, const char *raw, size_t len)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    const json_t *en = json_object_get(schema, "enum");
    json_t *v;
    if (type && !strcmp(type, "string")) {
        v = json_stringn(raw, len); /* raw strings, as the format writes them */
    } else {
        v = json_loadb(raw, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    }
    if (!v)
        return 0;
    int ok = 1;
    if (type) {
        if (!strcmp(type, "string"))
            ok = json_is_string(v);
        else if (!strcmp(type, "integer"))
            ok = json_is_integer(v);
        else if (!strcmp(type, "number"))
            ok = json_is_number(v);
        else if (!strcmp(type, "boolean"))
            ok = json_is_boolean(v);
        else if (!strcmp(type, "object"))
            ok = json_is_object(v);
        else if (!strcmp(type, "array"))
            ok = json_is_array(v);
    }
    if (ok && en) {
        int found = 0;
        for (size_t i = 0; i < json_array_size(en); i++)
            found |= json_equal(json_array_get(en, i), v);
        ok = found;
    }
    const json_t *k;
    if (ok && (k = json_object_get(schema, "minimum")))
        ok = json_number_value(v) >= json_number_value(k);
    if (ok && (k = json_object_get(schema, "maximum")))
        ok = json_number_value(v) <= json_number_value(k);
    if (ok && json_is_array(v) && (k = json_object_get(schema, "items")))
        for (size_t i = 0; i < json_array_size(v) && ok; i++) {
            const char *it = json_string_value(json_object_get(k, "type"));
            ok = !it || strcmp(it, "string") || json_is_string(json_array_get(v, i));
        }
    if (ok && json_is_object(v) && (k = json_object_get(schema, "required")))
        for (size_t i = 0; i < json_array_size(k) && ok; i++)
            ok = json_object_get(v, json_string_value(json_array_get(k, i))) != NULL;
    json_decref(v);
    return ok;
}

static const json_t *find_tool(const json_t *tools, const char *name, size_t len)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (n && strlen(n) == len && !memcmp(n, name, len))
            return json_object_get(fn, "parameters");
    }
    return NULL;
}

static int eat(const char **p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*p, lit, n))
        return 0;
    *p += n;
    return 1;
}

/* Checks one call's arguments: known names, no repeats, required present, values valid. */
struct args {
    const char *key[16];
    size_t key_len[16];
    int n;
};

static int args_ok(const json_t *params, const struct args *a)
{
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < i; j++)
            if (a->key_len[i] == a->key_len[j] && !memcmp(a->key[i], a->key[j], a->key_len[i]))
                return 0;
    for (size_t r = 0; r < json_array_size(req); r++) {
        const char *name = json_string_value(json_array_get(req, r));
        int found = 0;
        for (int i = 0; i < a->n; i++)
            found |= a->key_len[i] == strlen(name) && !memcmp(a->key[i], name, a->key_len[i]);
        if (!found)
            return 0;
    }
    (void)props;
    return 1;
}

/* "<tool_call>\n<function=N>\n(<parameter=K>\nV\n</parameter>\n)*</function>\n</tool_call>" joined
 * by "\n" */
static int parse_qwen_calls(const char *text, const json_t *tools, const char *only, int *n_calls)
{
    const char *p = text;
    *n_calls = 0;
    for (;;) {
        if (*n_calls && !eat(&p, "\n"))
            return 0;
        if (!eat(&p, "<tool_call>\n<function="))
            return 0;
        const char *name = p, *gt = strstr(p, ">\n");
        if (!gt)
            return 0;
        const json_t *params = find_tool(tools, name, (size_t)(gt - name));
        if (!params && !json_is_object(params))
            return 0;
        if (only && (strlen(only) != (size_t)(gt - name) || memcmp(only, name, strlen(only))))
            return 0;
        p = gt + 2;
        struct args a = {.n = 0};
        while (eat(&p, "<parameter=")) {
            const char *key = p, *kgt = strstr(p, ">\n");
            if (!kgt || a.n == 16)
                return 0;
            p = kgt + 2;
            const char *end = strstr(p, "\n</parameter>\n");
            if (!end)
                return 0;
            json_t *schema =
                json_object_getn(json_object_get(params, "properties"), key, (size_t)(kgt - key));
            if (!schema || !value_ok(schema, p, (size_t)(end - p)))
                return 0;
            a.key[a.n] = key;
            a.key_len[a.n++] = (size_t)(kgt - key);
            p = end + strlen("\n</parameter>\n");
        }
        if (!args_ok(params, &a) || !eat(&p, "</function>\n</tool_call>"))
            return 0;
        (*n_calls)++;
        if (!*p)
            return 1;
    }
}

/* "<tool_call>N(<arg_key>K</arg_key><arg_value>V</arg_value>)*</tool_call>" repeated */
static int parse_glm_calls(const char *text, const json_t *tools, int *n_calls)
{
    const char *p = text;
    *n_calls = 0;
    while (*p) {
        if (!eat(&p, "<tool_call>"))
            return 0;
        const char *name = p;
        while (*p && *p != '<')
            p++;
        const json_t *params = find_tool(tools, name, (size_t)(p - name));
        if (!params)
            return 0;
        struct args a = {.n = 0};
        while (eat(&p, "<arg_key>")) {
            const char *key = p, *kend = strstr(p, "</arg_key><arg_value>");
            if (!kend || a.n == 16)
                return 0;
            p = kend + strlen("</arg_key><arg_value>");
            const char *end = strstr(p, "</arg_value>");
            if (!end)
                return 0;
            json_t *schema =
                json_object_getn(json_object_get(params, "properties"), key, (size_t)(kend - key));
            if (!schema || !value_ok(schema, p, (size_t)(end - p)))
                return 0;
            a.key[a.n] = key;
            a.key_len[a.n++] = (size_t)(kend - key);
            p = end + strlen("</arg_value>");
        }
        if (!args_ok(params, &a) || !eat(&p, "</tool_call>"))
            return 0;
        (*n_calls)++;
    }
    return *n_calls > 0;
}

static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14}},"
    "\"required\":[\"location\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"run_shell\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"},"
    "\"env\":{\"type\":\"object\"},\"timeout\":{\"type\":\"number\"},"
    "\"args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},"
    "\"required\":[\"command\",\"args\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"create_user\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"profile\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"admin\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"admin\"],\"additionalProperties\":false},"
    "\"notify\":{\"type\":\"boolean\"}},\"required\":[\"profile\"]}}}]";

/* Every subset of tools tried gives calls that parse and validate. */
static void tool_walks(struct wv *w, int walks, int check_all)
{
    json_t *all = json_loads(tools_json, 0, NULL);
    assert_non_null(all);
    static const unsigned sets[] = {0x1, 0x2, 0x3, 0x4, 0x8, 0xf, 0xa};
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        json_t *tools = json_array();
        for (size_t i = 0; i < 4; i++)
            if (sets[s] & (1u << i))
                json_array_append(tools, json_array_get(all, i));
        for (int named = 0; named < 2; named++) {
            const char *only =
                named ? json_string_value(json_object_get(
                            json_object_get(json_array_get(tools, 0), "function"), "name"))
                      : NULL;
            struct splash_err err = {{0}};
            struct splash_grammar *g;
            if (splash_grammar_compile_tool_calls(tools, only, !named, &w->fmt, &g, &err))
                fail_msg("tools: %s", err.msg);
            for (int k = 0; k < walks; k++) {
                char *out = walk(w, g, (uint64_t)(s * 100 + (size_t)k + 1), 0, 40, check_all);
                int n_calls = 0;
                int ok = w->fmt.calls == SPLASH_GRAMMAR_CALLS_QWEN_XML
                             ? parse_qwen_calls(out, tools, only, &n_calls)
                             : parse_glm_calls(out, tools, &n_calls);
                if (!ok || (named && n_calls != 1))
                    fail_msg("set %zu named %d walk %d: not valid calls: %s", s, named, k, out);
                free(out);
            }
            splash_grammar_destroy(g);
        }
        json_decref(tools);
    }
    json_decref(all);
}

/* Agents' tool schemas bound string lengths often: a raw-string value (Qwen's XML
 * parameters) compiles with them (unchecked there), a JSON one (GLM's) enforces them. */
static void test_grammar_tool_calls_accept_string_length_bounds(void **state)
{
    json_t *tools = json_loads(
        "[{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"parameters\":{"
        "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"minLength\":1,"
        "\"maxLength\":200},\"body\":{\"type\":\"string\",\"maxLength\":4}},"
        "\"required\":[\"path\"]}}}]",
        0, NULL);
    assert_non_null(tools);
    const struct wv *formats[] = {&qwen3, &glm};
    for (size_t f = 0; f < 2; f++) {
        struct splash_err err = {{0}};
        struct splash_grammar *g = NULL;
        if (splash_grammar_compile_tool_calls(tools, "write_file", 0, &formats[f]->fmt, &g, &err))
            fail_msg("format %zu: %s", f, err.msg);
        splash_grammar_destroy(g);
    }
    json_decref(tools);
}

static void test_grammar_tool_calls_qwen_xml(void **state)
{
    tool_walks(&qwen3, 15, 0);
}

static void test_grammar_tool_calls_qwen_xml_masks_exact(void **state)
{
    tool_walks(&small, 2, 1);
}

static void test_grammar_tool_calls_glm_args(void **state)
{
    tool_walks(&glm, 15, 0);
    tool_walks(&glm, 1, 1);
}

static void test_grammar_tool_calls_refusals(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *g = NULL;
    json_t *tools = json_loads(tools_json, 0, NULL);
    assert_int_equal(splash_grammar_compile_tool_calls(tools, "nope", 0, &qwen3.fmt, &g, &err),
                     SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "\"nope\""));
    json_t *bad = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                             "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\","
                             "\"pattern\":\"a\"}}}}}]",
                             0, NULL);
    assert_int_equal(splash_grammar_compile_tool_calls(bad, NULL, 1, &qwen3.fmt, &g, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "\"pattern\""));
    assert_non_null(strstr(err.msg, "tools[0].parameters.properties.x"));
    json_decref(bad);
    json_decref(tools);
}

/* ---- reasoning --------------------------------------------------------------------------------
 */

static json_t *after_think(const char *out)
{
    const char *p = strstr(out, "</think>");
    if (!p)
        return NULL;
    p += strlen("</think>");
    for (int k = 0; k < 2 && *p == '\n'; k++)
        p++;
    return json_loads(p, JSON_REJECT_DUPLICATES, NULL);
}

static void test_grammar_reasoning_open_then_json(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *obj, *g;
    assert_int_equal(splash_grammar_compile_json_object(&obj, &err), SPLASH_OK);
    assert_int_equal(
        splash_grammar_wrap_reasoning(obj, SPLASH_GRAMMAR_REASONING_OPEN, &qwen3.fmt, &g, &err),
        SPLASH_OK);
    for (int k = 0; k < 20; k++) {
        char *out = walk(&qwen3, g, (uint64_t)k + 77, 5 + k, 30, 0);
        json_t *v = after_think(out);
        if (!json_is_object(v))
            fail_msg("walk %d: %s", k, out);
        json_decref(v);
        free(out);
    }
    /* the mask in the think block: everything but the stops */
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, qwen3.v, &m, &err), SPLASH_OK);
    uint32_t *mask = malloc(splash_grammar_mask_words(qwen3.v) * sizeof *mask);
    splash_grammar_matcher_fill_mask(m, mask);
    assert_true(splash_grammar_matcher_in_thinking(m));
    assert_true(allowed(mask, qwen3.fmt.call_open));
    assert_true(allowed(mask, qwen3.fmt.think_close));
    assert_false(allowed(mask, qwen3.stops[0]));
    assert_false(allowed(mask, qwen3.stops[1]));
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, qwen3.stops[0], &err), SPLASH_OK);
    free(mask);
    splash_grammar_matcher_destroy(m);
    splash_grammar_destroy(g);
    splash_grammar_destroy(obj);
}

static void test_grammar_reasoning_optional_block(void **state)
{
    struct splash_err err = {{0}};
    json_t *tools = json_loads(tools_json, 0, NULL);
    json_t *spec = json_pack("{s:s, s:O, s:s, s:b}", "type", "tool_calls", "tools", tools,
                             "reasoning", "optional", "parallel", 1);
    struct splash_grammar *g;
    if (splash_grammar_compile_spec(spec, &glm.fmt, &g, &err))
        fail_msg("spec: %s", err.msg);
    uint32_t *mask = malloc(splash_grammar_mask_words(glm.v) * sizeof *mask);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, glm.v, &m, &err), SPLASH_OK);
    splash_grammar_matcher_fill_mask(m, mask);
    /* the first token may open a think block or start the call */
    assert_true(allowed(mask, glm.fmt.think_open));
    assert_true(allowed(mask, glm.fmt.call_open));
    assert_false(allowed(mask, glm.fmt.think_close));
    assert_int_equal(splash_grammar_matcher_accept_token(m, glm.fmt.think_open, &err), SPLASH_OK);
    assert_true(splash_grammar_matcher_in_thinking(m));
    /* a <tool_call> inside the think block is reasoning */
    assert_int_equal(splash_grammar_matcher_accept_token(m, glm.fmt.call_open, &err), SPLASH_OK);
    assert_true(splash_grammar_matcher_in_thinking(m));
    splash_grammar_matcher_destroy(m);
    for (int k = 0; k < 10; k++) {
        char *out = walk(&glm, g, (uint64_t)k + 5, 3, 30, 0);
        const char *calls = strstr(out, "</think>");
        calls = calls ? calls + strlen("</think>") : out;
        while (*calls == '\n')
            calls++;
        int n_calls;
        if (!parse_glm_calls(calls, tools, &n_calls))
            fail_msg("walk %d: %s", k, out);
        free(out);
    }
    free(mask);
    splash_grammar_destroy(g);
    json_decref(spec);
    json_decref(tools);
}

static int32_t single_of(const struct wv *w, unsigned char c)
{
    for (size_t k = 0; k < w->n_single; k++)
        if ((unsigned char)w->piece[w->single[k]][0] == c)
            return w->single[k];
    fail_msg("no token for byte %02x", c);
    return -1;
}

/* Feeds text one single-byte token at a time; the status of the first refusal. */
static enum splash_status feed(struct splash_grammar_matcher *m, const struct wv *w,
                               const char *text)
{
    struct splash_err err = {{0}};
    for (const char *c = text; *c; c++) {
        enum splash_status st = splash_grammar_matcher_accept_token(m, single_of(w, (unsigned char)*c), &err);
        if (st)
            return st;
    }
    return SPLASH_OK;
}

static enum splash_status tok(struct splash_grammar_matcher *m, int32_t id)
{
    struct splash_err err = {{0}};
    return splash_grammar_matcher_accept_token(m, id, &err);
}

static struct splash_grammar *harmony_grammars[16];
static int n_harmony_grammars;

static struct splash_grammar_matcher *harmony_matcher(const char *spec_text)
{
    struct splash_err err = {{0}};
    json_t *spec = json_loads(spec_text, 0, NULL);
    assert_non_null(spec);
    struct splash_grammar *g;
    if (splash_grammar_compile_spec(spec, &harmony.fmt, &g, &err))
        fail_msg("spec: %s", err.msg);
    json_decref(spec);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, harmony.v, &m, &err), SPLASH_OK);
    assert_true(n_harmony_grammars < 16);
    harmony_grammars[n_harmony_grammars++] = g; /* the test frees them after their matchers */
    return m;
}

/* Harmony: the final channel's header, then the JSON asked for; an analysis message of
 * free text may come first when reasoning is allowed; a call is its recipient's header
 * and JSON arguments; the stop only where the message is complete. */
static void test_grammar_harmony_messages(void **state)
{
    const struct splash_grammar_format *f = &harmony.fmt;
    int32_t ret = harmony.stops[1], call = harmony.stops[0];
    const char *schema = "{\"type\": \"json_schema\", \"strict\": true, \"reasoning\": \"optional\","
                         " \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
                         "\"integer\"}}, \"required\": [\"a\"]}}";
    struct splash_grammar_matcher *m = harmony_matcher(schema);
    uint32_t *mask = malloc(splash_grammar_mask_words(harmony.v) * sizeof *mask);
    splash_grammar_matcher_fill_mask(m, mask);
    assert_true(allowed(mask, f->channel));
    assert_false(allowed(mask, f->message) || allowed(mask, f->end) || allowed(mask, ret));
    assert_false(allowed(mask, single_of(&harmony, '{')));
    /* analysis, then the final message */
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "analysis"), SPLASH_OK);
    assert_int_equal(tok(m, f->message), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "Some {free} thought."), SPLASH_OK);
    splash_grammar_matcher_fill_mask(m, mask);
    assert_true(allowed(mask, f->end));
    assert_false(allowed(mask, ret));
    assert_int_equal(tok(m, f->end), SPLASH_OK);
    assert_int_equal(tok(m, f->start), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "assistant"), SPLASH_OK);
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "final"), SPLASH_OK);
    assert_int_equal(tok(m, f->message), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "{\"a\": 1"), SPLASH_OK);
    assert_int_equal(tok(m, ret), SPLASH_ERR_INVALID); /* not complete yet */
    assert_int_equal(feed(m, &harmony, "}"), SPLASH_OK);
    assert_true(splash_grammar_matcher_is_complete(m));
    assert_int_equal(tok(m, ret), SPLASH_OK);
    splash_grammar_matcher_destroy(m);
    /* straight to the final message; its body must be the schema's */
    m = harmony_matcher(schema);
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "final"), SPLASH_OK);
    assert_int_equal(tok(m, f->message), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "{\"b\""), SPLASH_ERR_INVALID);
    splash_grammar_matcher_destroy(m);
    /* no analysis without reasoning; the commentary channel is no answer */
    m = harmony_matcher("{\"type\": \"json_object\", \"reasoning\": \"none\"}");
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "analysis"), SPLASH_ERR_INVALID);
    splash_grammar_matcher_destroy(m);
    /* a call: its recipient among the tools, the commentary channel, JSON arguments */
    const char *calls =
        "{\"type\": \"tool_calls\", \"reasoning\": \"optional\", \"parallel\": true, \"tools\": "
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"enum\": "
        "[\"Oslo\"]}}, \"required\": [\"city\"], \"additionalProperties\": false}}}]}";
    m = harmony_matcher(calls);
    assert_int_equal(feed(m, &harmony, " to=functions.get_weather"), SPLASH_OK);
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "commentary json"), SPLASH_OK);
    assert_int_equal(tok(m, f->message), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "{\"city\": \"Oslo\"}"), SPLASH_OK);
    assert_int_equal(tok(m, call), SPLASH_OK);
    splash_grammar_matcher_destroy(m);
    m = harmony_matcher(calls);
    assert_int_equal(feed(m, &harmony, " to=functions.get_time"), SPLASH_ERR_INVALID);
    splash_grammar_matcher_destroy(m);
    /* a call is no final answer */
    m = harmony_matcher(calls);
    assert_int_equal(tok(m, f->channel), SPLASH_OK);
    assert_int_equal(feed(m, &harmony, "final"), SPLASH_ERR_INVALID);
    splash_grammar_matcher_destroy(m);
    free(mask);
    while (n_harmony_grammars)
        splash_grammar_destroy(harmony_grammars[--n_harmony_grammars]);
}

/* A thinking budget may end the block only between whole characters. */
static void test_grammar_thinking_ends_between_characters(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *obj, *g;
    assert_int_equal(splash_grammar_compile_json_object(&obj, &err), SPLASH_OK);
    assert_int_equal(
        splash_grammar_wrap_reasoning(obj, SPLASH_GRAMMAR_REASONING_OPEN, &small.fmt, &g, &err),
        SPLASH_OK);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, small.v, &m, &err), SPLASH_OK);
    uint32_t *mask = malloc(splash_grammar_mask_words(small.v) * sizeof *mask);
    assert_true(splash_grammar_matcher_thinking_at_char_boundary(m));
    /* U+4E2D, three bytes, one token each */
    const unsigned char zh[] = {0xe4, 0xb8, 0xad};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, zh[k]), &err),
                         SPLASH_OK);
        splash_grammar_matcher_fill_mask(m, mask);
        int boundary = k == 2;
        assert_int_equal(splash_grammar_matcher_thinking_at_char_boundary(m), boundary);
        assert_int_equal(allowed(mask, small.fmt.think_close), boundary);
        if (!boundary)
            assert_int_not_equal(
                splash_grammar_matcher_accept_token(m, small.fmt.think_close, &err), SPLASH_OK);
    }
    assert_int_equal(splash_grammar_matcher_accept_token(m, small.fmt.think_close, &err),
                     SPLASH_OK);
    assert_false(splash_grammar_matcher_in_thinking(m));
    free(mask);
    splash_grammar_matcher_destroy(m);
    splash_grammar_destroy(g);
    splash_grammar_destroy(obj);
}

/* ---- characters split across tokens, stops, rollback --------------------------------------------
 */

static void test_grammar_utf8_across_tokens(void **state)
{
    struct splash_err err = {{0}};
    json_t *schema = json_loads("{\"type\":\"string\"}", 0, NULL);
    struct splash_grammar *g;
    assert_int_equal(splash_grammar_compile_json_schema(schema, 0, &g, &err), SPLASH_OK);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, small.v, &m, &err), SPLASH_OK);
    uint32_t *mask = malloc(splash_grammar_mask_words(small.v) * sizeof *mask);
    assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '"'), &err),
                     SPLASH_OK);
    /* U+1F600 in four one-byte tokens: inside it only continuation bytes */
    const unsigned char emoji[] = {0xf0, 0x9f, 0x98, 0x80};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, emoji[k]), &err),
                         SPLASH_OK);
        splash_grammar_matcher_fill_mask(m, mask);
        int inside = k < 3;
        assert_int_equal(allowed(mask, single_of(&small, '"')), !inside);
        assert_int_equal(allowed(mask, single_of(&small, 'a')), !inside);
        if (inside)
            assert_true(allowed(mask, single_of(&small, emoji[k + 1])));
        /* after F0 the next byte is 90..BF (no overlong form) */
        assert_int_equal(allowed(mask, single_of(&small, 0x80)), k == 1 || k == 2);
        assert_false(allowed(mask, single_of(&small, 0xf0)) && inside);
    }
    /* a continuation byte with nothing to continue, and an overlong lead byte */
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, single_of(&small, 0x80), &err),
                         SPLASH_OK);
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, single_of(&small, 0xc0), &err),
                         SPLASH_OK);
    assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '"'), &err),
                     SPLASH_OK);
    assert_true(splash_grammar_matcher_is_complete(m));
    free(mask);
    splash_grammar_matcher_destroy(m);
    splash_grammar_destroy(g);
    json_decref(schema);
}

static void test_grammar_stop_only_when_complete(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *g;
    assert_int_equal(splash_grammar_compile_json_object(&g, &err), SPLASH_OK);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, small.v, &m, &err), SPLASH_OK);
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, small.stops[0], &err), SPLASH_OK);
    assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '{'), &err),
                     SPLASH_OK);
    assert_false(splash_grammar_matcher_is_complete(m));
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, small.stops[1], &err), SPLASH_OK);
    assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '}'), &err),
                     SPLASH_OK);
    assert_true(splash_grammar_matcher_is_complete(m));
    assert_int_equal(splash_grammar_matcher_distance(m), 0);
    /* nothing after the object but a stop */
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, single_of(&small, ' '), &err),
                         SPLASH_OK);
    assert_int_equal(splash_grammar_matcher_accept_token(m, small.stops[0], &err), SPLASH_OK);
    assert_true(splash_grammar_matcher_is_stopped(m));
    assert_int_not_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '{'), &err),
                         SPLASH_OK);
    splash_grammar_matcher_destroy(m);
    splash_grammar_destroy(g);
}

static void test_grammar_rollback_restores_masks(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *g;
    json_t *schema =
        json_loads("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                   "\"required\":[\"a\"]}",
                   0, NULL);
    assert_int_equal(splash_grammar_compile_json_schema(schema, 0, &g, &err), SPLASH_OK);
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, small.v, &m, &err), SPLASH_OK);
    size_t words = splash_grammar_mask_words(small.v);
    uint32_t *a = malloc(words * sizeof *a), *b = malloc(words * sizeof *b);
    assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, '{'), &err),
                     SPLASH_OK);
    splash_grammar_matcher_fill_mask(m, a);
    assert_int_equal(splash_grammar_matcher_distance(m), strlen("\"a\":0}"));
    const char *more = "\"a\": 1";
    for (const char *p = more; *p; p++)
        assert_int_equal(splash_grammar_matcher_accept_token(m, single_of(&small, *p), &err),
                         SPLASH_OK);
    assert_int_equal(splash_grammar_matcher_rollback(m, strlen(more)), strlen(more));
    splash_grammar_matcher_fill_mask(m, b);
    assert_memory_equal(a, b, words * sizeof *a);
    assert_int_equal(splash_grammar_matcher_rollback(m, 10), 1);
    free(a);
    free(b);
    splash_grammar_matcher_destroy(m);
    splash_grammar_destroy(g);
    json_decref(schema);
}

/* ---- request shapes -----------------------------------------------------------------------------
 */

static json_t *spec_of(int api, const char *body_text)
{
    json_t *body = json_loads(body_text, 0, NULL);
    assert_non_null(body);
    json_t *spec = NULL;
    struct splash_err err = {{0}};
    enum splash_status st = api == 0   ? splash_grammar_spec_from_chat(body, &spec, &err)
                            : api == 1 ? splash_grammar_spec_from_responses(body, &spec, &err)
                                       : splash_grammar_spec_from_messages(body, &spec, &err);
    if (st)
        fail_msg("%s: %s", body_text, err.msg);
    json_decref(body);
    return spec;
}

static void test_grammar_request_specs(void **state)
{
    json_t *s;
    s = spec_of(0, "{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
                   "\"schema\":{\"type\":\"object\"},\"strict\":true}}}");
    assert_string_equal(json_string_value(json_object_get(s, "type")), "json_schema");
    assert_true(json_is_true(json_object_get(s, "strict")));
    json_decref(s);
    s = spec_of(0, "{\"response_format\":{\"type\":\"json_object\"},\"tools\":[{\"type\":"
                   "\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\"}");
    assert_string_equal(json_string_value(json_object_get(s, "type")), "tool_calls");
    assert_true(json_is_true(json_object_get(s, "parallel")));
    json_decref(s);
    s = spec_of(0, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                   "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}");
    assert_string_equal(json_string_value(json_object_get(s, "name")), "f");
    json_decref(s);
    assert_null(spec_of(0, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                           "\"tool_choice\":\"auto\"}"));
    assert_null(spec_of(0, "{\"response_format\":{\"type\":\"text\"}}"));
    s = spec_of(1, "{\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\",\"schema\":"
                   "{\"type\":\"string\"}}}}");
    assert_string_equal(json_string_value(json_object_get(s, "type")), "json_schema");
    json_decref(s);
    s = spec_of(1, "{\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{}}],"
                   "\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}");
    assert_string_equal(json_string_value(json_object_get(s, "name")), "f");
    json_decref(s);
    s = spec_of(2, "{\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
                   "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true}}");
    assert_string_equal(json_string_value(json_object_get(s, "type")), "tool_calls");
    assert_true(json_is_false(json_object_get(s, "parallel")));
    /* the Anthropic tool shape compiles */
    struct splash_err err = {{0}};
    struct splash_grammar *g;
    if (splash_grammar_compile_spec(s, &qwen3.fmt, &g, &err))
        fail_msg("compile: %s", err.msg);
    splash_grammar_destroy(g);
    json_decref(s);
    s = spec_of(2,
                "{\"output_format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}}");
    assert_string_equal(json_string_value(json_object_get(s, "type")), "json_schema");
    json_decref(s);
    assert_null(spec_of(2, "{\"tool_choice\":{\"type\":\"auto\"}}"));
    /* refusals name the field */
    json_t *body = json_loads("{\"tool_choice\":\"required\"}", 0, NULL);
    json_t *spec = NULL;
    assert_int_equal(splash_grammar_spec_from_chat(body, &spec, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tool_choice"));
    json_decref(body);
    body =
        json_loads("{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}", 0, NULL);
    assert_int_equal(splash_grammar_spec_from_chat(body, &spec, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "response_format.json_schema.schema"));
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammar_utf8_across_tokens),
        cmocka_unit_test(test_grammar_stop_only_when_complete),
        cmocka_unit_test(test_grammar_rollback_restores_masks),
        cmocka_unit_test(test_grammar_thinking_ends_between_characters),
        cmocka_unit_test(test_grammar_request_specs),
        cmocka_unit_test(test_grammar_harmony_messages),
        cmocka_unit_test(test_grammar_tool_calls_refusals),
        cmocka_unit_test(test_grammar_tool_calls_qwen_xml_masks_exact),
        cmocka_unit_test(test_grammar_tool_calls_glm_args),
        cmocka_unit_test(test_grammar_reasoning_optional_block),
        cmocka_unit_test(test_grammar_reasoning_open_then_json),
        cmocka_unit_test(test_grammar_tool_calls_qwen_xml),
        cmocka_unit_test(test_grammar_tool_calls_accept_string_length_bounds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
