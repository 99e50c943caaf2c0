/* The prefix cache: the prefill plan's cuts, the radix tree of restore points, the
 * families' copy-on-write forks, and the engine end to end: a request resumed from a
 * restore point (a turn boundary, a chunk end, the same prompt again) gives the bits it
 * gives on a cold engine (greedy and seeded, int8 and bf16 KV, dense and MoE), and
 * requests that do not fit the memory plan together take turns instead of failing. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/engine/cache_namespace.h"
#include "server/engine/disk_cache.h"
#include "server/engine/engine.h"
#include "server/engine/prefill_plan.h"
#include "server/engine/prefix_cache.h"
#include "server/engine/protocol.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "server/text/tokenizer/tokenizer.h"
#include "tests/support/engine_thread.h"
#include "tests/support/model_run.h"
#include "tests/support/rng.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

/* ---- the prefill plan ------------------------------------------------------------ */

static void test_plan_cuts(void **state)
{
    (void)state;
    enum { R = 7 }; /* the reuse token */
    int32_t t[400];
    for (int i = 0; i < 400; i++)
        t[i] = 100 + i;
    t[99] = R;  /* boundary at 100 */
    t[129] = R; /* boundary at 130 */
    struct splash_prefill_plan p = {.tokens = t, .n = 400, .reuse = R};
    /* segment [0, 100): 64-token steps, then its tail [64, 100) alone */
    assert_int_equal(splash_plan_next_cut(&p, 0, 1000), 64);
    assert_int_equal(splash_plan_next_cut(&p, 0, 10), 64);
    assert_int_equal(splash_plan_next_cut(&p, 64, 1000), 100);
    /* a short segment is one call */
    assert_int_equal(splash_plan_next_cut(&p, 100, 1000), 130);
    /* [130, 400): budget cuts at whole steps from 130, the tail from 386 */
    assert_int_equal(splash_plan_next_cut(&p, 130, 100), 194);
    assert_int_equal(splash_plan_next_cut(&p, 130, 200), 322);
    assert_int_equal(splash_plan_next_cut(&p, 322, 1000), 386);
    assert_int_equal(splash_plan_next_cut(&p, 386, 1000), 400);
    /* restore points are exactly the places a call may start */
    assert_true(splash_plan_is_cut(&p, 64));
    assert_true(splash_plan_is_cut(&p, 100));
    assert_true(splash_plan_is_cut(&p, 130));
    assert_true(splash_plan_is_cut(&p, 194));
    assert_true(splash_plan_is_cut(&p, 386));
    assert_false(splash_plan_is_cut(&p, 0));
    assert_false(splash_plan_is_cut(&p, 128));
    assert_false(splash_plan_is_cut(&p, 200));
    assert_false(splash_plan_is_cut(&p, 400));
    assert_true(splash_plan_is_boundary(&p, 130));
    assert_false(splash_plan_is_boundary(&p, 131));
    /* no reuse token: one segment */
    p.reuse = -1;
    assert_int_equal(splash_plan_next_cut(&p, 0, 1000), 384);
    assert_false(splash_plan_is_cut(&p, 100));
}

/* ---- the radix tree ---------------------------------------------------------------- */

static int dropped;
static void count_drop(void *ctx, void *seq)
{
    (void)ctx;
    free(seq);
    dropped++;
}

static void *token_seq(void)
{
    return malloc(1);
}

static int accept_even(void *ctx, int32_t len)
{
    (void)ctx;
    return len % 2 == 0;
}

static void test_radix_tree(void **state)
{
    (void)state;
    dropped = 0;
    struct splash_prefix_cache *c = splash_prefix_cache_create(count_drop, NULL);
    int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t b[] = {1, 2, 3, 9, 9, 9};
    assert_int_equal(splash_prefix_cache_insert(c, a, 8, token_seq(), SPLASH_POINT_TURN), 0);
    assert_int_equal(splash_prefix_cache_insert(c, a, 4, token_seq(), SPLASH_POINT_CHUNK), 0);
    assert_int_equal(splash_prefix_cache_insert(c, b, 6, token_seq(), SPLASH_POINT_CHUNK), 0);
    assert_int_equal(splash_prefix_cache_insert(c, b, 2, token_seq(), SPLASH_POINT_TURN), 0);
    /* a second point at the same prefix keeps the first */
    assert_int_equal(splash_prefix_cache_insert(c, a, 4, token_seq(), SPLASH_POINT_CHUNK), 0);
    assert_int_equal(dropped, 1);
    assert_non_null(splash_prefix_cache_find(c, a, 8));
    assert_null(splash_prefix_cache_find(c, a, 3));
    int32_t q[] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
    struct splash_prefix_point *p = splash_prefix_cache_lookup(c, q, 9, NULL, NULL);
    assert_non_null(p);
    assert_int_equal(splash_prefix_point_tokens(p), 8);
    /* the plan's test picks among the points along the prompt */
    int32_t q2[] = {1, 2, 3, 9, 9, 9, 9};
    p = splash_prefix_cache_lookup(c, q2, 7, accept_even, NULL);
    assert_int_equal(splash_prefix_point_tokens(p), 6);
    p = splash_prefix_cache_lookup(c, q2, 5, NULL, NULL);
    assert_int_equal(splash_prefix_point_tokens(p), 2);
    int32_t miss[] = {2, 2};
    assert_null(splash_prefix_cache_lookup(c, miss, 2, NULL, NULL));
    /* eviction: chunk points first, least recently used first; the newest turn point
     * (b's, inserted last) only when everything may go */
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 1);
    assert_null(splash_prefix_cache_find(c, a, 4)); /* a/4 was used least recently */
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 1);
    assert_null(splash_prefix_cache_find(c, b, 6));
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 1);
    assert_null(splash_prefix_cache_find(c, a, 8));
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 0);
    assert_non_null(splash_prefix_cache_find(c, b, 2));
    assert_int_equal(splash_prefix_cache_evict_one(c, 1), 1);
    assert_null(splash_prefix_cache_lookup(c, q, 9, NULL, NULL));
    /* the pruned tree takes new points */
    assert_int_equal(splash_prefix_cache_insert(c, a, 5, token_seq(), SPLASH_POINT_TURN), 0);
    assert_int_equal(splash_prefix_point_tokens(splash_prefix_cache_lookup(c, a, 8, NULL, NULL)),
                     5);
    struct splash_prefix_stats s;
    splash_prefix_cache_stats(c, &s);
    assert_int_equal(s.points, 1);
    assert_int_equal(s.evicted, 4);
    splash_prefix_cache_destroy(c);
    assert_int_equal(dropped, 6);
}

static int32_t spilled[8];
static int n_spilled;
static int note_spill(void *ctx, const int32_t *tokens, int32_t n, void *seq,
                      enum splash_point_class cls)
{
    (void)ctx, (void)seq, (void)cls;
    spilled[n_spilled++] = n;
    assert_int_equal(tokens[n - 1], n); /* the point's own tokens, root to end */
    return 0;
}

/* With an SSD tier, eviction hands each point over with its tokens, and takes the points
 * it already holds a copy of (they leave memory without a write) before the others. */
static void test_radix_tree_spill_order(void **state)
{
    (void)state;
    dropped = n_spilled = 0;
    struct splash_prefix_cache *c = splash_prefix_cache_create(count_drop, NULL);
    splash_prefix_cache_set_spill(c, note_spill, NULL);
    int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(splash_prefix_cache_insert(c, a, 3, token_seq(), SPLASH_POINT_CHUNK), 0);
    assert_int_equal(splash_prefix_cache_insert(c, a, 5, token_seq(), SPLASH_POINT_TURN), 0);
    assert_int_equal(splash_prefix_cache_insert(c, a, 8, token_seq(), SPLASH_POINT_TURN), 0);
    splash_prefix_point_set_copied(splash_prefix_cache_find(c, a, 5));
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 1);
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 1);
    assert_int_equal(splash_prefix_cache_evict_one(c, 0), 0); /* the newest turn point stays */
    assert_int_equal(n_spilled, 2);
    assert_int_equal(spilled[0], 5); /* its copy is there: first, though a turn point */
    assert_int_equal(spilled[1], 3);
    splash_prefix_cache_destroy(c);
    assert_int_equal(n_spilled, 2); /* a cache torn down spills nothing */
    assert_int_equal(dropped, 3);
}

/* ---- copy-on-write forks ------------------------------------------------------------- */

static struct splash_pool *pool;

static void forward(struct test_run *r, void *seq, const int32_t *t, int32_t n, int32_t pos0,
                    float *logits)
{
    struct splash_lane lane = {.seq = seq, .tokens = t, .n_tokens = n, .pos0 = pos0,
                               .logits = logits};
    struct splash_err err;
    if (r->fam->forward(r->model, &lane, 1, &err))
        fail_msg("forward: %s", err.msg);
}

static void fork_case(const char *fam, const char *file, int kv)
{
    struct test_run r;
    struct test_run_opts o = {.fam = test_family(fam), .pool = pool, .kv_format = kv};
    char path[512];
    if (test_run_open(&r, &o, test_testdata_path(path, sizeof path, file), file))
        return;
    assert_non_null(r.fam->seq_fork);
    assert_non_null(r.fam->cache_bytes);
    assert_true(r.info.kv_page_tokens > 0);
    uint64_t empty = r.fam->cache_bytes(r.model);
    int32_t t[200];
    uint64_t rng = 7;
    for (int i = 0; i < 200; i++)
        t[i] = (int32_t)(test_splitmix64(&rng) % 200) + 10;
    size_t V = (size_t)r.info.n_vocab;
    float *want = malloc(V * sizeof *want), *got = malloc(V * sizeof *got);
    struct splash_err err;
    void *a, *point, *b, *bad;
    assert_int_equal(r.fam->seq_create(r.model, &a, &err), SPLASH_OK);
    forward(&r, a, t, 100, 0, NULL); /* 100: mid-page, so both sides append into a shared page */
    assert_int_equal(r.fam->seq_fork(r.model, a, 100, &point, &err), SPLASH_OK);
    /* no GDN state but at the end */
    assert_int_equal(r.fam->seq_fork(r.model, a, 64, &bad, &err), SPLASH_ERR_UNSUPPORTED);
    uint64_t shared = r.fam->cache_bytes(r.model);
    forward(&r, a, t + 100, 100, 100, want);
    /* a second sequence from the point, fed the same tokens, computes the same bits: the
     * first one's appends went to its own copy of the shared page */
    assert_int_equal(r.fam->seq_fork(r.model, point, 100, &b, &err), SPLASH_OK);
    forward(&r, b, t + 100, 100, 100, got);
    assert_memory_equal(got, want, V * sizeof *got);
    /* and a fresh sequence too */
    r.fam->seq_destroy(r.model, b);
    assert_int_equal(r.fam->seq_create(r.model, &b, &err), SPLASH_OK);
    forward(&r, b, t, 100, 0, NULL);
    forward(&r, b, t + 100, 100, 100, got);
    assert_memory_equal(got, want, V * sizeof *got);
    /* the point's fork shared its pages: it cost a state, far less than its KV */
    r.fam->seq_destroy(r.model, b);
    r.fam->seq_destroy(r.model, a);
    assert_true(r.fam->cache_bytes(r.model) < shared);
    r.fam->seq_destroy(r.model, point);
    assert_int_equal(r.fam->cache_bytes(r.model), empty);
    free(want);
    free(got);
    test_run_close(&r);
}

