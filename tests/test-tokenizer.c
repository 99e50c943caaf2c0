/* Tokenizer tests against reference data made by llama.cpp and HF tokenizers
 * (../shared/testdata/tokenizer, vocab-small, golden). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/meta.h"
#include "server/text/tokenizer/internal.h"
#include "server/text/tokenizer/tokenizer.h"
#include "tests/support/testdata.h"

/* ---- helpers ---------------------------------------------------------------------- */

static struct splash_tokenizer *load(const char *rel)
{
    char path[512];
    struct splash_err err = {{0}};
    struct splash_tokenizer *tok = NULL;
    test_testdata_path(path, sizeof path, rel);
    enum splash_status st = splash_tokenizer_load(path, &tok, &err);
    if (st)
        fail_msg("%s: %s", rel, err.msg);
    return tok;
}

/* Compares ids with the expected JSON array; prints the first difference. */
static int ids_match(const char *what, const struct splash_token_buf *got, json_t *want)
{
    size_t n = json_array_size(want);
    size_t i = 0;
    while (i < n && i < got->n &&
           got->ids[i] == (int32_t)json_integer_value(json_array_get(want, i)))
        i++;
    if (i == n && i == got->n)
        return 1;
    fprintf(stderr, "  %s: %zu ids, want %zu; first difference at %zu:", what, got->n, n, i);
    for (size_t k = i; k < i + 6 && k < got->n; k++)
        fprintf(stderr, " %d", got->ids[k]);
    fprintf(stderr, " | want");
    for (size_t k = i; k < i + 6 && k < n; k++)
        fprintf(stderr, " %d", (int)json_integer_value(json_array_get(want, k)));
    fprintf(stderr, "\n");
    return 0;
}

static int encode_check(const struct splash_tokenizer *tok, const char *text, size_t len,
                        unsigned flags, json_t *want, const char *label)
{
    struct splash_token_buf buf = {0};
    struct splash_err err = {{0}};
    enum splash_status st = splash_tokenizer_encode(tok, text, len, flags, &buf, &err);
    int ok;
    if (st) {
        fprintf(stderr, "  %s: encode failed: %s\n", label, err.msg);
        ok = 0;
    } else {
        ok = ids_match(label, &buf, want);
    }
    splash_token_buf_free(&buf);
    return ok;
}

/* Runs every record of qwen3-vectors.jsonl; hf_ids where present (we normalise to NFC). */
static void run_qwen3_vectors(const struct splash_tokenizer *tok, const char *label)
{
    char path[512];
    size_t size;
    char *data = test_read_file(test_testdata_path(path, sizeof path,
                                                   "tokenizer/qwen3-vectors.jsonl"), &size);
    assert_non_null(data);
    int n = 0, bad = 0;
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        json_error_t jerr;
        json_t *rec = json_loads(line, JSON_ALLOW_NUL, &jerr);
        assert_non_null(rec);
        json_t *text = json_object_get(rec, "text");
        json_t *want = json_object_get(rec, "hf_ids");
        if (!want)
            want = json_object_get(rec, "ids");
        unsigned flags = json_is_true(json_object_get(rec, "parse_special"))
                             ? SPLASH_TOKENIZE_PARSE_SPECIAL : 0;
        char what[160];
        snprintf(what, sizeof what, "%s line %d (%s, parse_special=%d) '%.40s'", label, n + 1,
                 json_string_value(json_object_get(rec, "category")), flags ? 1 : 0,
                 json_string_value(text));
        if (!encode_check(tok, json_string_value(text), json_string_length(text), flags, want,
                          what))
            bad++;
        n++;
        json_decref(rec);
    }
    free(data);
    fprintf(stderr, "  %s: %d records, %d mismatches\n", label, n, bad);
    assert_int_equal(n, 630);
    assert_int_equal(bad, 0);
}

/* tokenizer-tests.json's ids were made from the text after llama.cpp's prompt
 * escape processing (case 8 spells a backslash and n, its ids hold a line
 * feed), so the same escapes are applied here. */
static size_t unescape_like_llama(const char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] != '\\' || i + 1 == n) {
            out[o++] = in[i];
            continue;
        }
        char c = in[++i];
        switch (c) {
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case '\'': case '"': case '\\': out[o++] = c; break;
        default: out[o++] = '\\'; out[o++] = c; break;
        }
    }
    return o;
}

