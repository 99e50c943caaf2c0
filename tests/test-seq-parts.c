/* Sequences saved in parts (family ABI 1.6: seq_save_page, seq_rest_bytes, seq_save_rest,
 * seq_load_parts), for the SSD tier that keeps a prefix's pages once for every restore
 * point: a sequence loaded from its pages and rest goes on to the bits of the one saved
 * (and of seq_load of its whole blob), for each family that saves in parts, int8 and bf16
 * KV, ending one short of a page, on one, one past it and inside a later one; a page's
 * bytes are the same in a sequence that goes on further (computed in other calls), so a
 * longer sequence loads from the shorter one's pages; rests cut short, of another layout
 * or with the wrong page count are refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/family.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/family.h"
#include "tests/support/blob.h"
#include "tests/support/model_run.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define OK(x) assert_int_equal((x), SPLASH_OK)

static struct splash_pool *pool;

/* A family and the tiny model it is tested on: a test data file. */
struct family_case {
    const char *family;
    const char *file; /* under the test data */
};

static const struct family_case hybrid_cases[] = {
    {"qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf"},
    {"qwen_moe", "models/qwen35moe-tiny-Q4_K_M.gguf"},
};

static int setup(void **state)
{
    (void)state;
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    pool = splash_pool_create(2);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    splash_pool_destroy(pool);
    return 0;
}

static void open_case(const struct family_case *c, int kv_format, struct test_run *r)
{
    char path[512];
    struct test_run_opts o = {.fam = test_family(c->family), .pool = pool, .kv_format = kv_format};
    test_run_open(r, &o, test_testdata_path(path, sizeof path, c->file), c->file);
    assert_true(splash_family_saves_parts(r->fam));
}

static void prompt(const struct test_run *r, int32_t *t, int32_t n, int32_t salt)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = (int32_t)(((int64_t)i * 53 + 7 + salt) % r->info.n_vocab);
}

/* Feeds tokens [from, to) to seq in calls of the sizes chunks gives (0-terminated; the
 * last size repeats), the last call's logits to logits (NULL: none). */
static void feed(const struct test_run *r, void *seq, const int32_t *t, int32_t from, int32_t to,
                 const int32_t *chunks, float *logits)
{
    struct splash_err err = {{0}};
    for (int32_t at = from, k = 0; at < to; k += chunks[k + 1] != 0) {
        int32_t n = chunks[k] < to - at ? chunks[k] : to - at;
        struct splash_lane lane = {.seq = seq, .tokens = t + at, .n_tokens = n, .pos0 = at,
                                   .logits = at + n == to ? logits : NULL};
        if (r->fam->forward(r->model, &lane, 1, &err))
            fail_msg("forward at %d: %s", at, err.msg);
        at += n;
    }
}

/* A sequence's whole pages and its rest, as the SSD tier would keep them. */
struct parts {
    struct test_blob *pages;
    int64_t n_pages;
    struct test_blob rest;
};

static void parts_save(const struct test_run *r, void *seq, int32_t n_tokens, struct parts *p)
{
    struct splash_err err = {{0}};
    p->n_pages = n_tokens / r->info.kv_page_tokens;
    p->pages = calloc((size_t)p->n_pages + 1, sizeof *p->pages);
    assert_non_null(p->pages);
    for (int64_t k = 0; k < p->n_pages; k++) {
        OK(splash_family_seq_save_page(r->fam, r->model, seq, k, test_blob_write, &p->pages[k],
                                       &err));
        assert_int_equal(p->pages[k].n, r->info.kv_page_bytes);
    }
    memset(&p->rest, 0, sizeof p->rest);
    OK(splash_family_seq_save_rest(r->fam, r->model, seq, test_blob_write, &p->rest, &err));
    assert_int_equal(p->rest.n, splash_family_seq_rest_bytes(r->fam, r->model, n_tokens));
}

static void parts_free(struct parts *p)
{
    for (int64_t k = 0; k < p->n_pages; k++)
        free(p->pages[k].p);
    free(p->pages);
    free(p->rest.p);
}

/* A sequence from pages (their bytes) and a rest. */
static enum splash_status parts_load(const struct test_run *r, const struct test_blob *const *pages,
                                     int64_t n_pages, const struct test_blob *rest, void **seq,
                                     struct splash_err *err)
{
    const void **bytes = calloc((size_t)n_pages + 1, sizeof *bytes);
    assert_non_null(bytes);
    for (int64_t k = 0; k < n_pages; k++)
        bytes[k] = pages[k]->p;
    enum splash_status st = splash_family_seq_load_parts(r->fam, r->model, bytes, n_pages,
                                                         rest->p, rest->n, seq, err);
    free(bytes);
    return st;
}