static void test_fork_copy_on_write(void **state)
{
    (void)state;
    fork_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8);
    fork_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_BF16);
    fork_case("qwen_moe", "models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_INT8);
}

/* ---- several runs in one call (family ABI 1.3) ------------------------------------------ */

/* forward once per run from pos0 to the end of ends[]; logits of the last token */
static void forward_each_run(struct test_run *r, void *seq, const int32_t *t, const int32_t *ends,
                             int n_runs, int32_t pos0, float *logits)
{
    for (int k = 0; k < n_runs; k++) {
        if (ends[k] <= pos0)
            continue;
        forward(r, seq, t + pos0, ends[k] - pos0, pos0, k == n_runs - 1 ? logits : NULL);
        pos0 = ends[k];
    }
}

static void runs_case(const char *fam, const char *file, int kv)
{
    struct test_run r;
    struct test_run_opts o = {.fam = test_family(fam), .pool = pool, .kv_format = kv};
    char path[512];
    if (test_run_open(&r, &o, test_testdata_path(path, sizeof path, file), file))
        return;
    assert_non_null(r.fam->forward_runs);
    /* run ends as a prefill plan makes them: 64-token steps, tails, short segments, a
     * token alone, a long segment's steps (over 512 rows: the call is split in steps) */
    static const int32_t ends[] = {64, 100, 130, 133, 134, 198, 262, 390, 400, 720, 723};
    enum { N_RUNS = sizeof ends / sizeof ends[0], N = 723 };
    int32_t t[N];
    uint64_t rng = 11;
    for (int i = 0; i < N; i++)
        t[i] = (int32_t)(test_splitmix64(&rng) % 300) + 10;
    size_t V = (size_t)r.info.n_vocab;
    float *want = malloc(V * sizeof *want), *got = malloc(V * sizeof *got);
    struct splash_err err;
    void *a, *b;
    /* the reference: a call per run */
    assert_int_equal(r.fam->seq_create(r.model, &a, &err), SPLASH_OK);
    forward_each_run(&r, a, t, ends, N_RUNS, 0, want);
    /* one call of every run, with restore points at some run ends */
    uint8_t fork[N_RUNS] = {0};
    void *forks[N_RUNS];
    fork[1] = fork[3] = fork[4] = fork[8] = fork[9] = fork[N_RUNS - 1] = 1;
    assert_int_equal(r.fam->seq_create(r.model, &b, &err), SPLASH_OK);
    struct splash_lane lane = {.seq = b, .tokens = t, .n_tokens = N, .logits = got};
    struct splash_lane_runs runs = {.n = N_RUNS, .ends = ends, .fork = fork, .forks = forks};
    assert_int_equal(r.fam->forward_runs(r.model, &lane, &runs, 1, NULL, &err), SPLASH_OK);
    assert_memory_equal(got, want, V * sizeof *got);
    /* each point resumes the prompt to the same bits */
    for (int k = 0; k < N_RUNS; k++) {
        if (!fork[k]) {
            assert_null(forks[k]);
            continue;
        }
        assert_non_null(forks[k]);
        if (k == N_RUNS - 1)
            continue;
        forward_each_run(&r, forks[k], t, ends, N_RUNS, ends[k], got);
        if (memcmp(got, want, V * sizeof *got))
            fail_msg("%s kv %d: resumed from the point at %d: other logits", file, kv, ends[k]);
        r.fam->seq_destroy(r.model, forks[k]);
    }
    r.fam->seq_destroy(r.model, forks[N_RUNS - 1]);
    /* runs that do not end at the lane's end are refused */
    r.fam->seq_destroy(r.model, b);
    assert_int_equal(r.fam->seq_create(r.model, &b, &err), SPLASH_OK);
    lane.seq = b;
    runs.n = 2;
    runs.fork = NULL;
    assert_int_equal(r.fam->forward_runs(r.model, &lane, &runs, 1, NULL, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "run 1 ends at 100"));
    r.fam->seq_destroy(r.model, a);
    r.fam->seq_destroy(r.model, b);
    free(want);
    free(got);
    test_run_close(&r);
}

static void test_forward_runs_bit_identical(void **state)
{
    (void)state;
    runs_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8);
    runs_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_BF16);
    runs_case("qwen_moe", "models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_INT8);
    /* sliding layers: restore points take each ring as its layer passes the run's end */
    runs_case("gpt_oss", "gptoss/gptoss-tiny-MXFP4_MOE.gguf", SPLASH_KV_BF16);
    runs_case("gpt_oss", "gptoss/gptoss-tiny-Q8_0.gguf", SPLASH_KV_INT8);
}

/* ---- the engine end to end ----------------------------------------------------------- */

/* The SSD tier of the engines engine_start starts: a quota (0: off) in a directory, and
 * a persistent cache's root (NULL: none). */
static int64_t disk_quota;
static char disk_dir[64];
static const char *persist_root;

static void engine_start(struct test_engine *t, const char *file, int kv, uint64_t max_memory,
                         int64_t max_context, int lanes)
{
    const struct splash_engine_opts o = {.n_threads = 1,
                                         .kv_format = kv,
                                         .max_memory = max_memory,
                                         .max_context = max_context,
                                         .max_lanes = lanes,
                                         .prefill_chunk = 64,
                                         .decode_share = 0.5,
                                         .cache_disk = disk_quota,
                                         .cache_disk_dir = disk_dir,
                                         .persistent_cache = persist_root != NULL,
                                         .cache_dir = persist_root,
                                         .cache_lock_wait = 0.3};
    test_engine_start_opts(t, file, &o);
}

static void submit(struct test_engine *t, uint64_t id, const int32_t *prompt, int n,
                   int max_tokens, int32_t reuse, double temperature)
{
    struct splash_submit s = {.prompt = (int32_t *)prompt, .n_prompt = (size_t)n,
                              .reuse_token = reuse >= 0 ? reuse : -1};
    splash_gen_params_init(&s.params);
    s.params.max_tokens = max_tokens;
    s.params.logprobs = 1;
    s.params.sampling.temperature = (float)temperature;
    s.params.sampling.seed = 42;
    s.params.has_seed = 1;
    struct splash_err err;
    assert_int_equal(splash_frame_write_submit(t->fd, id, &s, &err), SPLASH_OK);
}

/* Reads frames until requests first..first+n-1 have all ended, printing the errors. */
static void collect(struct test_engine *t, uint64_t first, int n, struct test_result *res)
{
    test_engine_collect_all(t, first, n, res);
    for (int i = 0; i < n; i++)
        if (!res[i].done)
            fprintf(stderr, "  request %llu: %s\n", (unsigned long long)(first + (uint64_t)i),
                    res[i].message);
}

static json_t *engine_status(struct test_engine *t)
{
    struct splash_err err;
    json_t *b = json_object();
    splash_frame_write(t->fd, SPLASH_FRAME_STATUS_REQ, 999999, b, &err);
    json_decref(b);
    for (;;) {
        struct splash_frame f;
        assert_int_equal(splash_frame_read(t->fd, &f, &err), SPLASH_OK);
        if (f.type == SPLASH_FRAME_STATUS)
            return f.body;
        splash_frame_free(&f);
    }
}

static void run_one(struct test_engine *t, uint64_t id, const int32_t *prompt, int n,
                    int max_tokens, int32_t reuse, double temperature, struct test_result *res)
{
    submit(t, id, prompt, n, max_tokens, reuse, temperature);
    collect(t, id, 1, res);
    if (!res->done)
        fail_msg("request %llu failed: %s", (unsigned long long)id, res->code);
}

static int32_t im_end_id(const char *file)
{
    char path[512];
    struct splash_tokenizer *tok;
    struct splash_err err;
    assert_int_equal(splash_tokenizer_load(test_testdata_path(path, sizeof path, file), &tok, &err),
                     SPLASH_OK);
    int32_t id = splash_tokenizer_find_special(tok, "<|im_end|>");
    splash_tokenizer_destroy(tok);
    assert_true(id >= 0);
    return id;
}

/* A conversation: segments of these lengths, each closed by the reuse token but the
 * last (the assistant's opening). Returns its length; bounds[] gets each boundary. */
static int conversation(int32_t *t, const int *segs, int n_segs, int32_t reuse, uint32_t seed,
                        int *bounds)
{
    uint64_t rng = seed;
    int n = 0;
    for (int s = 0; s < n_segs; s++) {
        for (int i = 0; i < segs[s]; i++)
            t[n++] = (int32_t)(test_splitmix64(&rng) % 400) + 20;
        if (s + 1 < n_segs) {
            t[n++] = reuse;
            bounds[s] = n;
        }
    }
    return n;
}

static void hit_case(const char *file, int kv, double temperature)
{
    char label[160];
    int32_t reuse = im_end_id(file);
    /* system, user, assistant, a long user turn (chunk points inside), the opening */
    static const int segs[] = {200, 90, 60, 1300, 3};
    int bounds[4];
    int32_t *p = malloc(4096 * sizeof *p), *q = malloc(4096 * sizeof *q);
    int n = conversation(p, segs, 5, reuse, 11, bounds);
    struct test_result cold, hit;
    struct test_engine t;

    engine_start(&t, file, kv, 0, 4096, 4);
    run_one(&t, 1, p, n, 8, reuse, temperature, &cold);
    assert_int_equal(cold.cached, 0);
    test_engine_stop(&t);

    /* the previous turn: the conversation up to the user's turn end, then an opening of
     * its own; the next turn resumes at that turn boundary */
    engine_start(&t, file, kv, 0, 4096, 4);
    memcpy(q, p, (size_t)bounds[2] * sizeof *q);
    q[bounds[2]] = 5;
    q[bounds[2] + 1] = 6;
    struct test_result prev;
    run_one(&t, 1, q, bounds[2] + 2, 4, reuse, temperature, &prev);
    run_one(&t, 2, p, n, 8, reuse, temperature, &hit);
    snprintf(label, sizeof label, "%s kv %d t %.1f, turn boundary", file, kv, temperature);
    assert_int_equal(hit.cached, bounds[2]);
    test_result_assert_same(label, &hit, &cold, "cold");
    /* the same prompt again: from its last cut, the final turn boundary */
    run_one(&t, 3, p, n, 8, reuse, temperature, &hit);
    snprintf(label, sizeof label, "%s kv %d t %.1f, same prompt", file, kv, temperature);
    assert_int_equal(hit.cached, bounds[3]);
    test_result_assert_same(label, &hit, &cold, "cold");
    test_engine_stop(&t);

    /* a prompt that leaves the long turn partway: the next resumes from a chunk's end */
    engine_start(&t, file, kv, 0, 4096, 4);
    int part = bounds[2] + 1100;
    memcpy(q, p, (size_t)part * sizeof *q);
    q[part] = 3;
    run_one(&t, 1, q, part + 1, 2, reuse, temperature, &prev);
    run_one(&t, 2, p, n, 8, reuse, temperature, &hit);
    snprintf(label, sizeof label, "%s kv %d t %.1f, chunk end", file, kv, temperature);
    /* a chunk point 1,024 tokens past the last point at the least, at a whole step (where
     * the prompt chunk's runs end, which need not be exactly 1,024 on) */
    if (hit.cached < bounds[2] + 1024 || hit.cached > part || (hit.cached - bounds[2]) % 64)
        fail_msg("%s: resumed at %lld, the turn boundary at %d", label, (long long)hit.cached,
                 bounds[2]);
    test_result_assert_same(label, &hit, &cold, "cold");
    test_engine_stop(&t);
    free(p);
    free(q);
}