/* tokenizer-tests.json: ids with parse_special, ids_no_parse_special without. */
static void run_small_vocab_tests(const struct splash_tokenizer *tok, const char *label)
{
    char path[512];
    json_error_t jerr;
    json_t *cases = json_load_file(test_testdata_path(path, sizeof path,
                                                      "vocab-small/tokenizer-tests.json"),
                                   JSON_ALLOW_NUL, &jerr);
    assert_non_null(cases);
    size_t i;
    json_t *c;
    int bad = 0;
    json_array_foreach(cases, i, c) {
        json_t *jtext = json_object_get(c, "text");
        char *text = malloc(json_string_length(jtext) + 1);
        size_t len = unescape_like_llama(json_string_value(jtext), json_string_length(jtext), text);
        text[len] = 0;
        json_t *with = json_object_get(c, "ids");
        json_t *without = json_object_get(c, "ids_no_parse_special");
        char what[160];
        snprintf(what, sizeof what, "%s case %zu '%.40s' parse_special=1", label, i, text);
        bad += !encode_check(tok, text, len, SPLASH_TOKENIZE_PARSE_SPECIAL, with, what);
        snprintf(what, sizeof what, "%s case %zu '%.40s' parse_special=0", label, i, text);
        bad += !encode_check(tok, text, len, 0, without ? without : with, what);
        free(text);
    }
    assert_int_equal(json_array_size(cases), 28);
    json_decref(cases);
    assert_int_equal(bad, 0);
}

/* ---- reference vectors -------------------------------------------------------------- */

static void test_tokenizer_qwen3_vectors_gguf(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("tokenizer/qwen3-vocab.gguf");
    assert_int_equal(splash_tokenizer_n_tokens(tok), 151936);
    assert_int_equal(splash_tokenizer_bos(tok), 151643);
    assert_int_equal(splash_tokenizer_eos(tok), 151645);
    assert_string_equal(splash_tokenizer_pre(tok), "qwen2");
    run_qwen3_vectors(tok, "qwen3-vocab.gguf");
    splash_tokenizer_destroy(tok);
}

static void test_tokenizer_qwen3_vectors_hf(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("tokenizer");
    assert_int_equal(splash_tokenizer_n_tokens(tok), 151669);
    assert_int_equal(splash_tokenizer_bos(tok), -1); /* tokenizer_config.json: bos_token null */
    assert_int_equal(splash_tokenizer_eos(tok), 151645);
    assert_int_equal(splash_tokenizer_pad(tok), 151643);
    run_qwen3_vectors(tok, "tokenizer.json");
    splash_tokenizer_destroy(tok);
}

static int hex_nibble(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int bytes_match_hex(const char *what, const struct splash_tok_bytes *got, const char *hex)
{
    size_t n = strlen(hex) / 2;
    int ok = got->len == n;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)got->data[i] ==
             (hex_nibble(hex[2 * i]) << 4 | hex_nibble(hex[2 * i + 1]));
    if (!ok)
        fprintf(stderr, "  %s: %zu bytes, want %zu (%s)\n", what, got->len, n, hex);
    return ok;
}

static void test_tokenizer_qwen3_detok(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("tokenizer/qwen3-vocab.gguf");
    char path[512];
    size_t size;
    char *data = test_read_file(test_testdata_path(path, sizeof path,
                                                   "tokenizer/qwen3-detok.jsonl"), &size);
    assert_non_null(data);
    int n = 0, bad = 0;
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        json_error_t jerr;
        json_t *rec = json_loads(line, JSON_ALLOW_NUL, &jerr);
        assert_non_null(rec);
        json_t *jids = json_object_get(rec, "ids");
        size_t k = json_array_size(jids);
        int32_t *ids = calloc(k + 1, sizeof *ids);
        for (size_t i = 0; i < k; i++)
            ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
        const char *kind = json_string_value(json_object_get(rec, "kind"));
        struct splash_err err = {{0}};
        struct splash_tok_bytes special = {0}, plain = {0};
        assert_int_equal(splash_tokenizer_decode(tok, ids, k, SPLASH_DETOK_SPECIAL, &special,
                                                 &err), SPLASH_OK);
        assert_int_equal(splash_tokenizer_decode(tok, ids, k, 0, &plain, &err), SPLASH_OK);
        char what[96];
        snprintf(what, sizeof what, "line %d (%s) special", n + 1, kind);
        bad += !bytes_match_hex(what, &special,
                                json_string_value(json_object_get(rec, "bytes_hex")));
        snprintf(what, sizeof what, "line %d (%s) no special", n + 1, kind);
        bad += !bytes_match_hex(what, &plain,
                                json_string_value(json_object_get(rec, "bytes_hex_no_special")));
        splash_tok_bytes_free(&special);
        splash_tok_bytes_free(&plain);
        free(ids);
        json_decref(rec);
        n++;
    }
    free(data);
    splash_tokenizer_destroy(tok);
    assert_int_equal(n, 50);
    assert_int_equal(bad, 0);
}

