/* JSON Schema to grammar: random walks through the token masks of real
 * tokenizers (../shared/testdata vocab-small and the 151K Qwen3 vocabulary)
 * must end in text that jansson parses and that a validator written here, apart
 * from the compiler, accepts; unsupported keywords are refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "server/text/grammar/grammar.h"
#include "server/text/tokenizer/tokenizer.h"
#include "tests/support/testdata.h"

/* ---- vocabularies ----------------------------------------------------------------------- */

struct vocab {
    struct splash_tokenizer *tok;
    struct splash_grammar_vocab *v;
    int32_t *single; /* tokens of one byte */
    size_t n_single;
};

static void vocab_load(struct vocab *out, const char *rel)
{
    char path[512];
    struct splash_err err = {{0}};
    test_testdata_path(path, sizeof path, rel);
    if (splash_tokenizer_load(path, &out->tok, &err))
        fail_msg("%s: %s", rel, err.msg);
    int32_t stops[2] = {splash_tokenizer_find_special(out->tok, "<|im_end|>"),
                        splash_tokenizer_find_special(out->tok, "<|endoftext|>")};
    assert_true(stops[0] >= 0 && stops[1] >= 0);
    if (splash_grammar_vocab_create(out->tok, stops, 2, &out->v, &err))
        fail_msg("vocab: %s", err.msg);
    size_t n = splash_tokenizer_n_tokens(out->tok);
    out->single = malloc(n * sizeof *out->single);
    out->n_single = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        int type = splash_tokenizer_token_type(out->tok, (int32_t)i);
        splash_tokenizer_piece(out->tok, (int32_t)i, 0, &len);
        if (len == 1 && (type == SPLASH_TOKEN_NORMAL || type == SPLASH_TOKEN_BYTE))
            out->single[out->n_single++] = (int32_t)i;
    }
}

static void vocab_free(struct vocab *v)
{
    splash_grammar_vocab_destroy(v->v);
    splash_tokenizer_destroy(v->tok);
    free(v->single);
}

static struct vocab small, qwen3;

static int setup(void **state)
{
    vocab_load(&small, "vocab-small/qwen-small-vocab.gguf");
    vocab_load(&qwen3, "tokenizer/qwen3-vocab.gguf");
    return 0;
}

static int teardown(void **state)
{
    vocab_free(&small);
    vocab_free(&qwen3);
    return 0;
}

/* ---- random walks --------------------------------------------------------------------------- */

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

/* Walks the grammar with random allowed tokens, then, after budget tokens, with
 * the ones that bring the end nearest, until a stop token. check_all: at every
 * step, each token of the vocabulary is tried, and the matcher must take exactly
 * the ones the mask allows. Returns the text (caller frees). */
static char *walk(struct vocab *vc, const struct splash_grammar *g, uint64_t seed, int budget,
                  int check_all, size_t *out_len)
{
    struct splash_err err = {{0}};
    struct splash_grammar_matcher *m;
    if (splash_grammar_matcher_create(g, vc->v, &m, &err))
        fail_msg("matcher: %s", err.msg);
    size_t n_vocab = splash_grammar_vocab_n_tokens(vc->v);
    uint32_t *mask = malloc(splash_grammar_mask_words(vc->v) * sizeof *mask);
    int32_t *ids = malloc(n_vocab * sizeof *ids);
    struct splash_tok_bytes text = {0};
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int step = 0;; step++) {
        if (step > 5000)
            fail_msg("walk did not end: %.*s", (int)text.len, text.data);
        splash_grammar_matcher_fill_mask(m, mask);
        size_t n = 0;
        int32_t stop = -1;
        for (size_t i = 0; i < n_vocab; i++)
            if (allowed(mask, (int32_t)i)) {
                if (splash_tokenizer_token_type(vc->tok, (int32_t)i) == SPLASH_TOKEN_CONTROL)
                    stop = (int32_t)i; /* the stops are the only control tokens allowed */
                else
                    ids[n++] = (int32_t)i;
            }
        if (check_all)
            for (size_t i = 0; i < n_vocab; i++) {
                enum splash_status st = splash_grammar_matcher_accept_token(m, (int32_t)i, &err);
                if ((st == SPLASH_OK) != allowed(mask, (int32_t)i))
                    fail_msg("token %zu: mask %d, matcher %s, after \"%.*s\"", i,
                             allowed(mask, (int32_t)i), st ? err.msg : "takes it", (int)text.len,
                             text.data);
                if (st == SPLASH_OK)
                    assert_int_equal(splash_grammar_matcher_rollback(m, 1), 1);
            }
        if (n == 0 && stop < 0)
            fail_msg("no token allowed after \"%.*s\"", (int)text.len, text.data);
        /* a stop is allowed exactly where the output is complete */
        assert_int_equal(stop >= 0, splash_grammar_matcher_is_complete(m));
        int32_t pick;
        if (stop >= 0 && (step >= budget || n == 0 || rnd(&rng) % 4 == 0)) {
            pick = stop;
        } else if (step < budget) {
            pick = ids[rnd(&rng) % n];
        } else {
            /* candidates: the one-byte tokens allowed and a sample of the rest */
            size_t best = SIZE_MAX;
            pick = -1;
            for (size_t k = 0; k < vc->n_single + 64; k++) {
                int32_t c = k < vc->n_single ? vc->single[k] : ids[rnd(&rng) % n];
                if (!allowed(mask, c) || c == stop)
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
            if (pick < 0)
                pick = ids[rnd(&rng) % n];
        }
        if (splash_grammar_matcher_accept_token(m, pick, &err))
            fail_msg("allowed token %d refused: %s", pick, err.msg);
        if (pick == stop) {
            assert_true(splash_grammar_matcher_is_stopped(m));
            break;
        }
        if (splash_tokenizer_decode(vc->tok, &pick, 1, SPLASH_DETOK_SPECIAL, &text, &err))
            fail_msg("decode: %s", err.msg);
    }
    splash_grammar_matcher_destroy(m);
    free(mask);
    free(ids);
    *out_len = text.len;
    if (!text.data)
        text.data = calloc(1, 1);
    return text.data;
}