static void test_engine_hits_bit_identical(void **state)
{
    (void)state;
    hit_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 0);
    hit_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_BF16, 0);
    hit_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 0.9);
    hit_case("models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_INT8, 0);
    hit_case("models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_BF16, 0.9);
}

/* Concurrent conversations sharing a system prompt share its pages and take it from the
 * cache; every answer matches the same request on a cold engine. */
static void test_engine_shared_prefix_lanes(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    enum { N = 6 };
    static int32_t conv[N][1024];
    int len[N], bounds[4];
    for (int i = 0; i < N; i++) {
        static const int segs[] = {500, 40, 3};
        len[i] = conversation(conv[i], segs, 3, reuse, 5, bounds); /* the same system prompt */
        uint64_t rng = 100 + (uint64_t)i;
        for (int k = bounds[0]; k < bounds[1] - 1; k++)
            conv[i][k] = (int32_t)(test_splitmix64(&rng) % 400) + 20;
    }
    struct test_result cold[N], warm[N];
    struct test_engine t;
    for (int i = 0; i < N; i++) {
        engine_start(&t, file, SPLASH_KV_INT8, 0, 2048, 8);
        run_one(&t, 1, conv[i], len[i], 6, reuse, 0, &cold[i]);
        test_engine_stop(&t);
    }
    engine_start(&t, file, SPLASH_KV_INT8, 0, 2048, 8);
    for (int i = 0; i < N; i++)
        submit(&t, 10 + (uint64_t)i, conv[i], len[i], 6, reuse, 0);
    collect(&t, 10, N, warm);
    int hits = 0;
    for (int i = 0; i < N; i++) {
        assert_true(warm[i].done);
        hits += warm[i].cached == bounds[0];
        test_result_assert_same("shared system prompt", &warm[i], &cold[i], "cold");
    }
    assert_true(hits >= N - 1);
    json_t *st = engine_status(&t);
    json_t *pc = json_object_get(st, "prefix_cache");
    assert_true(json_integer_value(json_object_get(pc, "cached_tokens")) >= (N - 1) * bounds[0]);
    json_decref(st);
    test_engine_stop(&t);
}

/* The memory plan's room for caches holds one long request but not two: the second waits
 * or yields and both finish, and the caches never pass the plan. Before, the caches grew
 * past the plan, and a cache that could not grow failed every request of the step. */
static void test_engine_capacity_take_turns(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    struct test_engine t;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    json_t *plan = json_object_get(t.ready, "plan");
    uint64_t weights = (uint64_t)json_integer_value(json_object_get(plan, "weights_bytes"));
    uint64_t states = (uint64_t)json_integer_value(json_object_get(plan, "state_bytes"));
    uint64_t kv = (uint64_t)json_integer_value(json_object_get(plan, "kv_bytes"));
    uint64_t cap = (uint64_t)json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    test_engine_stop(&t);
    uint64_t per_token = kv / cap;
    /* room for 1,300 tokens of KV: one request of 900 fits, two do not */
    engine_start(&t, file, SPLASH_KV_INT8, weights + states + 1300 * per_token, 1024, 2);
    int32_t a[1024], b[1024];
    static const int segs[] = {600, 3};
    int bounds[2];
    int na = conversation(a, segs, 2, reuse, 21, bounds);
    int nb = conversation(b, segs, 2, reuse, 22, bounds);
    struct test_result res[2];
    submit(&t, 1, a, na, 300, reuse, 0);
    submit(&t, 2, b, nb, 300, reuse, 0);
    collect(&t, 1, 2, res);
    assert_true(res[0].done);
    assert_true(res[1].done);
    assert_int_equal(res[0].total, 300);
    assert_int_equal(res[1].total, 300);
    json_t *st = engine_status(&t);
    json_t *pc = json_object_get(st, "prefix_cache");
    assert_true(json_integer_value(json_object_get(pc, "bytes_peak")) <=
                json_integer_value(json_object_get(pc, "bytes_limit")));
    /* the second request gave its lane back and prefilled again */
    assert_true(json_integer_value(json_object_get(pc, "prefilled_tokens")) > na + nb);
    json_decref(st);
    test_engine_stop(&t);
}

static uint64_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A soak: 200 requests over a few shared prefixes with random continuations, under a
 * memory plan far smaller than their KV together. The caches stay within the plan, the
 * process's memory does not grow past it, every request ends well and the cache hits. */
static void soak_case(int disk)
{
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    struct test_engine t;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 4096, 4);
    json_t *plan = json_object_get(t.ready, "plan");
    uint64_t weights = (uint64_t)json_integer_value(json_object_get(plan, "weights_bytes"));
    uint64_t states = (uint64_t)json_integer_value(json_object_get(plan, "state_bytes"));
    uint64_t one_state = states / 4;
    uint64_t per_token = (uint64_t)json_integer_value(json_object_get(plan, "kv_bytes")) /
                         (uint64_t)json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    test_engine_stop(&t);
    /* room for 3,000 tokens of KV and twenty states beside the lanes' (a restore point
     * is mostly its state on this model); with the SSD tier, six, and a quota of twelve
     * points' states, so points go to the disk, come back and leave it again */
    if (disk) {
        disk_quota = (int64_t)(12 * one_state);
        strcpy(disk_dir, "/tmp/splash-disk-soak-XXXXXX");
        assert_non_null(mkdtemp(disk_dir));
    }
    engine_start(&t, file, SPLASH_KV_INT8,
                 weights + states + (disk ? 6 : 20) * one_state + 3000 * per_token, 4096, 4);
    enum { PREFIXES = 5, REQUESTS = 200, BATCH = 8 };
    static int32_t prefix[PREFIXES][256];
    int32_t prompt[1024];
    uint64_t rng = 99;
    for (int p = 0; p < PREFIXES; p++) {
        for (int i = 0; i < 255; i++)
            prefix[p][i] = (int32_t)(test_splitmix64(&rng) % 400) + 20;
        prefix[p][255] = reuse;
    }
    uint64_t rss0 = 0;
    int64_t hits = 0;
    for (int sent = 0; sent < REQUESTS; sent += BATCH) {
        for (int b = 0; b < BATCH; b++) {
            int p = (int)(test_splitmix64(&rng) % PREFIXES);
            /* part of a system turn, or all of it, then a user turn */
            int n = test_splitmix64(&rng) % 2 ? 256 : 64 + (int)(test_splitmix64(&rng) % 192);
            memcpy(prompt, prefix[p], (size_t)n * sizeof *prompt);
            int extra = 10 + (int)(test_splitmix64(&rng) % 90);
            for (int i = 0; i < extra; i++)
                prompt[n++] = (int32_t)(test_splitmix64(&rng) % 400) + 20;
            prompt[n++] = reuse;
            prompt[n++] = 5;
            submit(&t, 1000 + (uint64_t)(sent + b), prompt, n, 2, reuse, 0);
        }
        struct test_result res[BATCH];
        collect(&t, 1000 + (uint64_t)sent, BATCH, res);
        for (int b = 0; b < BATCH; b++) {
            if (!res[b].done)
                fail_msg("soak request %d: %s", sent + b, res[b].code);
            hits += res[b].cached > 0;
        }
        if (sent == 3 * BATCH)
            rss0 = rss_bytes(); /* buffers and the first points are in */
    }
    json_t *st = engine_status(&t);
    json_t *pc = json_object_get(st, "prefix_cache");
    uint64_t limit = (uint64_t)json_integer_value(json_object_get(pc, "bytes_limit"));
    assert_true((uint64_t)json_integer_value(json_object_get(pc, "bytes_peak")) <= limit);
    assert_true(json_integer_value(json_object_get(pc, "evicted")) > 0);
    uint64_t rss1 = rss_bytes();
    if (rss1 > rss0 + limit + (8u << 20))
        fail_msg("RSS grew from %.1f to %.1f MiB over a plan of %.1f MiB for caches",
                 (double)rss0 / 1048576.0, (double)rss1 / 1048576.0, (double)limit / 1048576.0);
    /* most of the half that take a whole system turn (with the SSD tier, memory holds
     * fewer points and a point whose write is under way serves no one: fewer, as the
     * machine's load has it) */
    assert_true(hits > (disk ? REQUESTS / 8 : REQUESTS / 4));
    if (disk) {
        json_t *d = json_object_get(pc, "disk");
        json_t *pages = json_object_get(d, "pages");
        fprintf(stderr, "  with the SSD tier: %lld of %d requests hit; %lld writes, %lld hits "
                "back, %lld corrupt; %lld "
                "pages (%lld shared references), %lld of %lld bytes; RSS %.1f -> %.1f MiB over "
                "a plan of %.1f MiB\n",
                (long long)hits, REQUESTS, (long long)json_integer_value(json_object_get(d, "writes")),
                (long long)json_integer_value(json_object_get(d, "hits")),
                (long long)json_integer_value(json_object_get(d, "corrupt")),
                (long long)json_integer_value(json_object_get(pages, "count")),
                (long long)json_integer_value(json_object_get(pages, "shared")),
                (long long)json_integer_value(json_object_get(d, "used_bytes")),
                (long long)json_integer_value(json_object_get(d, "capacity_bytes")),
                (double)rss0 / 1048576.0, (double)rss1 / 1048576.0, (double)limit / 1048576.0);
        assert_true(json_integer_value(json_object_get(d, "writes")) > 0);
        assert_true(json_integer_value(json_object_get(d, "hits")) > 0);
        assert_int_equal(json_integer_value(json_object_get(d, "corrupt")), 0);
        assert_true(json_integer_value(json_object_get(d, "used_bytes")) <=
                    json_integer_value(json_object_get(d, "capacity_bytes")));
    }
    json_decref(st);
    test_engine_stop(&t);
    if (disk) {
        assert_int_equal(rmdir(disk_dir), 0);
        disk_quota = 0;
        disk_dir[0] = 0;
    }
}

static void test_engine_soak_within_plan(void **state)
{
    (void)state;
    soak_case(0);
}

/* The same soak with the SSD tier on and a small quota: points go to the disk as chains
 * of pages and come back; memory stays within the plan. */
static void test_engine_soak_with_disk_tier(void **state)
{
    (void)state;
    soak_case(1);
}

/* ---- the SSD tier ---------------------------------------------------------------------- */