static void test_tokenizer_small_vocab_gguf(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("vocab-small/qwen-small-vocab.gguf");
    assert_int_equal(splash_tokenizer_n_tokens(tok), 2048);
    assert_int_equal(splash_tokenizer_bos(tok), 2036);
    assert_int_equal(splash_tokenizer_eos(tok), 2038);
    assert_int_equal(splash_tokenizer_pad(tok), 2036);
    assert_int_equal(splash_tokenizer_token_type(tok, 2038), SPLASH_TOKEN_CONTROL);
    assert_int_equal(splash_tokenizer_token_type(tok, 2039), SPLASH_TOKEN_USER_DEFINED);
    assert_int_equal(splash_tokenizer_find_special(tok, "<|im_end|>"), 2038);
    assert_int_equal(splash_tokenizer_find_special(tok, "</think>"), 2040);
    run_small_vocab_tests(tok, "qwen-small-vocab.gguf");
    splash_tokenizer_destroy(tok);
}

static void test_tokenizer_small_vocab_hf(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("vocab-small");
    assert_int_equal(splash_tokenizer_n_tokens(tok), 2048);
    run_small_vocab_tests(tok, "vocab-small/tokenizer.json");
    splash_tokenizer_destroy(tok);
}

/* llama.cpp's own test-tokenizer-0 vectors: cases split by a marker line
 * (the piece after the last marker is a case too, the empty text), one line
 * of ids per case, parse_special off. */
static void test_tokenizer_llama_qwen2_vectors(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("tokenizer/qwen3-vocab.gguf");
    char path[512];
    size_t n_inp, n_out;
    char *inp = test_read_file(test_testdata_path(path, sizeof path,
                                                  "tokenizer/ggml-vocab-qwen2.gguf.inp"), &n_inp);
    char *out = test_read_file(test_testdata_path(path, sizeof path,
                                                  "tokenizer/ggml-vocab-qwen2.gguf.out"), &n_out);
    assert_non_null(inp);
    assert_non_null(out);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n = 0, bad = 0;
    char *text = inp, *line = out;
    for (int last = 0; !last;) {
        char *end = strstr(text, sep);
        if (!end) {
            end = text + strlen(text);
            last = 1;
        }
        char *eol = strchr(line, '\n');
        if (!eol) {
            assert_true(last);
            eol = line + strlen(line);
        }
        *eol = 0;
        json_t *want = json_array();
        for (char *p = line; *p;) {
            char *q;
            long v = strtol(p, &q, 10);
            if (q == p)
                break;
            json_array_append_new(want, json_integer(v));
            p = q;
        }
        char what[96];
        snprintf(what, sizeof what, "case %d '%.30s'", n, text);
        bad += !encode_check(tok, text, (size_t)(end - text), 0, want, what);
        json_decref(want);
        n++;
        if (!last) {
            text = end + sizeof sep - 1;
            line = eol + 1;
        }
    }
    free(inp);
    free(out);
    splash_tokenizer_destroy(tok);
    assert_int_equal(n, 47);
    assert_int_equal(bad, 0);
}

/* The golden logits' prompt, tokenized from the model file itself. */
static void test_tokenizer_golden_prompt(void **state)
{
    (void)state;
    char path[512];
    json_error_t jerr;
    json_t *golden = json_load_file(test_testdata_path(path, sizeof path,
                                                       "golden/qwen35-tiny-Q8_0.json"), 0, &jerr);
    assert_non_null(golden);
    struct splash_tokenizer *tok = load("models/qwen35-tiny-Q8_0.gguf");
    json_t *text = json_object_get(golden, "prompt_text");
    json_t *want = json_object_get(golden, "tokens");
    assert_int_equal(json_array_size(want), 32);
    assert_true(encode_check(tok, json_string_value(text), json_string_length(text),
                             SPLASH_TOKENIZE_PARSE_SPECIAL, want, "golden prompt"));

    /* and back: the ids decode to the prompt's bytes */
    int32_t ids[32];
    for (size_t i = 0; i < 32; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(want, i));
    struct splash_tok_bytes bytes = {0};
    struct splash_err err = {{0}};
    assert_int_equal(splash_tokenizer_decode(tok, ids, 32, 0, &bytes, &err), SPLASH_OK);
    assert_string_equal(bytes.data, json_string_value(text));
    splash_tok_bytes_free(&bytes);
    splash_tokenizer_destroy(tok);
    json_decref(golden);
}

/* Encoding shares the tokenizer across threads: each thread's ids stay the golden ones. */
struct thread_job {
    const struct splash_tokenizer *tok;
    const char *text;
    const int32_t *want;
    size_t n_want;
    int bad;
};