static enum splash_status parts_load_own(const struct test_run *r, const struct parts *p,
                                         void **seq, struct splash_err *err)
{
    const struct test_blob **pages = calloc((size_t)p->n_pages + 1, sizeof *pages);
    assert_non_null(pages);
    for (int64_t k = 0; k < p->n_pages; k++)
        pages[k] = &p->pages[k];
    enum splash_status st = parts_load(r, pages, p->n_pages, &p->rest, seq, err);
    free(pages);
    return st;
}

enum { STEPS = 4 };

/* The logits of seq going on from n tokens: next, then STEPS - 1 greedy tokens, each a
 * decode step ([STEPS][n_vocab], malloc'ed). */
static float *go_on(const struct test_run *r, void *seq, int32_t n, int32_t next)
{
    int64_t V = r->info.n_vocab;
    float *out = malloc((size_t)(STEPS * V) * sizeof *out);
    assert_non_null(out);
    struct splash_err err = {{0}};
    int32_t tok = next;
    for (int32_t s = 0; s < STEPS; s++) {
        float *row = out + (size_t)(s * V);
        struct splash_lane lane = {.seq = seq, .tokens = &tok, .n_tokens = 1, .pos0 = n + s,
                                   .logits = row};
        if (r->fam->forward(r->model, &lane, 1, &err))
            fail_msg("step %d: %s", s, err.msg);
        int32_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (row[v] > row[best])
                best = (int32_t)v;
        tok = best;
    }
    return out;
}

/* ---- a sequence in parts goes on as the one saved --------------------------------------- */

static void round_trip(const struct family_case *c, int kv)
{
    struct test_run r;
    open_case(c, kv, &r);
    const int32_t P = r.info.kv_page_tokens;
    const int32_t lengths[] = {P - 1, P, P + 1, 3 * P + 5};
    static const int32_t one_call[] = {1 << 20, 0};
    int32_t t[4 * 64 + 8];
    assert_true(3 * P + 6 <= (int32_t)(sizeof t / sizeof t[0]));
    prompt(&r, t, 3 * P + 6, 11);
    size_t logits_bytes = (size_t)(STEPS * r.info.n_vocab) * sizeof(float);
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        int32_t n = lengths[i];
        struct splash_err err = {{0}};
        void *seq, *from_parts, *from_blob;
        OK(r.fam->seq_create(r.model, &seq, &err));
        feed(&r, seq, t, 0, n, one_call, NULL);
        struct parts p;
        parts_save(&r, seq, n, &p);
        assert_int_equal(p.n_pages, n / P);
        /* the page past the whole ones is the rest's */
        assert_int_equal(splash_family_seq_save_page(r.fam, r.model, seq, n / P, test_blob_write,
                                                     &p.rest, &err),
                         SPLASH_ERR_INVALID);
        assert_non_null(strstr(err.msg, "whole pages"));
        struct test_blob whole = {0};
        OK(splash_family_seq_save(r.fam, r.model, seq, test_blob_write, &whole, &err));
        OK(parts_load_own(&r, &p, &from_parts, &err));
        OK(splash_family_seq_load(r.fam, r.model, whole.p, whole.n, &from_blob, &err));
        float *want = go_on(&r, seq, n, t[n]);
        float *got = go_on(&r, from_parts, n, t[n]);
        float *blob = go_on(&r, from_blob, n, t[n]);
        printf("  %s kv %s, %d tokens: %lld pages of %llu bytes, a rest of %zu\n", c->family,
               kv == SPLASH_KV_INT8 ? "int8" : "bf16", n, (long long)p.n_pages,
               (unsigned long long)r.info.kv_page_bytes, p.rest.n);
        assert_memory_equal(got, want, logits_bytes);
        assert_memory_equal(blob, want, logits_bytes);
        free(want);
        free(got);
        free(blob);
        free(whole.p);
        parts_free(&p);
        r.fam->seq_destroy(r.model, seq);
        r.fam->seq_destroy(r.model, from_parts);
        r.fam->seq_destroy(r.model, from_blob);
    }
    assert_true(r.fam->cache_bytes(r.model) == 0);
    test_run_close(&r);
}

static void test_round_trip_hybrid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hybrid_cases / sizeof hybrid_cases[0]; i++)
        for (int kv = SPLASH_KV_INT8; kv <= SPLASH_KV_BF16; kv++)
            round_trip(&hybrid_cases[i], kv);
}

/* ---- pages shared by a sequence that goes on further ------------------------------------- */

/* Runs of a lane (forward_runs): where the engine's prefill plan cuts a prompt. */
struct cuts {
    int32_t n;
    int32_t ends[16];
};

/* Feeds tokens [0, n) to seq in one call as the runs cut ends at (the last run ending at
 * n). */