/* ---- an independent validator -------------------------------------------------------------- */

static int re_match(const char *pattern, const char *s)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
    assert_non_null(re);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static int leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int valid_date(const char *s)
{
    if (!re_match("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", s))
        return 0;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int mo = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1)
        return 0;
    return d <= days[mo - 1] + (mo == 2 && leap(y));
}

static int valid_format(const char *fmt, const char *s)
{
    static const char time_re[] = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([Zz]|[+-](["
                                  "01][0-9]|2[0-3]):[0-5][0-9])";
    char buf[512];
    if (!strcmp(fmt, "date"))
        return valid_date(s);
    if (!strcmp(fmt, "time")) {
        snprintf(buf, sizeof buf, "^%s$", time_re);
        return re_match(buf, s);
    }
    if (!strcmp(fmt, "date-time")) {
        char d[11];
        if (strlen(s) < 11 || (s[10] != 'T' && s[10] != 't'))
            return 0;
        memcpy(d, s, 10);
        d[10] = 0;
        snprintf(buf, sizeof buf, "^%s$", time_re);
        return valid_date(d) && re_match(buf, s + 11);
    }
    if (!strcmp(fmt, "uuid"))
        return re_match("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                        "[0-9a-fA-F]{12}$",
                        s);
    if (!strcmp(fmt, "ipv4"))
        return re_match("^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
                        "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$",
                        s);
    fail_msg("validator: format %s", fmt);
    return 0;
}

static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

static const json_t *resolve(const json_t *root, const char *ref)
{
    if (!strcmp(ref, "#"))
        return root;
    const json_t *at = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ref + 2);
    for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
        at = json_object_get(at, tok);
    return at;
}

static int type_is(const json_t *v, const char *t)
{
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "null"))
        return json_is_null(v);
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    return 0;
}