static void *encode_repeatedly(void *arg)
{
    struct thread_job *job = arg;
    for (int rep = 0; rep < 300; rep++) {
        struct splash_token_buf buf = {0};
        struct splash_err err;
        if (splash_tokenizer_encode(job->tok, job->text, strlen(job->text),
                                    SPLASH_TOKENIZE_PARSE_SPECIAL, &buf, &err) ||
            buf.n != job->n_want || memcmp(buf.ids, job->want, buf.n * sizeof *buf.ids) != 0)
            job->bad++;
        splash_token_buf_free(&buf);
    }
    return NULL;
}

static void test_tokenizer_encode_threads(void **state)
{
    (void)state;
    char path[512];
    json_error_t jerr;
    json_t *golden = json_load_file(test_testdata_path(path, sizeof path,
                                                       "golden/qwen35-tiny-Q8_0.json"), 0, &jerr);
    assert_non_null(golden);
    struct splash_tokenizer *tok = load("vocab-small/qwen-small-vocab.gguf");
    json_t *want = json_object_get(golden, "tokens");
    int32_t ids[32];
    for (size_t i = 0; i < 32; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(want, i));
    struct thread_job jobs[4];
    pthread_t threads[4];
    for (int t = 0; t < 4; t++) {
        const char *text = json_string_value(json_object_get(golden, "prompt_text"));
        jobs[t] = (struct thread_job){tok, text, ids, 32, 0};
        assert_int_equal(pthread_create(&threads[t], NULL, encode_repeatedly, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
        assert_int_equal(jobs[t].bad, 0);
    }
    splash_tokenizer_destroy(tok);
    json_decref(golden);
}

/* ---- streaming decode ------------------------------------------------------------- */

/* The golden prompt ends in 你好🙂 spelled as ten byte tokens (the small vocab
 * has no merges for them): the stream holds each character back until its
 * last byte arrives. */
static void test_tokenizer_stream_split_utf8(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("vocab-small/qwen-small-vocab.gguf");
    static const int32_t ids[] = {856, 160, 121, 254, 161, 98, 121, 172, 253, 247, 224};
    /* bytes out after each push */
    static const size_t out_len[] = {2, 2, 2, 5, 5, 5, 8, 8, 8, 8, 12};
    struct splash_detok_stream s;
    struct splash_tok_bytes out = {0};
    struct splash_err err = {{0}};
    splash_detok_stream_init(&s, tok, 0);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        assert_int_equal(splash_detok_stream_push(&s, ids[i], &out, &err), SPLASH_OK);
        assert_int_equal(out.len, out_len[i]);
    }
    assert_string_equal(out.data, " x你好🙂");
    assert_int_equal(splash_detok_stream_flush(&s, &out, &err), SPLASH_OK);
    assert_int_equal(out.len, 12);

    /* a character cut short is passed through once the next token cannot complete it */
    splash_tok_bytes_free(&out);
    splash_detok_stream_init(&s, tok, 0);
    assert_int_equal(splash_detok_stream_push(&s, 160, &out, &err), SPLASH_OK); /* E4 */
    assert_int_equal(out.len, 0);
    assert_int_equal(splash_detok_stream_push(&s, 39, &out, &err), SPLASH_OK);  /* "H" */
    assert_int_equal(out.len, 2);
    assert_memory_equal(out.data, "\xe4H", 2);
    /* and one held at the end comes out with flush */
    assert_int_equal(splash_detok_stream_push(&s, 172, &out, &err), SPLASH_OK); /* F0 */
    assert_int_equal(out.len, 2);
    assert_int_equal(splash_detok_stream_flush(&s, &out, &err), SPLASH_OK);
    assert_int_equal(out.len, 3);
    assert_int_equal(splash_detok_stream_push(&s, 999999, &out, &err), SPLASH_ERR_INVALID);
    splash_tok_bytes_free(&out);
    splash_tokenizer_destroy(tok);
}

/* ---- malformed metadata --------------------------------------------------------------- */

/* A metadata view over the small vocabulary with one key hidden or replaced. */
struct edited_meta {
    const struct splash_meta *base;
    const char *hide;      /* key reported missing */
    const char *str_key;   /* key whose string is replaced */
    const char *str_value;
    const char *len_key;   /* array whose length is replaced */
    size_t len_value;
    const char *bool_key;  /* bool key reported true */
};

static const struct splash_meta_api *base_api;

#define EDITED(m) ((const struct edited_meta *)(const void *)(m))

static int ed_source(const struct splash_meta *m)
{
    return base_api->source(EDITED(m)->base);
}

static const char *ed_path(const struct splash_meta *m)
{
    return base_api->path(EDITED(m)->base);
}

static int ed_has(const struct splash_meta *m, const char *key)
{
    const struct edited_meta *e = EDITED(m);
    if (e->hide && strcmp(key, e->hide) == 0)
        return 0;
    if (e->bool_key && strcmp(key, e->bool_key) == 0)
        return 1;
    return base_api->has(e->base, key);
}

static enum splash_status ed_get_i64(const struct splash_meta *m, const char *key, int64_t *out,
                                     struct splash_err *err)
{
    return base_api->get_i64(EDITED(m)->base, key, out, err);
}

static enum splash_status ed_get_bool(const struct splash_meta *m, const char *key, int *out,
                                      struct splash_err *err)
{
    const struct edited_meta *e = EDITED(m);
    if (e->bool_key && strcmp(key, e->bool_key) == 0) {
        *out = 1;
        return SPLASH_OK;
    }
    return base_api->get_bool(e->base, key, out, err);
}

static enum splash_status ed_get_str(const struct splash_meta *m, const char *key,
                                     const char **out, struct splash_err *err)
{
    const struct edited_meta *e = EDITED(m);
    if (e->str_key && strcmp(key, e->str_key) == 0) {
        *out = e->str_value;
        return SPLASH_OK;
    }
    return base_api->get_str(e->base, key, out, err);
}

static enum splash_status ed_arr_len(const struct splash_meta *m, const char *key, size_t *out,
                                     struct splash_err *err)
{
    const struct edited_meta *e = EDITED(m);
    if (e->len_key && strcmp(key, e->len_key) == 0) {
        *out = e->len_value;
        return SPLASH_OK;
    }
    return base_api->arr_len(e->base, key, out, err);
}

static enum splash_status ed_arr_i64(const struct splash_meta *m, const char *key, size_t i,
                                     int64_t *out, struct splash_err *err)
{
    return base_api->arr_i64(EDITED(m)->base, key, i, out, err);
}

static enum splash_status ed_arr_str(const struct splash_meta *m, const char *key, size_t i,
                                     const char **out, struct splash_err *err)
{
    return base_api->arr_str(EDITED(m)->base, key, i, out, err);
}

static const struct splash_meta_api edited_api = {
    .source = ed_source,
    .path = ed_path,
    .has = ed_has,
    .get_i64 = ed_get_i64,
    .get_bool = ed_get_bool,
    .get_str = ed_get_str,
    .arr_len = ed_arr_len,
    .arr_i64 = ed_arr_i64,
    .arr_str = ed_arr_str,
};

/* Loads the small vocabulary through the edited view; returns the status and message. */
static enum splash_status load_edited(struct edited_meta *e, struct splash_err *err)
{
    char path[512];
    struct splash_meta *m;
    base_api = splash_meta_api_get();
    test_testdata_path(path, sizeof path, "vocab-small/qwen-small-vocab.gguf");
    assert_int_equal(splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, err), SPLASH_OK);
    e->base = m;
    struct splash_vocab_spec spec;
    struct splash_tokenizer *tok = NULL;
    enum splash_status st =
        splash_vocab_spec_from_meta(&spec, &edited_api, (const struct splash_meta *)(const void *)e,
                                    err);
    if (!st) {
        st = splash_tokenizer_create(&spec, &tok, err);
        splash_vocab_spec_free(&spec);
    }
    splash_tokenizer_destroy(tok);
    splash_meta_close(m);
    return st;
}

