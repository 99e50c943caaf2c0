/* Grammar masks: the cost of a decoding step's token mask on a 248,320-entry
 * vocabulary (the Qwen3 vocabulary of ../shared/testdata, padded with tokens
 * made by joining two of its own, as BPE merges do), along random walks through
 * JSON-schema and tool-call grammars. Reports microseconds per step: the first
 * walk of each grammar (its mask pieces computed on first use) apart from the
 * rest, and the cost of applying a mask to the logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "server/text/grammar/grammar.h"
#include "server/text/tokenizer/tokenizer.h"

#define N_VOCAB 248320
#define WALKS 30

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats {
    double *t;
    size_t n, cap;
};

static void stats_add(struct stats *s, double v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->t = realloc(s->t, s->cap * sizeof *s->t);
    }
    s->t[s->n++] = v;
}

static void stats_print(const char *what, struct stats *s)
{
    if (!s->n)
        return;
    qsort(s->t, s->n, sizeof *s->t, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->t[i];
    printf("  %-34s %7zu steps  mean %8.1f us  p50 %8.1f  p99 %8.1f  max %9.1f\n", what, s->n,
           sum / (double)s->n, s->t[s->n / 2], s->t[s->n * 99 / 100], s->t[s->n - 1]);
}

/* One random walk, timing every fill_mask; steers to the end after budget steps. */
static void walk(const struct splash_grammar *g, const struct splash_grammar_vocab *v,
                 const int32_t *single, size_t n_single, uint64_t seed, struct stats *st,
                 uint32_t *mask, int32_t *ids)
{
    struct splash_err err;
    struct splash_grammar_matcher *m;
    if (splash_grammar_matcher_create(g, v, &m, &err)) {
        fprintf(stderr, "matcher: %s\n", err.msg);
        exit(1);
    }
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 7;
    for (int step = 0; step < 4000; step++) {
        double t0 = now_us();
        splash_grammar_matcher_fill_mask(m, mask);
        stats_add(st, now_us() - t0);
        if (splash_grammar_matcher_is_complete(m))
            break;
        size_t n = 0;
        for (size_t w = 0; w < (N_VOCAB + 31) / 32; w++)
            for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
                ids[n++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
        if (!n)
            break;
        int32_t pick = ids[rnd(&rng) % n];
        if (step >= 60) {
            size_t best = SIZE_MAX;
            for (size_t k = 0; k < n_single + 16; k++) {
                int32_t c = k < n_single ? single[k] : ids[rnd(&rng) % n];
                if (!((mask[c / 32] >> (c % 32)) & 1u) ||
                    splash_grammar_matcher_accept_token(m, c, &err))
                    continue;
                size_t d = splash_grammar_matcher_distance(m);
                splash_grammar_matcher_rollback(m, 1);
                if (d < best) {
                    best = d;
                    pick = c;
                }
            }
        }
        if (splash_grammar_matcher_accept_token(m, pick, &err)) {
            fprintf(stderr, "accept: %s\n", err.msg);
            exit(1);
        }
    }
    splash_grammar_matcher_destroy(m);
}

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0},\"email\":{\"type\":\"string\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},"
    "\"city\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\"]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"address\"],\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":{"
    "\"anyOf\":[{\"type\":\"object\",\"properties\":{\"sku\":{\"type\":\"string\"},"
    "\"qty\":{\"type\":\"integer\"}},\"required\":[\"sku\",\"qty\"]},"
    "{\"enum\":[\"none\",\"unknown\"]}]}},\"note\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"items\",\"note\"]}",
};