static void feed_runs(const struct test_run *r, void *seq, const int32_t *t, int32_t n,
                      const struct cuts *c)
{
    struct splash_err err = {{0}};
    struct splash_lane lane = {.seq = seq, .tokens = t, .n_tokens = n};
    struct splash_lane_runs runs = {.n = c->n, .ends = c->ends};
    assert_int_equal(c->ends[c->n - 1], n);
    if (r->fam->forward_runs(r->model, &lane, &runs, 1, NULL, &err))
        fail_msg("forward_runs: %s", err.msg);
}

/* How A and B are computed. */
enum shared_way {
    CALLS,    /* A in one call, B in calls of 64, 192, then 128 tokens */
    TURN_RUNS /* as the plan cuts after a turn boundary at 100: A's runs end at 64, 100 and
                 its end; B's at 64, 100, then every 64 from 100 and its end */
};

/* A = 2.5 pages; B = A's tokens and 300 more, computed in other calls or runs (that start
 * the recurrence's chunks where A's do, as the engine's prefill plan does for the same
 * tokens). A's whole pages are B's byte for byte, so B loads from A's page copies, its own
 * later pages and its rest, and goes on as B. */
static void shared_pages(const struct family_case *c, int kv, enum shared_way way)
{
    struct test_run r;
    open_case(c, kv, &r);
    const int32_t P = r.info.kv_page_tokens;
    const int32_t NA = 5 * P / 2, NB = NA + 300;
    int32_t *t = malloc((size_t)(NB + 1) * sizeof *t);
    assert_non_null(t);
    prompt(&r, t, NB + 1, 29);
    struct splash_err err = {{0}};
    void *a, *b, *loaded;
    OK(r.fam->seq_create(r.model, &a, &err));
    OK(r.fam->seq_create(r.model, &b, &err));
    if (way == CALLS) {
        static const int32_t one_call[] = {1 << 20, 0};
        static const int32_t other_calls[] = {64, 192, 128, 0};
        feed(&r, a, t, 0, NA, one_call, NULL);
        feed(&r, b, t, 0, NB, other_calls, NULL);
    } else {
        struct cuts ca = {3, {64, 100, NA}}, cb = {0};
        cb.ends[cb.n++] = 64;
        for (int32_t at = 100; at < NB; at += 64)
            cb.ends[cb.n++] = at;
        cb.ends[cb.n++] = NB;
        feed_runs(&r, a, t, NA, &ca);
        feed_runs(&r, b, t, NB, &cb);
    }
    struct parts pa, pb;
    parts_save(&r, a, NA, &pa);
    parts_save(&r, b, NB, &pb);
    assert_int_equal(pa.n_pages, 2);
    for (int64_t k = 0; k < pa.n_pages; k++)
        assert_memory_equal(pa.pages[k].p, pb.pages[k].p, pa.pages[k].n);
    const struct test_blob **pages = calloc((size_t)pb.n_pages, sizeof *pages);
    assert_non_null(pages);
    for (int64_t k = 0; k < pb.n_pages; k++)
        pages[k] = k < pa.n_pages ? &pa.pages[k] : &pb.pages[k];
    OK(parts_load(&r, pages, pb.n_pages, &pb.rest, &loaded, &err));
    float *want = go_on(&r, b, NB, t[NB]);
    float *got = go_on(&r, loaded, NB, t[NB]);
    assert_memory_equal(got, want, (size_t)(STEPS * r.info.n_vocab) * sizeof(float));
    printf("  %s kv %s, %s: %lld of B's %lld pages from A's copies\n", c->family,
           kv == SPLASH_KV_INT8 ? "int8" : "bf16", way == CALLS ? "other calls" : "turn runs",
           (long long)pa.n_pages, (long long)pb.n_pages);
    free(want);
    free(got);
    free(pages);
    parts_free(&pa);
    parts_free(&pb);
    r.fam->seq_destroy(r.model, a);
    r.fam->seq_destroy(r.model, b);
    r.fam->seq_destroy(r.model, loaded);
    free(t);
    test_run_close(&r);
}

static void test_shared_pages_hybrid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hybrid_cases / sizeof hybrid_cases[0]; i++)
        for (int kv = SPLASH_KV_INT8; kv <= SPLASH_KV_BF16; kv++) {
            shared_pages(&hybrid_cases[i], kv, CALLS);
            shared_pages(&hybrid_cases[i], kv, TURN_RUNS);
        }
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* Loads that must be refused (INVALID) with a message holding `says`. */
static void refused(const struct test_run *r, const struct test_blob *const *pages,
                    int64_t n_pages, const struct test_blob *rest, const char *says)
{
    struct splash_err err = {{0}};
    void *seq = NULL;
    assert_int_equal(parts_load(r, pages, n_pages, rest, &seq, &err), SPLASH_ERR_INVALID);
    assert_null(seq);
    if (!strstr(err.msg, says))
        fail_msg("refused with \"%s\", not a message saying \"%s\"", err.msg, says);
}