/* ---- pre-tokenizer profiles -------------------------------------------------------- */

/* The small vocabulary under another profile. */
static struct splash_tokenizer *load_with_pre(const char *pre)
{
    char path[512];
    struct splash_meta *m;
    struct splash_err err = {{0}};
    base_api = splash_meta_api_get();
    test_testdata_path(path, sizeof path, "vocab-small/qwen-small-vocab.gguf");
    assert_int_equal(splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, &err), SPLASH_OK);
    struct edited_meta e = {.base = m, .str_key = "tokenizer.ggml.pre", .str_value = pre};
    struct splash_vocab_spec spec;
    struct splash_tokenizer *tok = NULL;
    assert_int_equal(splash_vocab_spec_from_meta(&spec, &edited_api,
                                                 (const struct splash_meta *)(const void *)&e,
                                                 &err), SPLASH_OK);
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_OK);
    splash_vocab_spec_free(&spec);
    splash_meta_close(m);
    return tok;
}

static enum splash_status collect_piece(void *ctx, const char *piece, size_t len,
                                        struct splash_err *err)
{
    (void)err;
    char *joined = ctx;
    size_t n = strlen(joined);
    if (n)
        joined[n++] = '|';
    memcpy(joined + n, piece, len);
    joined[n + len] = 0;
    return SPLASH_OK;
}