static int validate(const json_t *root, const json_t *s, const json_t *v)
{
    if (json_is_true(s))
        return 1;
    const json_t *k;
    if ((k = json_object_get(s, "$ref")))
        return validate(root, resolve(root, json_string_value(k)), v);
    if ((k = json_object_get(s, "anyOf"))) {
        for (size_t i = 0; i < json_array_size(k); i++)
            if (validate(root, json_array_get(k, i), v))
                return 1;
        return 0;
    }
    if ((k = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(k); i++)
            n += validate(root, json_array_get(k, i), v);
        return n == 1;
    }
    if ((k = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(k); i++)
            if (!validate(root, json_array_get(k, i), v))
                return 0;
    if ((k = json_object_get(s, "type"))) {
        int ok = 0;
        if (json_is_string(k))
            ok = type_is(v, json_string_value(k));
        for (size_t i = 0; i < json_array_size(k); i++)
            ok |= type_is(v, json_string_value(json_array_get(k, i)));
        if (!ok)
            return 0;
    }
    if ((k = json_object_get(s, "enum"))) {
        int ok = 0;
        for (size_t i = 0; i < json_array_size(k); i++)
            ok |= json_equal(json_array_get(k, i), v);
        if (!ok)
            return 0;
    }
    if ((k = json_object_get(s, "const")) && !json_equal(k, v))
        return 0;
    if (json_is_string(v)) {
        size_t n = utf8_chars(json_string_value(v), json_string_length(v));
        if ((k = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(k))
            return 0;
        if ((k = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(k))
            return 0;
        if ((k = json_object_get(s, "format")) &&
            !valid_format(json_string_value(k), json_string_value(v)))
            return 0;
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if ((k = json_object_get(s, "minimum")) && x < json_number_value(k))
            return 0;
        if ((k = json_object_get(s, "maximum")) && x > json_number_value(k))
            return 0;
        if ((k = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(k))
            return 0;
        if ((k = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(k))
            return 0;
    }
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties");
        const json_t *addl = json_object_get(s, "additionalProperties");
        const json_t *req = json_object_get(s, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return 0;
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)v, key, val)
        {
            const json_t *ps = json_object_get(props, key);
            if (ps) {
                if (!validate(root, ps, val))
                    return 0;
            } else if (json_is_false(addl)) {
                return 0;
            } else if (json_is_object(addl) && !validate(root, addl, val)) {
                return 0;
            }
        }
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        const json_t *prefix = json_object_get(s, "prefixItems");
        const json_t *items = json_object_get(s, "items");
        if ((k = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(k))
            return 0;
        if ((k = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(k))
            return 0;
        for (size_t i = 0; i < n; i++) {
            const json_t *is = i < json_array_size(prefix) ? json_array_get(prefix, i) : items;
            if (json_is_false(is))
                return 0;
            if (is && !validate(root, is, json_array_get(v, i)))
                return 0;
        }
    }
    return 1;
}

/* ---- schemas ------------------------------------------------------------------------------- */

static const char *const schemas[] = {
    /* nested objects, optional properties, enums */
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"address\":{\"type\":\"object\",\"properties\":{"
    "\"city\":{\"type\":\"string\",\"maxLength\":12},"
    "\"zip\":{\"type\":\"string\",\"minLength\":5,\"maxLength\":5}},"
    "\"required\":[\"city\"],\"additionalProperties\":false},"
    "\"role\":{\"enum\":[\"admin\",\"user\",\"guest\",null,3]}},"
    "\"required\":[\"name\",\"address\"],\"additionalProperties\":false}",
    /* arrays with bounds, nested arrays */
    "{\"type\":\"object\",\"properties\":{"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},"
    "\"minItems\":1,\"maxItems\":4},"
    "\"matrix\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},"
    "\"maxItems\":3}},"
    "\"pair\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"},{\"type\":\"null\"}],"
    "\"items\":false,\"minItems\":2}},"
    "\"required\":[\"tags\",\"matrix\",\"pair\"]}",
    /* anyOf / oneOf / type lists */
    "{\"type\":\"object\",\"properties\":{"
    "\"value\":{\"anyOf\":[{\"type\":\"string\",\"format\":\"date\"},{\"type\":\"integer\"},"
    "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},\"required\":[\"x\"]}]},"
    "\"shape\":{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
    "\"r\":{\"type\":\"number\",\"minimum\":0}},\"required\":[\"kind\",\"r\"],"
    "\"additionalProperties\":false},"
    "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"square\"},"
    "\"side\":{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1000}},"
    "\"required\":[\"kind\",\"side\"],\"additionalProperties\":false}]},"
    "\"maybe\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"value\",\"shape\",\"maybe\"],\"additionalProperties\":false}",
    /* $ref / $defs with recursion, formats */
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},"
    "\"required\":[\"id\"],\"additionalProperties\":false}},"
    "\"type\":\"object\",\"properties\":{\"root\":{\"$ref\":\"#/$defs/node\"},"
    "\"when\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "\"ip\":{\"type\":\"string\",\"format\":\"ipv4\"},"
    "\"at\":{\"type\":\"string\",\"format\":\"time\"}},"
    "\"required\":[\"root\",\"when\",\"ip\",\"at\"],\"additionalProperties\":false}",
    /* additional properties with a schema, free objects, negative integer ranges */
    "{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"integer\",\"minimum\":-25,\"maximum\":-3},"
    "\"meta\":{\"type\":\"object\"},"
    "\"anything\":true},"
    "\"required\":[\"id\",\"meta\",\"anything\"],"
    "\"additionalProperties\":{\"type\":\"integer\",\"minimum\":1}}",
};

static void run_schema(struct vocab *vc, const char *text, int walks, int budget, int check_all)
{
    json_error_t jerr;
    json_t *schema = json_loads(text, 0, &jerr);
    if (!schema)
        fail_msg("schema: %s", jerr.text);
    struct splash_err err = {{0}};
    struct splash_grammar *g;
    if (splash_grammar_compile_json_schema(schema, SPLASH_GRAMMAR_JSON_STRICT, &g, &err))
        fail_msg("compile: %s", err.msg);
    for (int w = 0; w < walks; w++) {
        size_t len;
        char *out = walk(vc, g, (uint64_t)w + 1, budget, check_all, &len);
        json_t *v = json_loadb(out, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (!v)
            fail_msg("walk %d: not JSON (%s): %s", w, jerr.text, out);
        if (!validate(schema, schema, v))
            fail_msg("walk %d: does not validate: %s", w, out);
        json_decref(v);
        free(out);
    }
    splash_grammar_destroy(g);
    json_decref(schema);
}

/* ---- tests ------------------------------------------------------------------------------------
 */

/* 100 walks per schema on the 151K Qwen3 vocabulary parse and validate. */
static void test_json_schema_walks_validate_qwen3(void **state)
{
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++)
        run_schema(&qwen3, schemas[i], 100, 48, 0);
}

/* On the 2048-token vocabulary, every token at every step: the matcher takes
 * exactly what the mask allows. */
static void test_json_schema_masks_exact_small(void **state)
{
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        print_message("schema %zu\n", i);
        run_schema(&small, schemas[i], 6, 32, 1);
    }
}

static void test_json_schema_json_object_walks(void **state)
{
    struct splash_err err = {{0}};
    struct splash_grammar *g;
    assert_int_equal(splash_grammar_compile_json_object(&g, &err), SPLASH_OK);
    for (int w = 0; w < 100; w++) {
        size_t len;
        char *out = walk(&qwen3, g, (uint64_t)w + 1000, 40, 0, &len);
        json_error_t jerr;
        json_t *v = json_loadb(out, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!v || !json_is_object(v))
            fail_msg("walk %d: not a JSON object (%s): %s", w, v ? "" : jerr.text, out);
        json_decref(v);
        free(out);
    }
    splash_grammar_destroy(g);
}

/* Each refusal names the keyword (and where it is). */
static void test_json_schema_refuses_unsupported_keywords(void **state)
{
    static const struct {
        const char *schema, *want;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a+$\"}", "schema: unsupported keyword \"pattern\""},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":true}}}",
         "schema.properties.a: unsupported keyword \"uniqueItems\""},
        {"{\"not\":{\"type\":\"null\"}}", "unsupported keyword \"not\""},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "\"patternProperties\""},
        {"{\"type\":\"object\",\"minProperties\":1}", "\"minProperties\""},
        {"{\"type\":\"number\",\"multipleOf\":2}", "\"multipleOf\""},
        {"{\"if\":{},\"then\":{}}", "\"if\""},
        {"{\"type\":\"string\",\"format\":\"email\"}", "format \"email\""},
        {"{\"type\":\"number\",\"maximum\":3.5}", "\"maximum\""},
        {"{\"allOf\":[{\"type\":\"string\"},{\"minLength\":2}]}", "\"allOf\""},
        {"{\"type\":\"object\",\"anyOf\":[{\"required\":[\"a\"]}]}", "\"type\" beside anyOf"},
        {"{\"type\":\"string\",\"maxLength\":1000}", "maxLength above 32"},
        {"{\"$ref\":\"#/$defs/missing\"}", "$ref \"#/$defs/missing\""},
        {"{\"$ref\":\"#\"}", "no finite output"},
        {"{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}},"
         "\"$ref\":\"#/$defs/a\"}",
         "reference cycle"},
        {"{\"type\":\"array\",\"contains\":{}}", "\"contains\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_error_t jerr;
        json_t *schema = json_loads(cases[i].schema, 0, &jerr);
        assert_non_null(schema);
        struct splash_err err = {{0}};
        struct splash_grammar *g = NULL;
        enum splash_status st = splash_grammar_compile_json_schema(schema, 0, &g, &err);
        if (st == SPLASH_OK)
            fail_msg("%s: compiled", cases[i].schema);
        if (st != SPLASH_ERR_UNSUPPORTED)
            fail_msg("%s: status %d (%s)", cases[i].schema, st, err.msg);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].schema, err.msg, cases[i].want);
        json_decref(schema);
    }
}