int main(int argc, char **argv)
{
    const char *dir = getenv("SPLASH_TESTDATA");
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer/qwen3-vocab.gguf",
             dir && *dir ? dir : "../shared/testdata");
    struct splash_err err;
    struct splash_tokenizer *tok;
    if (splash_tokenizer_load(path, &tok, &err)) {
        fprintf(stderr, "bench-grammar: %s\n", err.msg);
        return 1;
    }
    size_t n_tok = splash_tokenizer_n_tokens(tok);
    const char **pieces = calloc(N_VOCAB, sizeof *pieces);
    size_t *lens = calloc(N_VOCAB, sizeof *lens);
    uint8_t *special = calloc(N_VOCAB, 1);
    int32_t *normal = malloc(n_tok * sizeof *normal);
    int32_t *single = malloc(256 * sizeof *single);
    size_t n_normal = 0, n_single = 0;
    for (size_t i = 0; i < n_tok; i++) {
        int type = splash_tokenizer_token_type(tok, (int32_t)i);
        pieces[i] = splash_tokenizer_piece(tok, (int32_t)i, SPLASH_DETOK_SPECIAL, &lens[i]);
        special[i] = type != SPLASH_TOKEN_NORMAL && type != SPLASH_TOKEN_BYTE;
        if (!special[i]) {
            normal[n_normal++] = (int32_t)i;
            if (lens[i] == 1 && n_single < 256)
                single[n_single++] = (int32_t)i;
        }
    }
    /* padding: pairs of the vocabulary's own tokens */
    uint64_t rng = 12345;
    for (size_t i = n_tok; i < N_VOCAB; i++) {
        int32_t a = normal[rnd(&rng) % n_normal], b = normal[rnd(&rng) % n_normal];
        char *p = malloc(lens[a] + lens[b] + 1);
        memcpy(p, pieces[a], lens[a]);
        memcpy(p + lens[a], pieces[b], lens[b]);
        pieces[i] = p;
        lens[i] = lens[a] + lens[b];
    }
    int32_t stops[2] = {splash_tokenizer_find_special(tok, "<|im_end|>"),
                        splash_tokenizer_find_special(tok, "<|endoftext|>")};
    struct splash_grammar_vocab *v;
    double t0 = now_us();
    if (splash_grammar_vocab_create_raw(N_VOCAB, pieces, lens, special, stops, 2, &v, &err)) {
        fprintf(stderr, "bench-grammar: %s\n", err.msg);
        return 1;
    }
    printf("grammar masks on a %d-token vocabulary (index built in %.1f ms)\n", N_VOCAB,
           (now_us() - t0) / 1e3);
    uint32_t *mask = malloc(splash_grammar_mask_words(v) * sizeof *mask);
    int32_t *ids = malloc(N_VOCAB * sizeof *ids);

    struct splash_grammar_format fmt;
    if (splash_grammar_format_init(&fmt, SPLASH_GRAMMAR_CALLS_QWEN_XML, tok, &err)) {
        fprintf(stderr, "bench-grammar: %s\n", err.msg);
        return 1;
    }
    json_t *tools =
        json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{"
                   "\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},"
                   "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},"
                   "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14}},"
                   "\"required\":[\"location\"]}}},"
                   "{\"type\":\"function\",\"function\":{\"name\":\"run_shell\",\"parameters\":{"
                   "\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"},"
                   "\"env\":{\"type\":\"object\"}},\"required\":[\"command\"]}}}]",
                   0, NULL);

    t0 = now_us();
    if (getenv("BENCH_GRAMMAR_COLD") == NULL && splash_grammar_vocab_warm(v, &fmt, &err)) {
        fprintf(stderr, "bench-grammar: %s\n", err.msg);
        return 1;
    }
    printf("  shared mask pieces (splash_grammar_vocab_warm): %.1f ms%s\n", (now_us() - t0) / 1e3,
           getenv("BENCH_GRAMMAR_COLD") ? " (skipped: BENCH_GRAMMAR_COLD)" : "");
    struct stats all_warm = {0};
    for (size_t k = 0; k < sizeof schemas / sizeof *schemas + 1; k++) {
        struct splash_grammar *g;
        char label[64];
        if (k < sizeof schemas / sizeof *schemas) {
            json_t *schema = json_loads(schemas[k], 0, NULL);
            if (splash_grammar_compile_json_schema(schema, 0, &g, &err)) {
                fprintf(stderr, "bench-grammar: %s\n", err.msg);
                return 1;
            }
            json_decref(schema);
            snprintf(label, sizeof label, "json schema %zu", k);
        } else {
            if (splash_grammar_compile_tool_calls(tools, NULL, 1, &fmt, &g, &err)) {
                fprintf(stderr, "bench-grammar: %s\n", err.msg);
                return 1;
            }
            snprintf(label, sizeof label, "tool calls (qwen xml)");
        }
        struct stats cold = {0}, warm = {0};
        for (int w = 0; w < WALKS; w++)
            walk(g, v, single, n_single, (uint64_t)w + 1, w ? &warm : &cold, mask, ids);
        char l1[96], l2[96];
        snprintf(l1, sizeof l1, "%s, first walk", label);
        snprintf(l2, sizeof l2, "%s, later walks", label);
        stats_print(l1, &cold);
        stats_print(l2, &warm);
        for (size_t i = 0; i < warm.n; i++)
            stats_add(&all_warm, warm.t[i]);
        free(cold.t);
        free(warm.t);
        splash_grammar_destroy(g);
    }
    stats_print("all grammars, later walks", &all_warm);

    /* applying a mask: a string-body step allows most tokens, a structural one few */
    float *logits = malloc(N_VOCAB * sizeof *logits);
    for (size_t i = 0; i < N_VOCAB; i++)
        logits[i] = (float)(i % 97) * 0.01f;
    memset(mask, 0x5a, splash_grammar_mask_words(v) * sizeof *mask);
    t0 = now_us();
    for (int r = 0; r < 200; r++)
        splash_grammar_mask_apply(mask, N_VOCAB, logits, N_VOCAB);
    printf("  mask_apply over %d logits: %.1f us\n", N_VOCAB, (now_us() - t0) / 200);
    printf("  target: <= 10%% of a decode step (about 1.5 ms at 2 threads)\n");
    (void)argc;
    (void)argv;
    free(all_warm.t);
    free(logits);
    json_decref(tools);
    splash_grammar_vocab_destroy(v);
    for (size_t i = n_tok; i < N_VOCAB; i++)
        free((void *)pieces[i]);
    free(pieces);
    free(lens);
    free(special);
    free(normal);
    free(single);
    free(mask);
    free(ids);
    splash_tokenizer_destroy(tok);
    return 0;
}