/* A rest a byte short or long, of the same model with the other KV format, of a token
 * count it does not hold, with the wrong page count or a missing page: refused. */
static void refusals(const struct family_case *c)
{
    struct test_run r, other;
    open_case(c, SPLASH_KV_INT8, &r);
    open_case(c, SPLASH_KV_BF16, &other);
    const int32_t P = r.info.kv_page_tokens, N = 2 * P + 7;
    int32_t t[2 * 64 + 8];
    assert_true(N <= (int32_t)(sizeof t / sizeof t[0]));
    prompt(&r, t, N, 3);
    static const int32_t one_call[] = {1 << 20, 0};
    struct splash_err err = {{0}};
    void *seq, *seq_other;
    OK(r.fam->seq_create(r.model, &seq, &err));
    OK(other.fam->seq_create(other.model, &seq_other, &err));
    feed(&r, seq, t, 0, N, one_call, NULL);
    feed(&other, seq_other, t, 0, N, one_call, NULL);
    struct parts p, po;
    parts_save(&r, seq, N, &p);
    parts_save(&other, seq_other, N, &po);
    const struct test_blob *pages[3] = {&p.pages[0], &p.pages[1], &p.pages[1]};
    /* cut short by a byte, and a byte too long */
    struct test_blob cut = p.rest;
    cut.n--;
    refused(&r, pages, 2, &cut, "has");
    struct test_blob longer = {0};
    test_blob_write(&longer, p.rest.p, p.rest.n);
    test_blob_write(&longer, "", 1);
    refused(&r, pages, 2, &longer, "has");
    /* every length down to nothing: refused, never read past */
    for (size_t n = 0; n < p.rest.n; n += 1 + n / 3) {
        struct test_blob head = {.p = p.rest.p, .n = n};
        refused(&r, pages, 2, &head, "");
    }
    /* the other KV format's rest (and the other way round) */
    refused(&r, pages, 2, &po.rest, "not this model's layout");
    const struct test_blob *pages_other[2] = {&po.pages[0], &po.pages[1]};
    refused(&other, pages_other, 2, &p.rest, "not this model's layout");
    /* a token count the rest does not hold, one past the context, another magic */
    int64_t n_tokens;
    memcpy(&n_tokens, longer.p + 8, sizeof n_tokens);
    assert_int_equal(n_tokens, N);
    n_tokens = 2 * P; /* no partial page: the rest is a page too long */
    memcpy(longer.p + 8, &n_tokens, sizeof n_tokens);
    longer.n = p.rest.n;
    refused(&r, pages, 2, &longer, "has");
    n_tokens = (int64_t)1 << 40;
    memcpy(longer.p + 8, &n_tokens, sizeof n_tokens);
    refused(&r, pages, 2, &longer, "past");
    n_tokens = N;
    memcpy(longer.p + 8, &n_tokens, sizeof n_tokens);
    longer.p[0] ^= 1;
    refused(&r, pages, 2, &longer, "not this model's layout");
    longer.p[0] ^= 1;
    /* the whole blob is no rest */
    struct test_blob whole = {0};
    OK(splash_family_seq_save(r.fam, r.model, seq, test_blob_write, &whole, &err));
    refused(&r, pages, 2, &whole, "not this model's layout");
    /* page counts other than the two the tokens fill, and a missing page */
    char says[96];
    for (int64_t n_pages = 0; n_pages <= 3; n_pages += n_pages == 1 ? 2 : 1) {
        snprintf(says, sizeof says, "%lld pages for a rest of %d tokens, which fill 2",
                 (long long)n_pages, N);
        refused(&r, pages, n_pages, &p.rest, says);
    }
    const struct test_blob missing = {0};
    const struct test_blob *with_hole[2] = {&p.pages[0], &missing};
    refused(&r, with_hole, 2, &p.rest, "page 1 of 2 is missing");
    /* and still loads whole */
    void *loaded;
    OK(parts_load(&r, pages, 2, &longer, &loaded, &err));
    r.fam->seq_destroy(r.model, loaded);
    free(whole.p);
    free(longer.p);
    parts_free(&p);
    parts_free(&po);
    r.fam->seq_destroy(r.model, seq);
    other.fam->seq_destroy(other.model, seq_other);
    assert_true(r.fam->cache_bytes(r.model) == 0);
    test_run_close(&r);
    test_run_close(&other);
}

static void test_refusals_hybrid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hybrid_cases / sizeof hybrid_cases[0]; i++)
        refusals(&hybrid_cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_hybrid),
        cmocka_unit_test(test_shared_pages_hybrid),
        cmocka_unit_test(test_refusals_hybrid),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