static void test_json_schema_refuses_malformed(void **state)
{
    static const char *const cases[] = {
        "{\"type\":\"strin\"}",
        "{\"type\":\"object\",\"properties\":[]}",
        "{\"type\":\"array\",\"minItems\":-1}",
        "{\"enum\":[]}",
        "[1,2]",
        "{\"anyOf\":{}}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *schema = json_loads(cases[i], JSON_DECODE_ANY, NULL);
        assert_non_null(schema);
        struct splash_err err = {{0}};
        struct splash_grammar *g = NULL;
        if (splash_grammar_compile_json_schema(schema, 0, &g, &err) == SPLASH_OK)
            fail_msg("%s: compiled", cases[i]);
        assert_true(strlen(err.msg) > 0);
        json_decref(schema);
    }
}

/* Exact strings: what is accepted and what is refused, byte by byte through
 * the single-byte tokens. */
static int accepts_text(const struct splash_grammar *g, const char *text)
{
    struct splash_err err = {{0}};
    struct splash_grammar_matcher *m;
    assert_int_equal(splash_grammar_matcher_create(g, small.v, &m, &err), SPLASH_OK);
    int ok = 1;
    for (const unsigned char *p = (const unsigned char *)text; *p && ok; p++) {
        int32_t id = -1;
        for (size_t k = 0; k < small.n_single; k++) {
            size_t len;
            const char *piece = splash_tokenizer_piece(small.tok, small.single[k], 0, &len);
            if ((unsigned char)piece[0] == *p)
                id = small.single[k];
        }
        assert_true(id >= 0);
        ok = splash_grammar_matcher_accept_token(m, id, &err) == SPLASH_OK;
    }
    ok = ok && splash_grammar_matcher_is_complete(m);
    splash_grammar_matcher_destroy(m);
    return ok;
}