/* Pre-tokens joined by '|', as the profile's regexes split text. */
static void assert_pieces(const struct splash_tokenizer *tok, const char *text, const char *want)
{
    char joined[256] = "";
    struct splash_tok_scratch s;
    struct splash_err err = {{0}};
    assert_int_equal(splash_tok_scratch_init(tok, &s, &err), SPLASH_OK);
    assert_int_equal(splash_tok_split(tok, &s, text, strlen(text), collect_piece, joined, &err),
                     SPLASH_OK);
    splash_tok_scratch_free(&s);
    if (strcmp(joined, want) != 0)
        fail_msg("%s: '%s' split as '%s', want '%s'", splash_tokenizer_pre(tok), text, joined,
                 want);
}

/* Expected splits follow the profiles' tokenizer.json patterns: Qwen3.5 keeps
 * combining marks in letter runs, Flint groups digits by three, isolates Han
 * and kana runs and then splits like o200k (case-aware words with their
 * contractions); gpt-oss's is o200k's alone. */
static void test_tokenizer_profile_splits(void **state)
{
    (void)state;
    struct splash_tokenizer *qwen2 = load_with_pre("qwen2");
    assert_pieces(qwen2, "x\xcc\x81y", "x|\xcc\x81y");
    assert_pieces(qwen2, "I'M here", "I|'M| here");
    assert_pieces(qwen2, "abc123", "abc|1|2|3");
    assert_pieces(qwen2, "a  \n\n b", "a|  \n\n| b");
    splash_tokenizer_destroy(qwen2);

    struct splash_tokenizer *qwen35 = load_with_pre("qwen35");
    assert_pieces(qwen35, "x\xcc\x81y", "x\xcc\x81y");
    assert_pieces(qwen35, "I'M here", "I|'M| here");
    assert_pieces(qwen35, "abc123", "abc|1|2|3");
    splash_tokenizer_destroy(qwen35);

    struct splash_tokenizer *flint = load_with_pre("flint");
    assert_pieces(flint, "12345", "123|45");
    assert_pieces(flint, "abc\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\x8b" "def", /* abc東京かdef */
                  "abc|\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\x8b" "|def");
    assert_pieces(flint, "I'M here", "I'M| here");
    assert_pieces(flint, "Hello, world!\n", "Hello|,| world|!\n");
    assert_pieces(flint, "HTTPServer", "HTTPServer");
    splash_tokenizer_destroy(flint);

    /* gpt-oss: o200k alone, so Han and kana stay in a letter run */
    struct splash_tokenizer *o200k = load_with_pre("gpt-4o");
    assert_pieces(o200k, "12345", "123|45");
    assert_pieces(o200k, "abc\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\x8b" "def",
                  "abc\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\x8b" "def");
    assert_pieces(o200k, "I'M here", "I'M| here");
    assert_pieces(o200k, "Hello, world!\n", "Hello|,| world|!\n");
    assert_pieces(o200k, "x\xcc\x81y", "x\xcc\x81y");
    splash_tokenizer_destroy(o200k);
}