static void test_disk_cache_checks(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-disk-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct splash_disk_opts o = {.dir = dir, .quota = 3 * 4096};
    struct splash_disk_cache *d;
    char why[256];
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_non_null(d);
    int32_t t[100];
    for (int i = 0; i < 100; i++)
        t[i] = 1000 + i;
    char blob[3000], other[3000];
    memset(blob, 7, sizeof blob);
    memset(other, 9, sizeof other);
    assert_int_equal(splash_disk_cache_put(d, t, 40, SPLASH_POINT_TURN, blob, sizeof blob), 1);
    assert_int_equal(splash_disk_cache_put(d, t, 60, SPLASH_POINT_CHUNK, other, sizeof other), 1);
    /* the deepest entry along a prompt, as accept takes it */
    assert_int_equal(splash_disk_cache_peek(d, t, 100, NULL, NULL), 60);
    assert_int_equal(splash_disk_cache_peek(d, t, 50, NULL, NULL), 40);
    assert_int_equal(splash_disk_cache_peek(d, t, 100, accept_even, NULL), 60);
    t[50] = 1;
    assert_int_equal(splash_disk_cache_peek(d, t, 100, NULL, NULL), 40);
    t[50] = 1050;
    uint64_t size;
    int cls;
    char *got = splash_disk_cache_get(d, t, 40, &size, &cls);
    assert_non_null(got);
    assert_int_equal(size, sizeof blob);
    assert_int_equal(cls, SPLASH_POINT_TURN);
    assert_memory_equal(got, blob, sizeof blob);
    free(got);
    /* a garbled byte: skipped, dropped, counted */
    int64_t off = splash_disk_cache_offset(d, t, 60);
    assert_true(off >= 0);
    assert_int_equal(pwrite(splash_disk_cache_fd(d), "X", 1, off + 1000), 1);
    assert_null(splash_disk_cache_get(d, t, 60, &size, &cls));
    assert_int_equal(splash_disk_cache_peek(d, t, 100, NULL, NULL), 40);
    /* a file cut short: the entry past its end is skipped too */
    off = splash_disk_cache_offset(d, t, 40);
    assert_int_equal(ftruncate(splash_disk_cache_fd(d), off + 100), 0);
    assert_null(splash_disk_cache_get(d, t, 40, &size, &cls));
    struct splash_disk_stats st;
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.corrupt, 2);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.used, 0);
    /* the quota: entries make room for new ones, the oldest checkpoint first, and one
     * larger than the quota is refused */
    for (int k = 0; k < 6; k++)
        assert_int_equal(splash_disk_cache_put(d, t, 10 + k, k % 2, blob, sizeof blob), 1);
    splash_disk_cache_stats(d, &st);
    assert_true(st.used <= st.quota);
    assert_true(st.entries >= 2);
    assert_int_equal(splash_disk_cache_peek(d, t, 100, NULL, NULL), 15); /* the newest stays */
    char big[5 * 4096];
    memset(big, 1, sizeof big);
    assert_int_equal(splash_disk_cache_put(d, t, 90, 1, big, sizeof big), 0);
    splash_disk_cache_close(d);
    /* a write budget: a quarter of a day's bytes at once */
    o.quota = 1 << 20;
    o.writes_per_day = 4 * 8000;
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_int_equal(splash_disk_cache_put(d, t, 10, 1, blob, sizeof blob), 1);
    assert_int_equal(splash_disk_cache_put(d, t, 11, 1, blob, sizeof blob), 1);
    assert_int_equal(splash_disk_cache_put(d, t, 12, 1, blob, sizeof blob), 0);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.refused_budget, 1);
    splash_disk_cache_close(d);
    /* 0: off */
    o.quota = 0;
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_null(d);
    assert_int_equal(rmdir(dir), 0); /* the file was never named there */
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw);

/* Synthetic KV pages for the SSD tier's chains: page i of a point is a function of the
 * tokens up to its end (as a family's pages are), so points that begin alike have the
 * same pages. */
#define T_PAGE_TOKENS 4
#define T_PAGE_BYTES 256

static void synthetic_pages(const int32_t *tokens, int64_t n_pages, unsigned char *out)
{
    uint32_t h = 2166136261u;
    for (int64_t i = 0; i < n_pages; i++) {
        for (int k = 0; k < T_PAGE_TOKENS; k++)
            h = (h ^ (uint32_t)tokens[i * T_PAGE_TOKENS + k]) * 16777619u;
        for (int b = 0; b < T_PAGE_BYTES; b++)
            out[i * T_PAGE_BYTES + b] = (unsigned char)((h >> (b % 24)) + (unsigned)b);
    }
}

/* Puts the point at tokens[0..n) with its whole pages and a rest of rest_size bytes of
 * fill. */
static int put_chain(struct splash_disk_cache *d, const int32_t *tokens, int32_t n, int cls,
                     uint64_t rest_size, int fill)
{
    int64_t n_pages = n / T_PAGE_TOKENS;
    unsigned char *pages = malloc((size_t)(n_pages ? n_pages : 1) * T_PAGE_BYTES);
    unsigned char *rest = malloc(rest_size);
    assert_non_null(pages);
    assert_non_null(rest);
    synthetic_pages(tokens, n_pages, pages);
    memset(rest, fill, rest_size);
    int ok = splash_disk_cache_put_pages(d, tokens, n, cls, pages, n_pages, rest, rest_size);
    free(pages);
    free(rest);
    return ok;
}

/* 1 when the point at tokens[0..n) reads back with the pages and rest put_chain wrote. */
static int reads_back(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                      uint64_t rest_size, int fill)
{
    int64_t n_pages = -1;
    uint64_t size = 0;
    int cls;
    unsigned char *got = splash_disk_cache_get_parts(d, tokens, n, &n_pages, &size, &cls);
    if (!got)
        return 0;
    int64_t want = n / T_PAGE_TOKENS;
    unsigned char *pages = malloc((size_t)(want ? want : 1) * T_PAGE_BYTES);
    synthetic_pages(tokens, want, pages);
    int ok = n_pages == want && size == rest_size &&
             !memcmp(got, pages, (size_t)want * T_PAGE_BYTES);
    for (uint64_t i = 0; ok && i < rest_size; i++)
        ok = got[want * T_PAGE_BYTES + i] == (unsigned char)fill;
    free(pages);
    free(got);
    return ok;
}

static uint64_t slot_bytes(void)
{
    return 32 + T_PAGE_TOKENS * sizeof(int32_t) + T_PAGE_BYTES;
}

static uint64_t state_span(int32_t n, uint64_t rest)
{
    return 32 + (uint64_t)n * sizeof(int32_t) + rest;
}

/* server.md "SSD cache": a point is a chain of whole KV pages plus a state; points that
 * share a prefix share its pages on the disk, a page lives while a point holds it, the
 * quota counts both files, and a damaged shared page drops every point holding it. */
static void test_disk_cache_shared_pages(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-disk-pages-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* a: 20 tokens (5 pages), b: its first 12 (3 pages) then its own 6 (1 page and 2) */
    int32_t a[20], b[18], c[8];
    for (int i = 0; i < 20; i++)
        a[i] = 100 + i;
    for (int i = 0; i < 18; i++)
        b[i] = i < 12 ? a[i] : 900 + i;
    for (int i = 0; i < 8; i++)
        c[i] = 5000 + i;
    const uint64_t R = 100;
    uint64_t both = 6 * slot_bytes() + state_span(20, R) + state_span(18, R);
    struct splash_disk_opts o = {.dir = dir, .quota = (int64_t)(both + 400),
                                 .page_bytes = T_PAGE_BYTES, .page_tokens = T_PAGE_TOKENS};
    struct splash_disk_cache *d;
    char why[256];
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_non_null(d);
    assert_int_equal(put_chain(d, a, 20, SPLASH_POINT_TURN, R, 1), 1);
    assert_int_equal(put_chain(d, b, 18, SPLASH_POINT_TURN, R, 2), 1);
    struct splash_disk_stats st;
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.pages, 6); /* 3 shared + 2 of a's + 1 of b's, not 9 */
    assert_int_equal(st.pages_shared, 3);
    assert_int_equal(st.pages_bytes, 6 * slot_bytes());
    assert_int_equal(st.states, 2);
    assert_int_equal(st.used, both); /* the quota counts both files */
    assert_true(reads_back(d, a, 20, R, 1));
    assert_true(reads_back(d, b, 18, R, 2));
    json_t *js = splash_disk_cache_status(d, NULL);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(js, "pages"), "shared")),
                     3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(js, "states"), "count")),
                     2);
    json_decref(js);
    /* c needs room: the oldest point (a, read before b) goes whole, with the pages only it
     * held; the pages b shares stay for b */
    assert_true(reads_back(d, b, 18, R, 2)); /* b used last */
    assert_int_equal(put_chain(d, c, 8, SPLASH_POINT_TURN, R, 3), 1);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(splash_disk_cache_peek(d, a, 20, NULL, NULL), 0);
    assert_int_equal(st.pages, 4 + 2);
    assert_true(st.used <= st.quota);
    assert_int_equal(st.used, st.pages_bytes + st.states_bytes);
    assert_true(reads_back(d, b, 18, R, 2));
    assert_true(reads_back(d, c, 8, R, 3));
    /* a again: its shared pages are found (b holds them), its own two written anew */
    assert_int_equal(put_chain(d, c, 8, SPLASH_POINT_CHUNK, R, 3), 1); /* there already */
    splash_disk_cache_close(d);

    /* a damaged page both points hold: both are dropped, nothing of them is read */
    o.quota = 1 << 20;
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_int_equal(put_chain(d, a, 20, SPLASH_POINT_TURN, R, 1), 1);
    assert_int_equal(put_chain(d, b, 18, SPLASH_POINT_TURN, R, 2), 1);
    assert_int_equal(put_chain(d, c, 8, SPLASH_POINT_TURN, R, 3), 1);
    int64_t off = splash_disk_cache_page_offset(d, b, 18, 1);
    assert_true(off >= 0);
    assert_int_equal(splash_disk_cache_page_offset(d, a, 20, 1), off); /* one copy */
    assert_int_equal(pwrite(splash_disk_cache_pages_fd(d), "X", 1, off + 100), 1);
    assert_false(reads_back(d, b, 18, R, 2));
    assert_int_equal(splash_disk_cache_peek(d, a, 20, NULL, NULL), 0);
    assert_int_equal(splash_disk_cache_peek(d, b, 18, NULL, NULL), 0);
    uint64_t size;
    int cls;
    assert_null(splash_disk_cache_get(d, a, 20, &size, &cls));
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.corrupt, 1);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.pages, 2); /* c's */
    assert_true(reads_back(d, c, 8, R, 3));
    /* the damaged slot is free again: a new chain takes it and reads back right */
    assert_int_equal(put_chain(d, a, 20, SPLASH_POINT_TURN, R, 1), 1);
    assert_true(reads_back(d, a, 20, R, 1));
    /* a point shorter than a page: an empty chain, its state alone */
    assert_int_equal(put_chain(d, c, 3, SPLASH_POINT_CHUNK, R, 4), 1);
    assert_true(reads_back(d, c, 3, R, 4));
    /* a page count the tokens do not fill is refused */
    unsigned char pg[3 * T_PAGE_BYTES] = {0}, rest[8] = {0};
    assert_int_equal(splash_disk_cache_put_pages(d, b, 8, 1, pg, 3, rest, sizeof rest), 0);
    splash_disk_cache_close(d);
    assert_int_equal(rmdir(dir), 0); /* the files were never named there */
}

struct failing {
    int64_t fail_at; /* the page whose produce fails */
    unsigned char pages[5 * T_PAGE_BYTES];
    int done, ok;
};

static int failing_page(void *ctx, int64_t page,
                        int (*write)(void *wctx, const void *bytes, size_t n), void *wctx)
{
    struct failing *f = ctx;
    if (page == f->fail_at)
        return 1;
    return write(wctx, f->pages + page * T_PAGE_BYTES, T_PAGE_BYTES);
}