static void test_json_schema_exact_texts(void **state)
{
    static const struct {
        const char *schema, *text;
        int ok;
    } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "-12", 1},
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "-13", 0},
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "345", 1},
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "346", 0},
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "07", 0},
        {"{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}", "0", 1},
        {"{\"type\":\"number\"}", "-0.5e+12", 1},
        {"{\"type\":\"number\"}", "1.", 0},
        {"{\"type\":\"number\"}", "01", 0},
        {"{\"type\":\"string\"}", "\"a\\u00e9\\n\\\"\"", 1},
        {"{\"type\":\"string\"}", "\"\\ud800\"", 0},
        {"{\"type\":\"string\"}", "\"\\u0000\"", 0},
        {"{\"type\":\"string\"}", "\"tab\there\"", 0},
        {"{\"type\":\"string\"}", "\"caf\xc3\xa9\"", 1},
        {"{\"type\":\"string\"}", "\"\xc3\"", 0},
        {"{\"type\":\"string\"}", "\"\xed\xa0\x80\"", 0},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 0},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-04-30\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-04-31\"", 0},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xc3\xa9\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", "[1, 2]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", "[1]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", "[1,2,3,4,5]", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}", "{}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}", "{\"b\":null}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}", "{\n  \"a\": null\n}",
         1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}", "{  \"a\":null}", 0},
        {"{\"properties\":{\"ab\":{\"type\":\"null\"}},\"additionalProperties\":true}",
         "{\"ab\":null,\"abc\":1}", 1},
        {"{\"properties\":{\"ab\":{\"type\":\"null\"}},\"additionalProperties\":true}",
         "{\"ab\":null,\"ab\":1}", 0},
        {"{\"properties\":{\"ab\":{\"type\":\"null\"}},\"additionalProperties\":true}",
         "{\"a\":[]}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *schema = json_loads(cases[i].schema, 0, NULL);
        assert_non_null(schema);
        struct splash_err err = {{0}};
        struct splash_grammar *g;
        if (splash_grammar_compile_json_schema(schema, 0, &g, &err))
            fail_msg("%s: %s", cases[i].schema, err.msg);
        if (accepts_text(g, cases[i].text) != cases[i].ok)
            fail_msg("%s: %s should be %s", cases[i].schema, cases[i].text,
                     cases[i].ok ? "accepted" : "refused");
        splash_grammar_destroy(g);
        json_decref(schema);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_schema_exact_texts),
        cmocka_unit_test(test_json_schema_refuses_unsupported_keywords),
        cmocka_unit_test(test_json_schema_refuses_malformed),
        cmocka_unit_test(test_json_schema_masks_exact_small),
        cmocka_unit_test(test_json_schema_json_object_walks),
        cmocka_unit_test(test_json_schema_walks_validate_qwen3),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