static void test_tokenizer_refuses_missing_merges(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct edited_meta e = {.hide = "tokenizer.ggml.merges"};
    assert_int_equal(load_edited(&e, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.merges: missing");
}

static void test_tokenizer_refuses_short_token_types(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct edited_meta e = {.len_key = "tokenizer.ggml.token_type", .len_value = 2047};
    assert_int_equal(load_edited(&e, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg,
                        "qwen-small-vocab.gguf: tokenizer.ggml.token_type: 2047 entries for 2048 "
                        "tokens");
}

static void test_tokenizer_refuses_unknown_pre(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct edited_meta e = {.str_key = "tokenizer.ggml.pre", .str_value = "llama-bpe"};
    assert_int_equal(load_edited(&e, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.pre: unknown "
                                 "pre-tokenizer 'llama-bpe' (supported: qwen2, qwen35, flint)");

    struct edited_meta missing = {.hide = "tokenizer.ggml.pre"};
    assert_int_equal(load_edited(&missing, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.pre: missing");
}

static void test_tokenizer_refuses_other_models(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct edited_meta e = {.str_key = "tokenizer.ggml.model", .str_value = "llama"};
    assert_int_equal(load_edited(&e, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.model: 'llama', only "
                                 "byte-level BPE (gpt2) is supported");
}

static void test_tokenizer_refuses_automatic_bos(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct edited_meta e = {.bool_key = "tokenizer.ggml.add_bos_token"};
    assert_int_equal(load_edited(&e, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.add_bos_token: automatic "
                                 "BOS insertion is not supported");
    struct edited_meta eos = {.bool_key = "tokenizer.ggml.add_eos_token"};
    assert_int_equal(load_edited(&eos, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "qwen-small-vocab.gguf: tokenizer.ggml.add_eos_token: automatic "
                                 "EOS insertion is not supported");
}

/* A hand-made spec: merges naming unknown tokens and bad type values are refused. */
static void test_tokenizer_refuses_bad_spec(void **state)
{
    (void)state;
    static char storage[256][8];
    const char *tokens[258];
    int32_t types[258];
    for (int b = 0; b < 256; b++) {
        /* spell byte b in the GPT-2 alphabet */
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned cp = printable   ? (unsigned)b
                      : b <= 0x20 ? 256u + (unsigned)b
                      : b <= 0xA0 ? 256u + 33 + (unsigned)(b - 0x7F)
                                  : 256u + 67;
        if (cp < 0x80) {
            storage[b][0] = (char)cp;
        } else {
            storage[b][0] = (char)(0xC0 | cp >> 6);
            storage[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        tokens[b] = storage[b];
        types[b] = SPLASH_TOKEN_NORMAL;
    }
    tokens[256] = "ab";
    types[256] = SPLASH_TOKEN_NORMAL;
    tokens[257] = "<|end|>";
    types[257] = SPLASH_TOKEN_CONTROL;
    const char *merges[] = {"a b", "a c"};
    struct splash_vocab_spec spec = {
        .source = "test.gguf", .model = "gpt2", .pre = "qwen2", .n_tokens = 258,
        .tokens = tokens, .types = types, .n_merges = 1, .merges = merges,
        .bos = -1, .eos = 257, .pad = -1,
    };
    struct splash_tokenizer *tok = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_OK);
    struct splash_token_buf buf = {0};
    assert_int_equal(splash_tokenizer_encode(tok, "ab<|end|>", 9, SPLASH_TOKENIZE_PARSE_SPECIAL,
                                             &buf, &err), SPLASH_OK);
    assert_int_equal(buf.n, 2);
    assert_int_equal(buf.ids[0], 256);
    assert_int_equal(buf.ids[1], 257);
    /* invalid UTF-8 is refused with its offset, and nothing is appended */
    assert_int_equal(splash_tokenizer_encode(tok, "ab\xff", 3, 0, &buf, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "text is not valid UTF-8 at byte 2");
    assert_int_equal(buf.n, 2);
    splash_token_buf_free(&buf);
    splash_tokenizer_destroy(tok);

    spec.n_merges = 2; /* "a c": "ac" is no token */
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "test.gguf: tokenizer.ggml.merges[1]: 'a c' names a token not in "
                                 "the vocabulary");
    spec.n_merges = 1;
    types[100] = 9;
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "test.gguf: tokenizer.ggml.token_type[100]: token type 9");
    types[100] = SPLASH_TOKEN_NORMAL;
    types[32] = SPLASH_TOKEN_CONTROL; /* byte 0x20 loses its token */
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "test.gguf: tokenizer.ggml.tokens: no token for byte 0x20 "
                                 "(byte-level BPE needs all 256)");
    types[32] = SPLASH_TOKEN_NORMAL;
    spec.eos = 258;
    assert_int_equal(splash_tokenizer_create(&spec, &tok, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "test.gguf: tokenizer.ggml.eos_token_id: 258 is not a token "
                                 "(258 tokens)");
}

/* A copy of vocab-small's tokenizer files in a temporary directory, with
 * tokenizer.json's key edited (value NULL: deleted) and the config's too. */
static enum splash_status load_hf_edited(const char *path1, const char *key, json_t *value,
                                         const char *config_key, json_t *config_value,
                                         struct splash_err *err)
{
    char path[512], dir[] = "/tmp/splash-tok-XXXXXX";
    json_error_t jerr;
    assert_non_null(mkdtemp(dir));
    json_t *root = json_load_file(test_testdata_path(path, sizeof path,
                                                     "vocab-small/tokenizer.json"), 0, &jerr);
    json_t *config = json_load_file(test_testdata_path(path, sizeof path,
                                                       "vocab-small/tokenizer_config.json"), 0,
                                    &jerr);
    assert_non_null(root);
    assert_non_null(config);
    json_t *parent = path1 ? json_object_get(root, path1) : root;
    if (key && value)
        json_object_set_new(parent, key, value);
    else if (key)
        json_object_del(parent, key);
    if (config_key)
        json_object_set_new(config, config_key, config_value);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    char config_path[512];
    snprintf(config_path, sizeof config_path, "%s/tokenizer_config.json", dir);
    assert_int_equal(json_dump_file(config, config_path, 0), 0);
    json_decref(root);
    json_decref(config);

    struct splash_tokenizer *tok = NULL;
    enum splash_status st = splash_tokenizer_load(dir, &tok, err);
    splash_tokenizer_destroy(tok);
    remove(path);
    remove(config_path);
    rmdir(dir);
    return st;
}

static void test_tokenizer_refuses_bad_tokenizer_json(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    assert_int_equal(load_hf_edited(NULL, "normalizer", json_pack("{s:s}", "type", "NFKC"), NULL,
                                    NULL, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "tokenizer.json: normalizer: 'NFKC' not supported");

    /* the split of another model (digits in threes) is no profile */
    json_t *pre = json_pack(
        "{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b,s:b}]}", "type", "Sequence", "pretokenizers",
        "type", "Split", "pattern", "Regex", "\\p{N}{1,3}", "behavior", "Isolated", "invert", 0,
        "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
    assert_int_equal(load_hf_edited(NULL, "pre_tokenizer", pre, NULL, NULL, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "tokenizer.json: pre_tokenizer: its splits are none of the "
                                 "supported profiles (qwen2, qwen35, flint)");

    assert_int_equal(load_hf_edited("model", "merges", NULL, NULL, NULL, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "tokenizer.json: model.merges: missing");

    assert_int_equal(load_hf_edited("model", "byte_fallback", json_true(), NULL, NULL, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "tokenizer.json: model.byte_fallback: not supported");

    assert_int_equal(load_hf_edited(NULL, NULL, NULL, "add_bos_token", json_true(), &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "tokenizer_config.json: add_bos_token: automatic BOS insertion "
                                 "is not supported");

    assert_int_equal(load_hf_edited(NULL, NULL, NULL, "eos_token", json_string("<|nope|>"), &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "tokenizer_config.json: eos_token: '<|nope|>' is not a token");

    /* unedited, the copy loads */
    assert_int_equal(load_hf_edited(NULL, NULL, NULL, NULL, NULL, &err), SPLASH_OK);
}

/* ---- speed ---------------------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 10 KB of mixed text (the vectors' strings) with the full Qwen3 vocabulary. */
static void test_tokenizer_encode_speed(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = load("tokenizer/qwen3-vocab.gguf");
    char path[512];
    size_t size;
    char *data = test_read_file(test_testdata_path(path, sizeof path,
                                                   "tokenizer/qwen3-vectors.jsonl"), &size);
    assert_non_null(data);
    char *text = malloc(10240 + 1);
    size_t len = 0;
    for (char *line = data, *next; line && *line && len < 10240; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        json_error_t jerr;
        json_t *rec = json_loads(line, 0, &jerr);
        if (rec) {
            const char *s = json_string_value(json_object_get(rec, "text"));
            size_t n = strlen(s);
            if (len + n + 1 <= 10240) {
                memcpy(text + len, s, n);
                len += n;
                text[len++] = '\n';
            }
            json_decref(rec);
        }
    }
    struct splash_token_buf buf = {0};
    struct splash_err err = {{0}};
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        buf.n = 0;
        double t0 = now_ms();
        assert_int_equal(splash_tokenizer_encode(tok, text, len, 0, &buf, &err), SPLASH_OK);
        double dt = now_ms() - t0;
        if (dt < best)
            best = dt;
    }
    fprintf(stderr, "  encode: %zu bytes -> %zu tokens in %.2f ms\n", len, buf.n, best);
    assert_true(len > 9000);
    assert_true(best < 10.0);
    splash_token_buf_free(&buf);
    free(text);
    free(data);
    splash_tokenizer_destroy(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_small_vocab_gguf),
        cmocka_unit_test(test_tokenizer_small_vocab_hf),
        cmocka_unit_test(test_tokenizer_golden_prompt),
        cmocka_unit_test(test_tokenizer_encode_threads),
        cmocka_unit_test(test_tokenizer_stream_split_utf8),
        cmocka_unit_test(test_tokenizer_profile_splits),
        cmocka_unit_test(test_tokenizer_refuses_missing_merges),
        cmocka_unit_test(test_tokenizer_refuses_short_token_types),
        cmocka_unit_test(test_tokenizer_refuses_unknown_pre),
        cmocka_unit_test(test_tokenizer_refuses_other_models),
        cmocka_unit_test(test_tokenizer_refuses_automatic_bos),
        cmocka_unit_test(test_tokenizer_refuses_bad_spec),
        cmocka_unit_test(test_tokenizer_refuses_bad_tokenizer_json),
        cmocka_unit_test(test_tokenizer_qwen3_vectors_gguf),
        cmocka_unit_test(test_tokenizer_qwen3_vectors_hf),
        cmocka_unit_test(test_tokenizer_qwen3_detok),
        cmocka_unit_test(test_tokenizer_llama_qwen2_vectors),
        cmocka_unit_test(test_tokenizer_encode_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