static int small_rest(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                      void *wctx)
{
    (void)ctx;
    static const char rest[16] = "the rest";
    return write(wctx, rest, sizeof rest);
}

static void failing_done(void *ctx, int ok)
{
    struct failing *f = ctx;
    f->done = 1;
    f->ok = ok;
}

/* A write that fails on a page a later point counts on: both points go, and no page is
 * left that nothing wrote. */
static void test_disk_cache_failed_page_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-disk-fail-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct splash_disk_opts o = {.dir = dir, .quota = 1 << 20, .page_bytes = T_PAGE_BYTES,
                                 .page_tokens = T_PAGE_TOKENS};
    struct splash_disk_cache *d;
    char why[256];
    /* 100 ms a piece: b is queued while a's pages are still being written */
    setenv("SPLASH_TEST_SLOW_DISK_WRITES", "100", 1);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    unsetenv("SPLASH_TEST_SLOW_DISK_WRITES");
    int32_t a[20], b[16];
    for (int i = 0; i < 20; i++)
        a[i] = 300 + i;
    for (int i = 0; i < 16; i++)
        b[i] = i < 12 ? a[i] : 77;
    struct failing fa = {.fail_at = 2}, fb = {.fail_at = -1};
    synthetic_pages(a, 5, fa.pages);
    synthetic_pages(b, 4, fb.pages);
    struct splash_disk_parts pa = {.n_pages = 5, .page = failing_page, .rest_size = 16,
                                   .rest = small_rest, .ctx = &fa};
    struct splash_disk_parts pb = {.n_pages = 4, .page = failing_page, .rest_size = 16,
                                   .rest = small_rest, .ctx = &fb};
    assert_int_equal(splash_disk_cache_put_parts_async(d, a, 20, 1, &pa, failing_done, &fa, 0),
                     1);
    assert_int_equal(splash_disk_cache_put_parts_async(d, b, 16, 1, &pb, failing_done, &fb, 0),
                     1);
    assert_true(splash_disk_cache_wait(d, 30, 0));
    assert_true(fa.done && fb.done);
    assert_false(fa.ok);
    assert_false(fb.ok); /* its pages 0-2 were a's to write */
    struct splash_disk_stats st;
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.pages, 0);
    assert_int_equal(st.used, 0);
    assert_int_equal(splash_disk_cache_peek(d, b, 16, NULL, NULL), 0);
    /* written again whole, it reads back */
    fb.fail_at = -1;
    fb.done = 0;
    assert_int_equal(splash_disk_cache_put_parts_async(d, b, 16, 1, &pb, failing_done, &fb, 0),
                     1);
    assert_true(splash_disk_cache_wait(d, 30, 0));
    assert_true(fb.ok);
    int64_t n_pages;
    uint64_t size;
    int cls;
    unsigned char *got = splash_disk_cache_get_parts(d, b, 16, &n_pages, &size, &cls);
    assert_non_null(got);
    assert_int_equal(n_pages, 4);
    assert_memory_equal(got, fb.pages, 4 * T_PAGE_BYTES);
    assert_string_equal((char *)got + 4 * T_PAGE_BYTES, "the rest");
    free(got);
    /* a point already there is not queued again, and its pages keep their references */
    assert_int_equal(splash_disk_cache_put_parts_async(d, b, 16, 1, &pb, failing_done, &fb, 0),
                     0);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.pages, 4);
    assert_int_equal(st.entries, 1);
    got = splash_disk_cache_get_parts(d, b, 16, &n_pages, &size, &cls);
    assert_non_null(got);
    free(got);
    splash_disk_cache_close(d);
    assert_int_equal(rmdir(dir), 0);
}

/* A persistent tier's pages and states files as a crash or a bad disk may leave them: a
 * point is taken back only when its whole chain is; a pages file cut short by a page
 * loses the points that need it, a garbled state loses that point alone. */
static void test_disk_cache_persistent_chains(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-disk-chains-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct splash_disk_opts o = {.quota = 1 << 20, .persist_dir = dir,
                                 .page_bytes = T_PAGE_BYTES, .page_tokens = T_PAGE_TOKENS};
    struct splash_disk_cache *d;
    char why[256];
    int32_t a[20], b[18], c[8], e[14];
    for (int i = 0; i < 20; i++)
        a[i] = 100 + i;
    for (int i = 0; i < 18; i++)
        b[i] = i < 12 ? a[i] : 900 + i;
    for (int i = 0; i < 8; i++)
        c[i] = 5000 + i;
    for (int i = 0; i < 14; i++)
        e[i] = i < 8 ? a[i] : 700 + i;
    const uint64_t R = 100;
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_int_equal(put_chain(d, a, 20, 1, R, 1), 1); /* slots 0-4 */
    assert_int_equal(put_chain(d, b, 18, 1, R, 2), 1); /* slot 5 */
    assert_int_equal(put_chain(d, e, 14, 1, R, 5), 1); /* slot 6 */
    assert_int_equal(put_chain(d, c, 8, 1, R, 3), 1);  /* slots 7, 8 */
    int64_t off_e = splash_disk_cache_offset(d, e, 14);
    splash_disk_cache_close(d); /* as a kill leaves them: no flush beyond each write's own */
    char path[96];
    snprintf(path, sizeof path, "%s/pages", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((uint64_t)sb.st_size, 9 * slot_bytes());
    /* the pages file one page short (c's last), e's state garbled in a token */
    assert_int_equal(truncate(path, (off_t)(8 * slot_bytes())), 0);
    snprintf(path, sizeof path, "%s/states", dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "\x7f", 1, off_e + 40), 1);
    close(fd);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    struct splash_disk_stats st;
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.taken_back, 2); /* a and b */
    assert_int_equal(st.pages, 6);      /* c's and e's own let go */
    assert_int_equal(splash_disk_cache_peek(d, c, 8, NULL, NULL), 0);
    assert_int_equal(splash_disk_cache_peek(d, e, 14, NULL, NULL), 0);
    assert_true(reads_back(d, a, 20, R, 1));
    assert_true(reads_back(d, b, 18, R, 2));
    /* e again: the pages a holds serve it, its own is written */
    assert_int_equal(put_chain(d, e, 14, 1, R, 5), 1);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.pages, 7);
    assert_int_equal(st.pages_shared, 2);
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    /* a page garbled in its bytes: seen when read, every point holding it dropped */
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.taken_back, 3);
    int64_t off = splash_disk_cache_page_offset(d, e, 14, 0);
    assert_true(off >= 0);
    assert_int_equal(pwrite(splash_disk_cache_pages_fd(d), "X", 1, off + 200), 1);
    assert_false(reads_back(d, e, 14, R, 5));
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.entries, 0); /* a, b and e all begin with that page */
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.taken_back, 0);
    assert_int_equal(st.pages, 0);
    splash_disk_cache_close(d);
    assert_int_equal(nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

/* A persistent tier's files as a crash or a bad disk may leave them: the next open takes
 * back the entries that read back as written and skips the others, each with a line. */
static void test_disk_cache_persistent_leftovers(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-disk-persist-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct splash_disk_opts o = {.quota = 1 << 20, .persist_dir = dir};
    struct splash_disk_cache *d;
    char why[256];
    int32_t t[64];
    for (int i = 0; i < 64; i++)
        t[i] = 500 + i;
    char blob[2000];
    memset(blob, 3, sizeof blob);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    for (int k = 0; k < 4; k++)
        assert_int_equal(splash_disk_cache_put(d, t, 10 * (k + 1), 1, blob, sizeof blob), 1);
    int64_t off20 = splash_disk_cache_offset(d, t, 20), off30 = splash_disk_cache_offset(d, t, 30),
            off40 = splash_disk_cache_offset(d, t, 40);
    splash_disk_cache_close(d); /* as a kill leaves them: no flush beyond each write's own */
    char data[96];
    snprintf(data, sizeof data, "%s/states", dir);
    int fd = open(data, O_RDWR);
    assert_true(fd >= 0);
    /* a garbled token (seen at the open), a garbled byte of an entry's bytes (seen when
     * read), and the last entry cut short (a write the crash interrupted) */
    assert_int_equal(pwrite(fd, "\x7f", 1, off20 + 48), 1);
    assert_int_equal(pwrite(fd, "\x7f", 1, off30 + 1500), 1);
    assert_int_equal(ftruncate(fd, off40 + 100), 0);
    close(fd);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    struct splash_disk_stats st;
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.taken_back, 2); /* 10 and 30 */
    assert_int_equal(splash_disk_cache_peek(d, t, 64, NULL, NULL), 30);
    uint64_t size;
    int cls;
    assert_null(splash_disk_cache_get(d, t, 30, &size, &cls)); /* its bytes fail */
    char *got = splash_disk_cache_get(d, t, 10, &size, &cls);
    assert_non_null(got);
    assert_memory_equal(got, blob, sizeof blob);
    free(got);
    /* the place of what was skipped takes new entries */
    assert_int_equal(splash_disk_cache_put(d, t, 50, 1, blob, sizeof blob), 1);
    splash_disk_cache_probation_passed(d); /* a clean stop (test_persistent_probation) */
    splash_disk_cache_close(d);
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    splash_disk_cache_stats(d, &st);
    assert_int_equal(st.taken_back, 2); /* 10 and 50 */
    assert_int_equal(splash_disk_cache_peek(d, t, 64, NULL, NULL), 50);
    splash_disk_cache_close(d);
    assert_int_equal(nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

/* A file of n bytes at root/name/file, last modified days ago. */
static void aged_file(const char *root, const char *name, const char *file, int days)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, name);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%s", root, name, file);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "cached bytes", 12), 12);
    close(fd);
    struct timespec t[2] = {{time(NULL) - (time_t)days * 86400, 0},
                            {time(NULL) - (time_t)days * 86400, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
    snprintf(path, sizeof path, "%s/%s", root, name);
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static int exists(const char *root, const char *name)
{
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", root, name);
    return stat(path, &sb) == 0;
}

/* The 14-day sweep: a namespace nobody used for 14 days goes; a recent one, one an
 * engine holds, and anything not named as a namespace stay. */
static void test_namespace_sweep(void **state)
{
    (void)state;
    char root[] = "/tmp/splash-sweep-XXXXXX";
    assert_non_null(mkdtemp(root));
    const char *old = "0123456789abcdef0123456789abcdef", *recent = "fedcba9876543210fedcba9876543210",
               *held = "00000000000000000000000000000000", *other = "not-a-namespace";
    aged_file(root, old, "data", 15);
    aged_file(root, old, "index", 20);
    aged_file(root, old, "lock", 15);
    aged_file(root, recent, "data", 15);
    aged_file(root, recent, "lock", 2); /* opened two days ago */
    aged_file(root, held, "lock", 30);
    aged_file(root, other, "data", 100);
    char lock[512];
    snprintf(lock, sizeof lock, "%s/%s/lock", root, held);
    int fd = open(lock, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    uint64_t bytes = 0;
    assert_int_equal(splash_cache_namespace_sweep(root, SPLASH_CACHE_UNUSED_DAYS * 86400.0,
                                                  time(NULL), &bytes), 1);
    assert_true(bytes >= 36);
    assert_false(exists(root, old));
    assert_true(exists(root, recent));
    assert_true(exists(root, held));
    assert_true(exists(root, other));
    close(fd); /* let go: the held one goes at the next sweep */
    assert_int_equal(splash_cache_namespace_sweep(root, SPLASH_CACHE_UNUSED_DAYS * 86400.0,
                                                  time(NULL), &bytes), 1);
    assert_false(exists(root, held));
    /* opening a namespace marks it used now */
    char model[600], dir[1024], why[256];
    snprintf(model, sizeof model, "%s/%s/data", root, other);
    int lock_fd = -1;
    assert_int_equal(splash_cache_namespace_open(root, model, "layout", 0, dir, sizeof dir,
                                                 &lock_fd, why, sizeof why), 0);
    close(lock_fd);
    const char *name = strrchr(dir, '/') + 1;
    aged_file(root, name, "lock", 20); /* as an engine left it 20 days ago */
    assert_int_equal(splash_cache_namespace_open(root, model, "layout", 0, dir, sizeof dir,
                                                 &lock_fd, why, sizeof why), 0);
    close(lock_fd);
    assert_int_equal(splash_cache_namespace_sweep(root, SPLASH_CACHE_UNUSED_DAYS * 86400.0,
                                                  time(NULL), &bytes), 0);
    /* a root that does not exist is left so */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing", root);
    assert_int_equal(splash_cache_namespace_sweep(missing, 0, time(NULL), &bytes), 0);
    assert_false(exists(root, "missing"));
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

/* A namespace's data file of `bytes` bytes written (so its blocks count), modified days
 * ago, and a lock file of the same age. */
static void sized_namespace(const char *root, const char *name, size_t bytes, int days)
{
    aged_file(root, name, "lock", days);
    char path[512];
    snprintf(path, sizeof path, "%s/%s/data", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char *buf = malloc(bytes);
    memset(buf, 0x33, bytes);
    assert_int_equal(write(fd, buf, bytes), (ssize_t)bytes);
    free(buf);
    close(fd);
    struct timespec t[2] = {{time(NULL) - (time_t)days * 86400, 0},
                            {time(NULL) - (time_t)days * 86400, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
    snprintf(path, sizeof path, "%s/%s", root, name);
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* server.md "Persistent cache": one quota bounds the whole root; other models' caches
 * nobody holds count against it and are removed, the least recently used first, before
 * this cache gives up a copy of its own; one an engine holds, and what is not named as a
 * namespace, stay. */
static void test_persistent_quota_removes_others(void **state)
{
    (void)state;
    char root[] = "/tmp/splash-root-quota-XXXXXX";
    assert_non_null(mkdtemp(root));
    const char *older = "0123456789abcdef0123456789abcdef",
               *newer = "fedcba9876543210fedcba9876543210",
               *held = "00000000000000000000000000000000",
               *self = "11111111111111111111111111111111";
    const size_t mib = 1 << 20;
    sized_namespace(root, older, mib, 3);
    sized_namespace(root, newer, mib, 1);
    sized_namespace(root, held, 2 * mib, 5);
    aged_file(root, "not-a-namespace", "data", 9);
    char lock[512], ns[512], why[256];
    snprintf(lock, sizeof lock, "%s/%s/lock", root, held);
    int fd = open(lock, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    snprintf(ns, sizeof ns, "%s/%s", root, self);
    assert_int_equal(mkdir(ns, 0700), 0);
    /* room for three and a half MiB: the two others nobody holds and this cache's first
     * entry fit, the second makes the older go, the third the newer */
    struct splash_disk_opts o = {.quota = 7 * mib / 2, .persist_dir = ns};
    struct splash_disk_cache *d;
    assert_int_equal(splash_disk_cache_open(&o, &d, why, sizeof why), SPLASH_OK);
    assert_non_null(d);
    json_t *st = splash_disk_cache_status(d, NULL);
    int64_t others = json_integer_value(json_object_get(st, "other_caches_bytes"));
    json_decref(st);
    assert_true(others >= (int64_t)(2 * mib) && others < (int64_t)(2 * mib + 64 * 1024));
    int32_t t[64];
    for (int i = 0; i < 64; i++)
        t[i] = 700 + i;
    char *blob = malloc(mib);
    memset(blob, 5, mib);
    assert_int_equal(splash_disk_cache_put(d, t, 10, 1, blob, mib), 1);
    assert_true(exists(root, older) && exists(root, newer));
    assert_int_equal(splash_disk_cache_put(d, t, 20, 1, blob, mib), 1);
    assert_false(exists(root, older));
    assert_true(exists(root, newer));
    assert_int_equal(splash_disk_cache_put(d, t, 30, 1, blob, mib), 1);
    assert_false(exists(root, newer));
    /* every copy of its own is still there; the held cache and the rest stay */
    assert_int_equal(splash_disk_cache_peek(d, t, 64, NULL, NULL), 30);
    struct splash_disk_stats ds;
    splash_disk_cache_stats(d, &ds);
    assert_int_equal(ds.entries, 3);
    assert_true(exists(root, held));
    assert_true(exists(root, "not-a-namespace"));
    splash_disk_cache_close(d);
    free(blob);
    close(fd);
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static uint64_t taken_back(const struct splash_disk_opts *o, struct splash_disk_cache **d)
{
    char why[256];
    assert_int_equal(splash_disk_cache_open(o, d, why, sizeof why), SPLASH_OK);
    assert_non_null(*d);
    struct splash_disk_stats st;
    splash_disk_cache_stats(*d, &st);
    return st.taken_back;
}

/* server.md "Persistent cache": every start serves its first minute on probation; after
 * two starts in a row fail within it (a close never marked passed is such a crash), or
 * one whose engine reports its own failure, the next start begins empty. */
static void test_persistent_probation(void **state)
{
    (void)state;
    char dir[] = "/tmp/splash-probation-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct splash_disk_opts o = {.quota = 1 << 20, .persist_dir = dir};
    struct splash_disk_cache *d;
    int32_t t[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    char blob[1000];
    memset(blob, 4, sizeof blob);
    assert_int_equal(taken_back(&o, &d), 0);
    assert_int_equal(splash_disk_cache_put(d, t, 8, 1, blob, sizeof blob), 1);
    splash_disk_cache_close(d); /* the first failed start */
    assert_int_equal(taken_back(&o, &d), 1);
    splash_disk_cache_close(d); /* the second, in a row */
    assert_int_equal(taken_back(&o, &d), 0);
    json_t *st = splash_disk_cache_status(d, NULL);
    assert_true(json_is_true(json_object_get(json_object_get(st, "probation"), "started_empty")));
    json_decref(st);
    /* a start that passes its minute starts the count anew */
    assert_int_equal(splash_disk_cache_put(d, t, 8, 1, blob, sizeof blob), 1);
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    assert_int_equal(taken_back(&o, &d), 1);
    splash_disk_cache_close(d); /* one failed start */
    assert_int_equal(taken_back(&o, &d), 1);
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    assert_int_equal(taken_back(&o, &d), 1);
    /* an engine that reports its own failure: the next start begins empty */
    splash_disk_cache_failed(d);
    splash_disk_cache_close(d);
    assert_int_equal(taken_back(&o, &d), 0);
    splash_disk_cache_probation_passed(d);
    splash_disk_cache_close(d);
    assert_int_equal(nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

/* The SSD tier's file, found among this process's descriptors (the engine runs here). */
/* The nth of the tier's files under disk_dir in opening order: 0 the states file, 1 the
 * pages file (unlinked, their links name no file to tell them apart by). */
static int disk_file_fd_nth(int nth)
{
    char link[64], target[512];
    for (int fd = 3; fd < 1024; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        if (!strncmp(target, disk_dir, strlen(disk_dir)) && !nth--)
            return fd;
    }
    return -1;
}


/* A restore point memory gives up goes to the SSD tier and comes back bit for bit: a
 * prompt resumed from it gives the cold engine's tokens and log-probabilities; a damaged
 * copy is skipped (the prompt is computed again, to the same bits). */
static void disk_case(const char *file, int kv, int damage)
{
    int32_t reuse = im_end_id(file);
    struct test_engine t;
    disk_quota = 0;
    engine_start(&t, file, kv, 0, 1024, 1);
    json_t *plan = json_object_get(t.ready, "plan");
    uint64_t weights = (uint64_t)json_integer_value(json_object_get(plan, "weights_bytes"));
    uint64_t states = (uint64_t)json_integer_value(json_object_get(plan, "state_bytes"));
    uint64_t per_token = (uint64_t)json_integer_value(json_object_get(plan, "kv_bytes")) /
                         (uint64_t)json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    int32_t a[1024], b[1024];
    static const int segs_a[] = {500, 3}, segs_b[] = {900, 3};
    int bounds[2];
    int na = conversation(a, segs_a, 2, reuse, 31, bounds);
    int nb = conversation(b, segs_b, 2, reuse, 32, bounds);
    struct test_result cold, hit, other;
    run_one(&t, 1, a, na, 8, reuse, 0.8, &cold);
    test_engine_stop(&t);

    /* room for 1,400 tokens of KV and two states: b's prompt does not fit beside a's
     * restore point at 501 */
    disk_quota = 64 << 20;
    strcpy(disk_dir, "/tmp/splash-disk-engine-XXXXXX");
    assert_non_null(mkdtemp(disk_dir));
    engine_start(&t, file, kv, weights + 2 * states + 1400 * per_token, 1024, 2);
    run_one(&t, 1, a, na, 8, reuse, 0.8, &hit);
    test_result_assert_same("first run", &hit, &cold, "cold");
    run_one(&t, 2, b, nb, 8, reuse, 0.8, &other);
    json_t *st = engine_status(&t);
    json_t *disk = json_object_get(json_object_get(st, "prefix_cache"), "disk");
    assert_true(json_is_true(json_object_get(disk, "enabled")));
    assert_true(json_integer_value(json_object_get(disk, "writes")) >= 1);
    /* the hybrid trunk saves in parts: the points went as chains of pages (or, as a
     * family without them, as whole blobs) */
    json_t *pages = json_object_get(disk, "pages");
    if (getenv("SPLASH_TEST_DISK_WHOLE"))
        assert_int_equal(json_integer_value(json_object_get(pages, "count")), 0);
    else
        assert_true(json_integer_value(json_object_get(pages, "count")) >= 1);
    assert_int_equal(json_integer_value(json_object_get(pages, "bytes")),
                     json_integer_value(json_object_get(pages, "count")) *
                         (32 + 4 * json_integer_value(json_object_get(pages, "page_tokens")) +
                          json_integer_value(json_object_get(pages, "page_bytes"))));
    json_decref(st);
    if (damage) {
        int fd = disk_file_fd_nth(damage - 1); /* 1: the states file, 2: the pages file */
        assert_true(fd >= 0);
        char junk[256];
        memset(junk, 0x5a, sizeof junk);
        assert_int_equal(pwrite(fd, junk, sizeof junk, 4096), (ssize_t)sizeof junk);
    }
    run_one(&t, 3, a, na, 8, reuse, 0.8, &hit);
    char label[160];
    snprintf(label, sizeof label, "%s kv %d, %s", file, kv,
             damage ? "a damaged SSD copy" : "from the SSD tier");
    test_result_assert_same(label, &hit, &cold, "cold");
    st = engine_status(&t);
    disk = json_object_get(json_object_get(st, "prefix_cache"), "disk");
    if (damage) {
        assert_int_equal(hit.cached, 0);
        assert_int_equal(json_integer_value(json_object_get(disk, "corrupt")), 1);
    } else {
        assert_int_equal(hit.cached, na - 3);
        assert_true(json_integer_value(json_object_get(disk, "hits")) >= 1);
    }
    json_decref(st);
    test_engine_stop(&t);
    assert_int_equal(rmdir(disk_dir), 0);
    disk_quota = 0;
    disk_dir[0] = 0;
}

static void test_engine_disk_tier_bit_identical(void **state)
{
    (void)state;
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 0);
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_BF16, 0);
    disk_case("models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_INT8, 0);
    disk_case("models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_BF16, 0);
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 1);
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 2);
    /* as a family without parts: whole blobs, empty chains */
    setenv("SPLASH_TEST_DISK_WHOLE", "1", 1);
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 0);
    disk_case("models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, 1);
    unsetenv("SPLASH_TEST_DISK_WHOLE");
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static json_t *disk_status(struct test_engine *t)
{
    json_t *st = engine_status(t);
    json_t *d = json_deep_copy(json_object_get(json_object_get(st, "prefix_cache"), "disk"));
    json_decref(st);
    return d;
}

/* --persistent-cache: a clean stop writes the restore points memory holds, and the next
 * engine of the same model takes them back, to the cold bits; another KV format is
 * another namespace; a damaged index is skipped; a second engine on a held namespace
 * uses a temporary file. */
static void test_engine_persistent_restart(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    char root[] = "/tmp/splash-persist-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    int32_t a[1024];
    static const int segs[] = {300, 200, 3};
    int bounds[2];
    int na = conversation(a, segs, 3, reuse, 41, bounds);
    struct test_result cold, hit;
    struct test_engine t, t2;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    run_one(&t, 1, a, na, 8, reuse, 0.7, &cold);
    test_engine_stop(&t);

    disk_quota = 64 << 20;
    persist_root = root;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    run_one(&t, 1, a, na, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, 0);
    /* a second engine while the first holds the namespace: a temporary file */
    engine_start(&t2, file, SPLASH_KV_INT8, 0, 1024, 2);
    json_t *d = disk_status(&t2);
    assert_true(json_is_true(json_object_get(d, "enabled")));
    assert_false(json_is_true(json_object_get(d, "persistent")));
    json_decref(d);
    test_engine_stop(&t2);
    test_engine_stop(&t); /* the clean stop writes its points */

    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    d = disk_status(&t);
    assert_true(json_is_true(json_object_get(d, "persistent")));
    assert_true(json_integer_value(json_object_get(d, "taken_back")) >= 2);
    json_decref(d);
    run_one(&t, 2, a, na, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, na - 3);
    test_result_assert_same("after a restart, from the persistent cache", &hit, &cold, "cold");
    test_engine_stop(&t);

    /* bf16 KV: another namespace, nothing of int8's is read */
    engine_start(&t, file, SPLASH_KV_BF16, 0, 1024, 2);
    run_one(&t, 3, a, na, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, 0);
    test_engine_stop(&t);

    /* a damaged index: skipped with a line, the cache starts empty, the answer the same */
    char path[512];
    DIR *dir = opendir(root);
    struct dirent *e;
    int damaged = 0;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/index", root, e->d_name);
        FILE *f = fopen(path, "r+b");
        if (!f)
            continue;
        fseek(f, 30, SEEK_SET);
        fputc(0x77, f);
        fputc(0x78, f);
        fclose(f);
        damaged++;
    }
    closedir(dir);
    assert_true(damaged >= 1);
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    run_one(&t, 4, a, na, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, 0);
    test_result_assert_same("a damaged index", &hit, &cold, "cold");
    test_engine_stop(&t);
    persist_root = NULL;
    disk_quota = 0;
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static double wall_now(void);

/* server.md "SSD cache": two conversations sharing a long system prompt write its KV pages
 * once (the second's chain finds them on the tier), and after a restart each resumes from
 * the persistent cache to the cold bits. */
static void test_engine_disk_shared_system_prompt(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    char root[] = "/tmp/splash-disk-shared-XXXXXX";
    assert_non_null(mkdtemp(root));
    int32_t a[1024], b[1024], tail[256];
    static const int segs[] = {600, 100, 3}, segs_tail[] = {100, 3};
    int bounds[2];
    int na = conversation(a, segs, 3, reuse, 61, bounds);
    int system = bounds[0]; /* the system prompt and its boundary token */
    memcpy(b, a, (size_t)system * sizeof *b);
    int nb = system + conversation(tail, segs_tail, 2, reuse, 62, bounds);
    memcpy(b + system, tail, (size_t)(nb - system) * sizeof *b);
    struct test_result cold_a, cold_b, hit;
    struct test_engine t;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    run_one(&t, 1, a, na, 8, reuse, 0.7, &cold_a);
    run_one(&t, 2, b, nb, 8, reuse, 0.7, &cold_b);
    test_engine_stop(&t);

    disk_quota = 64 << 20;
    persist_root = root; /* every turn point is copied ahead, at once */
    setenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS", "0", 1);
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    unsetenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    run_one(&t, 1, a, na, 8, reuse, 0.7, &hit);
    run_one(&t, 2, b, nb, 8, reuse, 0.7, &hit);
    double t0 = wall_now();
    json_t *d = NULL;
    for (;;) { /* a's two turn points and b's last copied */
        json_decref(d);
        d = disk_status(&t);
        if ((json_integer_value(json_object_get(d, "entries")) >= 3 &&
             !json_integer_value(json_object_get(d, "writes_in_flight"))) ||
            wall_now() - t0 > 60)
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    json_t *pages = json_object_get(d, "pages");
    int64_t P = json_integer_value(json_object_get(pages, "page_tokens"));
    int64_t count = json_integer_value(json_object_get(pages, "count"));
    int64_t shared = json_integer_value(json_object_get(pages, "shared"));
    fprintf(stderr, "  %lld points on disk: %lld pages of %lld tokens, %lld references shared\n",
            (long long)json_integer_value(json_object_get(d, "entries")), (long long)count,
            (long long)P, (long long)shared);
    assert_true(json_integer_value(json_object_get(d, "entries")) >= 3);
    assert_true(P > 0);
    /* the system prompt's pages are on the disk once: a's later point and b's hold them */
    assert_true(shared >= 2 * (system / P));
    assert_true(count <= (na + (nb - system)) / P + 1);
    json_decref(d);
    test_engine_stop(&t);

    /* a restart takes the chains back whole; each conversation resumes to the cold bits */
    engine_start(&t, file, SPLASH_KV_INT8, 0, 1024, 2);
    d = disk_status(&t);
    assert_true(json_integer_value(json_object_get(d, "taken_back")) >= 3);
    json_decref(d);
    run_one(&t, 3, b, nb, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, nb - 3);
    test_result_assert_same("b from shared pages after a restart", &hit, &cold_b, "cold");
    run_one(&t, 4, a, na, 8, reuse, 0.7, &hit);
    assert_int_equal(hit.cached, na - 3);
    test_result_assert_same("a from shared pages after a restart", &hit, &cold_a, "cold");
    test_engine_stop(&t);
    persist_root = NULL;
    disk_quota = 0;
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t cache_stat(struct test_engine *t, const char *key, int disk)
{
    json_t *st = engine_status(t);
    json_t *pc = json_object_get(st, "prefix_cache");
    int64_t v = json_integer_value(json_object_get(disk ? json_object_get(pc, "disk") : pc, key));
    json_decref(st);
    return v;
}

/* Write-ahead and the I/O thread, with writes made slow (a test hook: each piece of a
 * saved sequence takes 300 ms, some seconds a point): a turn point is copied to the SSD
 * tier in the background while a request runs beside the write, undelayed; once copied,
 * a request that needs its memory evicts it at once instead of waiting for a write; and
 * the copy reads back to the cold bits. */
static void test_engine_write_ahead_no_wait(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    struct test_engine t;
    disk_quota = 0;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 2048, 1);
    json_t *plan = json_object_get(t.ready, "plan");
    uint64_t weights = (uint64_t)json_integer_value(json_object_get(plan, "weights_bytes"));
    uint64_t states = (uint64_t)json_integer_value(json_object_get(plan, "state_bytes"));
    uint64_t per_token = (uint64_t)json_integer_value(json_object_get(plan, "kv_bytes")) /
                         (uint64_t)json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    int s_tokens = (int)(states / per_token);
    fprintf(stderr, "  a state: %d tokens of KV\n", s_tokens);
    assert_true(s_tokens < 1000);
    /* the pool holds two lanes' states and 1,300 tokens of KV beside a third state: a
     * short request fits beside a's point and its copy's fork; b only once a's point has
     * gone (its last 128 tokens past the room beside it, KV pages rounded up) */
    int32_t a[1024], b[2048], s_[64];
    int segs_a[] = {500, 3}, segs_b[] = {1300 + s_tokens - 504 + 128, 3}, segs_s[] = {40};
    int bounds[2];
    int na = conversation(a, segs_a, 2, reuse, 51, bounds);
    int nb = conversation(b, segs_b, 2, reuse, 52, bounds);
    int ns = conversation(s_, segs_s, 1, reuse, 53, bounds);
    assert_true(nb < 2048);
    struct test_result cold, hit, other;
    run_one(&t, 1, a, na, 8, reuse, 0.8, &cold);
    double t0 = wall_now();
    run_one(&t, 2, b, nb, 4, reuse, 0.0, &other);
    double b_cold = wall_now() - t0;
    test_engine_stop(&t);

    char root[] = "/tmp/splash-ahead-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    persist_root = root; /* the persistent cache writes every turn point ahead */
    disk_quota = 64 << 20;
    setenv("SPLASH_TEST_SLOW_DISK_WRITES", "300", 1);
    setenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS", "0", 1); /* test_engine_write_ahead_rules */
    engine_start(&t, file, SPLASH_KV_INT8, weights + 3 * states + 1300 * per_token, 2048, 2);
    unsetenv("SPLASH_TEST_SLOW_DISK_WRITES");
    unsetenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    run_one(&t, 1, a, na, 8, reuse, 0.8, &hit);
    test_result_assert_same("first run", &hit, &cold, "cold");
    /* a's turn point is being written: a request beside it is not held up */
    t0 = wall_now();
    run_one(&t, 2, s_, ns, 4, reuse, 0.0, &other);
    double beside = wall_now() - t0;
    assert_true(other.done);
    assert_true(cache_stat(&t, "writes_in_flight", 1) >= 1);
    t0 = wall_now();
    while (cache_stat(&t, "written_ahead", 0) < 1 && wall_now() - t0 < 60) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double write = wall_now() - t0 + beside;
    fprintf(stderr, "  a request beside the write: %.3f s; the write: %.3f s\n", beside, write);
    assert_true(cache_stat(&t, "written_ahead", 0) >= 1);
    assert_true(beside < write / 2);
    /* b needs the point's memory: it goes at once (its copy is there), making its room
     * without waiting on a write (its time against b's cold one is only printed: under
     * load the two prefills differ by more than the write) */
    int64_t evicted = cache_stat(&t, "evicted", 0);
    int64_t waits = cache_stat(&t, "room_waits", 0);
    t0 = wall_now();
    run_one(&t, 3, b, nb, 4, reuse, 0.0, &other);
    double b_time = wall_now() - t0;
    fprintf(stderr, "  a request that evicts the copied point: %.3f s (%.3f s cold)\n", b_time,
            b_cold);
    assert_true(other.done);
    assert_true(cache_stat(&t, "evicted", 0) > evicted);
    assert_int_equal(cache_stat(&t, "room_waits", 0), waits);
    /* and a resumes from the copy, to the cold bits, read back (3 s) while a request
     * already decoding goes on undelayed */
    submit(&t, 5, s_, ns, 40, reuse, 0.0);
    double l_start = 0, l_done = 0, a_done = 0;
    for (int left = 2; left > 0;) {
        struct splash_frame f;
        struct splash_err err;
        assert_int_equal(splash_frame_read(t.fd, &f, &err), SPLASH_OK);
        if (f.id == 5 && f.type == SPLASH_FRAME_TOKENS && !l_start) {
            l_start = wall_now();
            submit(&t, 4, a, na, 8, reuse, 0.8);
        } else if (f.type == SPLASH_FRAME_DONE || f.type == SPLASH_FRAME_ERROR) {
            assert_int_equal(f.type, SPLASH_FRAME_DONE);
            *(f.id == 5 ? &l_done : &a_done) = wall_now();
            left--;
        }
        splash_frame_free(&f);
    }
    fprintf(stderr, "  a request decoding while a prefix is read back: done %.3f s after, the "
            "read back %.3f s\n", l_done - l_start, a_done - l_start);
    assert_true(l_done < a_done);
    assert_true(l_done - l_start < 1.5);
    assert_true(a_done - l_start >= 3.0);
    /* the room the loaded point takes: b's copy ahead of need gives up at once, and
     * eviction's own writes after 2 s (it waited 20 s for them) */
    assert_true(a_done - l_start < 12.0);
    run_one(&t, 6, a, na, 8, reuse, 0.8, &hit);
    assert_true(hit.cached >= na - 3);
    test_result_assert_same("from the copy written ahead", &hit, &cold, "cold");
    test_engine_stop(&t);
    persist_root = NULL;
    disk_quota = 0;
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

/* The copies written ahead so far: those done, and those queued or under way. */
static int64_t ahead_copies(struct test_engine *t)
{
    return cache_stat(t, "written_ahead", 0) + cache_stat(t, "writing_ahead", 0);
}

/* Runs a request of max_tokens, asking for /status while it decodes: returns the most
 * copies written ahead any answer reported, and *answers how many came. */
static int64_t ahead_while_running(struct test_engine *t, uint64_t id, const int32_t *prompt,
                                   int n, int max_tokens, int32_t reuse, int *answers)
{
    submit(t, id, prompt, n, max_tokens, reuse, 0.0);
    int64_t most = 0;
    int asked = 0;
    *answers = 0;
    for (;;) {
        struct splash_frame f;
        struct splash_err err;
        assert_int_equal(splash_frame_read(t->fd, &f, &err), SPLASH_OK);
        if (f.type == SPLASH_FRAME_STATUS) {
            json_t *pc = json_object_get(f.body, "prefix_cache");
            int64_t k = json_integer_value(json_object_get(pc, "written_ahead")) +
                        json_integer_value(json_object_get(pc, "writing_ahead"));
            most = k > most ? k : most;
            asked = 0;
            (*answers)++;
        } else if (f.id == id && f.type == SPLASH_FRAME_TOKENS && !asked) {
            json_t *b = json_object();
            splash_frame_write(t->fd, SPLASH_FRAME_STATUS_REQ, 999999, b, &err);
            json_decref(b);
            asked = 1;
        }
        int end = f.id == id && (f.type == SPLASH_FRAME_DONE || f.type == SPLASH_FRAME_ERROR);
        if (end)
            assert_int_equal(f.type, SPLASH_FRAME_DONE);
        splash_frame_free(&f);
        if (end)
            break;
    }
    if (asked) { /* the last question's answer */
        for (;;) {
            struct splash_frame f;
            struct splash_err err;
            assert_int_equal(splash_frame_read(t->fd, &f, &err), SPLASH_OK);
            int st = f.type == SPLASH_FRAME_STATUS;
            splash_frame_free(&f);
            if (st)
                break;
        }
    }
    return most;
}

/* server.md "SSD cache": a point is copied ahead 10 s after its publication at the
 * earliest (here the test hook's 1.5 s); without the persistent cache only once its
 * request has ended, and only while a reclaim reached a point with no copy within the
 * last minute. */
static void test_engine_write_ahead_rules(void **state)
{
    (void)state;
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    int32_t reuse = im_end_id(file);
    struct test_engine t;
    int bounds[3];

    /* the publication delay (persistent: every turn point, due 1.5 s after it joined) */
    char root[] = "/tmp/splash-ahead-rules-XXXXXX";
    assert_non_null(mkdtemp(root));
    persist_root = root;
    disk_quota = 64 << 20;
    setenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS", "1500", 1);
    engine_start(&t, file, SPLASH_KV_INT8, 0, 2048, 1);
    unsetenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    int32_t a[1024];
    int segs_a[] = {500, 3};
    int na = conversation(a, segs_a, 2, reuse, 61, bounds);
    struct test_result res;
    double t0 = wall_now();
    run_one(&t, 1, a, na, 4, reuse, 0.0, &res);
    assert_int_equal(ahead_copies(&t), 0);
    while (cache_stat(&t, "written_ahead", 0) < 1 && wall_now() - t0 < 30) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double due = wall_now() - t0;
    fprintf(stderr, "  the turn point copied %.2f s after its request started (due at 1.5 s)\n",
            due);
    assert_int_equal(cache_stat(&t, "written_ahead", 0), 1);
    assert_true(due >= 1.5);
    test_engine_stop(&t);
    persist_root = NULL;
    assert_int_equal(nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);

    /* the SSD cache alone, no delay: the caches hold two states and 5,400 tokens of KV
     * (about 7,000 tokens' worth: a state is some 800 tokens of KV) */
    disk_quota = 0;
    engine_start(&t, file, SPLASH_KV_INT8, 0, 8192, 1);
    json_t *plan = json_object_get(t.ready, "plan");
    uint64_t weights = (uint64_t)json_integer_value(json_object_get(plan, "weights_bytes"));
    uint64_t states = (uint64_t)json_integer_value(json_object_get(plan, "state_bytes"));
    uint64_t per_token = (uint64_t)json_integer_value(json_object_get(plan, "kv_bytes")) /
                         (uint64_t)json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    test_engine_stop(&t);
    disk_quota = 64 << 20;
    strcpy(disk_dir, "/tmp/splash-ahead-rules-XXXXXX");
    assert_non_null(mkdtemp(disk_dir));
    setenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS", "0", 1);
    engine_start(&t, file, SPLASH_KV_INT8, weights + 2 * states + 5400 * per_token, 6144, 1);
    unsetenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    /* z: a turn point past 2,048 tokens; memory holds it (and two chunk points), z's
     * decode and a copy's fork without a reclaim */
    int32_t *z = malloc(4096 * sizeof *z), *x = malloc(4096 * sizeof *x);
    int segs_z[] = {2100, 100, 3}, segs_x[] = {2700, 3};
    int nz2 = conversation(z, segs_z, 3, reuse, 62, bounds);
    int32_t *z1 = malloc(4096 * sizeof *z1); /* z's first turn: its end, then an opening */
    memcpy(z1, z, (size_t)bounds[0] * sizeof *z1);
    memcpy(z1 + bounds[0], z + nz2 - 3, 3 * sizeof *z1);
    int nz1 = bounds[0] + 3;
    int nx = conversation(x, segs_x, 2, reuse, 63, bounds);
    int answers;
    int64_t most = ahead_while_running(&t, 2, z1, nz1, 200, reuse, &answers);
    struct timespec wait = {1, 0};
    nanosleep(&wait, NULL);
    fprintf(stderr, "  no reclaim yet: %lld copies ahead (%d answers while decoding), then %lld; "
            "%lld of %lld bytes used\n", (long long)most, answers, (long long)ahead_copies(&t),
            (long long)cache_stat(&t, "bytes_used", 0),
            (long long)cache_stat(&t, "bytes_limit", 0));
    assert_true(answers >= 2);
    assert_int_equal(most, 0);
    assert_int_equal(ahead_copies(&t), 0);
    /* x needs memory z's points hold: a reclaim reaches points with no copy; the points
     * whose requests ended (z's first turn's, x's) are copied ahead then */
    run_one(&t, 3, x, nx, 4, reuse, 0.0, &res);
    assert_true(cache_stat(&t, "writes", 1) >= 1);
    int64_t before = -1;
    t0 = wall_now();
    while ((ahead_copies(&t) != before || cache_stat(&t, "writing_ahead", 0)) &&
           wall_now() - t0 < 20) {
        before = ahead_copies(&t);
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(before >= 1);
    /* z's next turn: its turn point is not copied while the request runs, then is */
    most = ahead_while_running(&t, 4, z, nz2, 200, reuse, &answers);
    fprintf(stderr, "  %lld copies ahead before z's next turn, %lld while it ran (%d answers)\n",
            (long long)before, (long long)most, answers);
    assert_true(answers >= 2);
    assert_int_equal(most, before);
    t0 = wall_now();
    while (cache_stat(&t, "written_ahead", 0) <= before && wall_now() - t0 < 20) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "  copied %.2f s after its request ended\n", wall_now() - t0);
    assert_int_equal(cache_stat(&t, "written_ahead", 0), before + 1);
    test_engine_stop(&t);
    free(z);
    free(z1);
    free(x);
    assert_int_equal(rmdir(disk_dir), 0);
    disk_dir[0] = 0;
    disk_quota = 0;
}

static int setup(void **state)
{
    (void)state;
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    pool = splash_pool_create(2);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    splash_pool_destroy(pool);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_cuts),
        cmocka_unit_test(test_radix_tree),
        cmocka_unit_test(test_radix_tree_spill_order),
        cmocka_unit_test(test_fork_copy_on_write),
        cmocka_unit_test(test_forward_runs_bit_identical),
        cmocka_unit_test(test_engine_hits_bit_identical),
        cmocka_unit_test(test_engine_shared_prefix_lanes),
        cmocka_unit_test(test_engine_capacity_take_turns),
        cmocka_unit_test(test_engine_soak_within_plan),
        cmocka_unit_test(test_engine_soak_with_disk_tier),
        cmocka_unit_test(test_disk_cache_checks),
        cmocka_unit_test(test_disk_cache_persistent_leftovers),
        cmocka_unit_test(test_disk_cache_shared_pages),
        cmocka_unit_test(test_disk_cache_failed_page_write),
        cmocka_unit_test(test_disk_cache_persistent_chains),
        cmocka_unit_test(test_namespace_sweep),
        cmocka_unit_test(test_persistent_quota_removes_others),
        cmocka_unit_test(test_persistent_probation),
        cmocka_unit_test(test_engine_disk_tier_bit_identical),
        cmocka_unit_test(test_engine_persistent_restart),
        cmocka_unit_test(test_engine_disk_shared_system_prompt),
        cmocka_unit_test(test_engine_write_ahead_no_wait),
        cmocka_unit_test(test_engine_write_ahead_rules),
    };
    if (getenv("TEST_FILTER")) /* one test while iterating: TEST_FILTER=test_radix_tree */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
