/* Streamed experts (families/qwen_moe/expert_store.c): adaptive replacement on its own;
 * every tiny MoE model's teacher-forced logits (one prefill, token by token, and two
 * lanes batched) and greedy output bitwise those of all experts loaded, with the
 * smallest store and a middling one (decode reading ahead), the MLX checkpoint's too
 * (its experts read from their planes and imported one at a time; three lanes as well);
 * sizes refused below a layer's experts and loaded whole above all of them; a read error
 * retried, or failing one step while the next runs; a model file (or MLX shard) rewritten
 * while serving failing every later load, naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/family.h"
#include "core/meta.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "core/threadpool.h"
#include "families/common/hybrid.h"
#include "families/qwen_moe/expert_arc.h"
#include "families/qwen_moe/expert_store.h"
#include "families/qwen_moe/moe.h"
#include "splash/family.h"
#include "tests/support/golden.h"
#include "tests/support/model_run.h"
#include "tests/support/st_write.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;
static const struct splash_family_plugin *fam;

static int setup(void **state)
{
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    for (size_t i = 0; i < splash_registry_n_families(r); i++)
        if (!strcmp(splash_registry_family(r, i)->header.name, "qwen_moe"))
            fam = splash_registry_family(r, i);
    pool = splash_pool_create(2);
    return fam && pool ? 0 : -1;
}

static int teardown(void **state)
{
    splash_pool_destroy(pool);
    return 0;
}

/* ---- adaptive replacement --------------------------------------------------------------- */

static int pin_below(void *ctx, int32_t k)
{
    return k < *(int32_t *)ctx;
}

static void test_arc_keeps_what_decode_routes_again(void **state)
{
    struct es_arc a;
    int32_t ev, no_pin = -1;
    assert_int_equal(es_arc_init(&a, 4, 64), 0);
    /* a decode working set, routed twice: T2 */
    for (int32_t k = 0; k < 2; k++) {
        assert_true(es_arc_admit(&a, k, 1, pin_below, &no_pin, &ev) >= 0);
        es_arc_touch(&a, k, 1);
    }
    assert_int_equal(a.len[ES_ARC_T2], 2);
    /* a prompt streams 20 experts through: they pass through T1 and the decode set stays */
    for (int32_t k = 10; k < 30; k++) {
        assert_true(es_arc_admit(&a, k, 0, pin_below, &no_pin, &ev) >= 0);
        assert_true(ev != 0 && ev != 1);
    }
    assert_true(es_arc_slot(&a, 0) >= 0 && es_arc_slot(&a, 1) >= 0);
    /* pinned keys are never victims: with 0..3 resident and all pinned, no slot */
    es_arc_free(&a);
    assert_int_equal(es_arc_init(&a, 4, 64), 0);
    for (int32_t k = 0; k < 4; k++)
        assert_int_equal(es_arc_admit(&a, k, 0, pin_below, &no_pin, &ev), k);
    int32_t pin4 = 4;
    assert_int_equal(es_arc_admit(&a, 5, 0, pin_below, &pin4, &ev), -1);
    int32_t pin3 = 3; /* keys 0..2 pinned: 3 goes */
    assert_true(es_arc_admit(&a, 5, 0, pin_below, &pin3, &ev) >= 0);
    assert_int_equal(ev, 3);
    assert_int_equal(es_arc_slot(&a, 3), -1);
    /* a ghost of T1 routed again by decode comes back into T2 */
    assert_true(es_arc_admit(&a, 3, 1, pin_below, &no_pin, &ev) >= 0);
    assert_int_equal(a.node[3].list, ES_ARC_T2);
    /* a dropped key frees its slot */
    int32_t slot = es_arc_slot(&a, 3);
    es_arc_drop(&a, 3);
    assert_int_equal(es_arc_slot(&a, 3), -1);
    assert_int_equal(es_arc_admit(&a, 40, 0, pin_below, &no_pin, &ev), slot);
    assert_int_equal(ev, -1);
    es_arc_free(&a);
}

/* ---- bitwise against all experts loaded --------------------------------------------------- */

static void open_store(const char *path, uint64_t expert_memory, int elastic,
                       struct test_run *r)
{
    struct test_run_opts o = {.fam = fam, .pool = pool, .kv_format = SPLASH_KV_BF16,
                              .state_format = SPLASH_STATE_F32, .expert_memory = expert_memory,
                              .expert_elastic = elastic};
    test_run_open(r, &o, path, path);
}

static void open_model(const char *path, uint64_t expert_memory, struct test_run *r)
{
    open_store(path, expert_memory, 0, r);
}

static int streams(const struct test_run *r)
{
    struct splash_expert_stats s;
    return moe_expert_stats(r->model, &s);
}

/* Two lanes in one forward: the first lane's n1 tokens and the second's n2. */
static float *two_lanes(struct test_run *r, const int32_t *t1, int32_t n1, const int32_t *t2,
                        int32_t n2)
{
    size_t V = (size_t)r->info.n_vocab;
    float *out = malloc((size_t)(n1 + n2) * V * sizeof(float));
    struct splash_err err = {{0}};
    void *s1, *s2;
    assert_int_equal(fam->seq_create(r->model, &s1, &err), SPLASH_OK);
    assert_int_equal(fam->seq_create(r->model, &s2, &err), SPLASH_OK);
    struct splash_lane lanes[2] = {
        {.seq = s1, .tokens = t1, .n_tokens = n1, .logits = out, .logits_all = 1},
        {.seq = s2, .tokens = t2, .n_tokens = n2, .logits = out + n1 * V, .logits_all = 1}};
    if (fam->forward(r->model, lanes, 2, &err))
        fail_msg("two lanes: %s", err.msg);
    /* then both decode a token together */
    fam->seq_destroy(r->model, s1);
    fam->seq_destroy(r->model, s2);
    return out;
}

/* n greedy tokens after the prompt, one forward each. */
static void greedy(struct test_run *r, const int32_t *prompt, int32_t n_prompt, int32_t n,
                   int32_t *out)
{
    size_t V = (size_t)r->info.n_vocab;
    float *logits = malloc(V * sizeof(float));
    struct splash_err err = {{0}};
    void *seq;
    assert_int_equal(fam->seq_create(r->model, &seq, &err), SPLASH_OK);
    struct splash_lane lane = {.seq = seq, .tokens = prompt, .n_tokens = n_prompt,
                               .logits = logits};
    int32_t tok;
    for (int32_t i = 0; i < n; i++) {
        if (fam->forward(r->model, &lane, 1, &err))
            fail_msg("greedy %d: %s", i, err.msg);
        tok = 0;
        for (size_t v = 1; v < V; v++)
            if (logits[v] > logits[tok])
                tok = (int32_t)v;
        out[i] = tok;
        lane.tokens = &out[i];
        lane.pos0 += lane.n_tokens;
        lane.n_tokens = 1;
    }
    fam->seq_destroy(r->model, seq);
    free(logits);
}

struct run_out {
    float *prefill, *decode, *lanes;
    int32_t tokens[24];
};

static void run_all(struct test_run *r, const struct test_golden *g, struct run_out *o)
{
    o->prefill = test_run_logits(r, g->tokens, g->n_tokens, 0, NULL);
    o->decode = test_run_logits(r, g->tokens, g->n_tokens, 1, NULL);
    o->lanes = two_lanes(r, g->tokens, 20, g->tokens + 30, 9);
    greedy(r, g->tokens, g->n_prompt, 24, o->tokens);
}

static void run_free(struct run_out *o)
{
    free(o->prefill);
    free(o->decode);
    free(o->lanes);
}

static void same_bits(const char *name, const char *what, const struct run_out *a,
                      const struct run_out *b, const struct test_golden *g)
{
    size_t V = (size_t)g->n_vocab, n = (size_t)g->n_tokens;
    if (memcmp(a->prefill, b->prefill, n * V * sizeof(float)))
        fail_msg("%s, %s: prefill logits differ from all experts loaded", name, what);
    if (memcmp(a->decode, b->decode, n * V * sizeof(float)))
        fail_msg("%s, %s: token-by-token logits differ from all experts loaded", name, what);
    if (memcmp(a->lanes, b->lanes, 29 * V * sizeof(float)))
        fail_msg("%s, %s: two batched lanes' logits differ from all experts loaded", name, what);
    if (memcmp(a->tokens, b->tokens, sizeof a->tokens))
        fail_msg("%s, %s: greedy output differs from all experts loaded", name, what);
}

static void test_streamed_bitwise_all_resident(void **state)
{
    char names[16][TEST_GOLDEN_NAME];
    int n = test_golden_names("qwen35moe-tiny-", names, 16);
    assert_true(n >= 5);
    for (int i = 0; i < n; i++) {
        struct test_golden g;
        assert_int_equal(test_golden_load(names[i], &g), 0);
        char path[512], rel[256];
        snprintf(rel, sizeof rel, "models/%s", json_string_value(json_object_get(g.json, "file")));
        test_testdata_path(path, sizeof path, rel);
        struct test_run whole, small, mid;
        struct run_out ref, o_small, o_mid;
        open_model(path, 0, &whole);
        assert_false(streams(&whole));
        assert_int_equal(whole.info.expert_store_bytes, 0);
        run_all(&whole, &g, &ref);
        /* the smallest store: one layer's experts, every step reads */
        open_model(path, SPLASH_EXPERTS_SMALLEST, &small);
        assert_true(streams(&small));
        assert_int_equal(small.info.expert_store_bytes, small.info.expert_store_min_bytes);
        assert_true(small.info.weight_bytes < whole.info.weight_bytes);
        run_all(&small, &g, &o_small);
        struct splash_expert_stats s;
        moe_expert_stats(small.model, &s);
        assert_true(s.decode.read > 0 && s.prefill.read > 0);
        same_bits(names[i], "smallest store", &o_small, &ref, &g);
        /* a store of about half the experts: some steps hit */
        uint64_t half = small.info.expert_store_min_bytes +
                        (small.info.routed_expert_bytes - small.info.expert_store_min_bytes) / 2;
        open_model(path, half, &mid);
        assert_true(streams(&mid));
        run_all(&mid, &g, &o_mid);
        moe_expert_stats(mid.model, &s);
        assert_true(s.decode.read < s.decode.routed);
        /* decode read ahead (bits unchanged, above): some of its picks were routed */
        assert_true(s.decode.read_ahead > 0 && s.decode.read_ahead_used > 0);
        assert_true(s.prefill.read_ahead == 0);
        same_bits(names[i], "half store", &o_mid, &ref, &g);
        struct splash_expert_stats s_small;
        moe_expert_stats(small.model, &s_small);
        printf("  %-26s bitwise equal: smallest %.2f MiB (%d slots), half %.2f MiB (%d slots, "
               "decode hit rate %.2f, read ahead %llu, used %llu) of %.2f MiB of experts\n",
               names[i], (double)small.info.expert_store_bytes / 1048576.0, s_small.slots,
               (double)mid.info.expert_store_bytes / 1048576.0, s.slots,
               1.0 - (double)s.decode.read / (double)s.decode.routed,
               (unsigned long long)s.decode.read_ahead, (unsigned long long)s.decode.read_ahead_used,
               (double)whole.info.routed_expert_bytes / 1048576.0);
        run_free(&ref);
        run_free(&o_small);
        run_free(&o_mid);
        test_run_close(&whole);
        test_run_close(&small);
        test_run_close(&mid);
        test_golden_free(&g);
    }
}

/* ---- elastic chunks ----------------------------------------------------------------------- */

/* An elastic store (--expert-memory auto) starts at its floor, takes its chunk back and
 * gives it back again, the experts in it copied below: outputs bitwise all-resident's at
 * every size, and its counters say what happened. */
static void test_elastic_chunks_bitwise(void **state)
{
    struct test_golden g;
    assert_int_equal(test_golden_load("qwen35moe-tiny-Q4_K_M", &g), 0);
    char path[512], rel[256];
    snprintf(rel, sizeof rel, "models/%s", json_string_value(json_object_get(g.json, "file")));
    test_testdata_path(path, sizeof path, rel);
    struct test_run whole, el;
    struct run_out ref, o;
    open_model(path, 0, &whole);
    run_all(&whole, &g, &ref);
    /* most of the experts: the floor (85% of the slots) is above a layer's */
    uint64_t most = whole.info.routed_expert_bytes * 3 / 4;
    open_store(path, most, 1, &el);
    struct splash_expert_stats s;
    assert_true(moe_expert_stats(el.model, &s));
    assert_true(s.floor_bytes < s.cap_bytes);
    assert_int_equal(el.info.expert_store_bytes, s.cap_bytes); /* the plan counts its cap */
    int32_t cap_chunks = s.cap_chunks, floor_chunks = s.chunks, floor_slots = s.slots;
    assert_true(s.chunks < cap_chunks);
    assert_int_equal(s.arena_bytes + s.staging_bytes < s.floor_bytes + 1, 1);
    /* at the floor, nothing to give back */
    assert_int_equal(fam->expert_resize(el.model, 0, 0), 0);
    /* a chunk larger than the room is not taken */
    assert_int_equal(fam->expert_resize(el.model, 1, 1), 0);
    run_all(&el, &g, &o);
    same_bits("qwen35moe-tiny-Q4_K_M", "elastic store at its floor", &o, &ref, &g);
    run_free(&o);
    /* every chunk back: the cap's slots */
    while (fam->expert_resize(el.model, 1, UINT64_MAX))
        ;
    moe_expert_stats(el.model, &s);
    assert_int_equal(s.chunks, cap_chunks);
    assert_true(s.slots > floor_slots);
    assert_int_equal(s.regrows, (uint64_t)(cap_chunks - floor_chunks));
    run_all(&el, &g, &o);
    same_bits("qwen35moe-tiny-Q4_K_M", "elastic store at its cap", &o, &ref, &g);
    run_free(&o);
    moe_expert_stats(el.model, &s);
    int32_t resident_at_cap = s.resident;
    assert_true(resident_at_cap > floor_slots); /* experts lie in the elastic chunks */
    /* give them all back: the experts that fit stay, copied below */
    int gave = 0;
    while (fam->expert_resize(el.model, 0, 0))
        gave++;
    assert_int_equal(gave, cap_chunks - floor_chunks);
    moe_expert_stats(el.model, &s);
    assert_int_equal(s.shrinks, (uint64_t)gave);
    assert_int_equal(s.slots, floor_slots);
    assert_int_equal(s.resident, floor_slots);
    uint64_t read_before = s.decode.read + s.prefill.read;
    run_all(&el, &g, &o);
    same_bits("qwen35moe-tiny-Q4_K_M", "elastic store given back", &o, &ref, &g);
    moe_expert_stats(el.model, &s);
    assert_true(s.decode.read + s.prefill.read > read_before);
    printf("  elastic: floor %d slots in %d chunks, the cap %d chunks, %d experts resident at "
           "the cap, of %d\n",
           floor_slots, floor_chunks, cap_chunks, resident_at_cap, s.experts);
    run_free(&o);
    run_free(&ref);
    test_run_close(&el);
    test_run_close(&whole);
    test_golden_free(&g);
}

/* ---- prefill groups ----------------------------------------------------------------------- */

/* A prompt longer than the trunk's 512-row pieces runs as one group, layer by layer: each
 * layer's experts are loaded once for all its rows, and the logits are all-resident's. */
static void test_prefill_group_reads_each_layer_once(void **state)
{
    char path[512];
    test_testdata_path(path, sizeof path, "models/qwen35moe-tiny-Q4_K_M.gguf");
    struct test_run whole, small;
    open_model(path, 0, &whole);
    open_model(path, SPLASH_EXPERTS_SMALLEST, &small);
    enum { N = 1500 };
    int32_t *tokens = malloc(N * sizeof *tokens);
    uint32_t x = 7;
    for (int i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        tokens[i] = (int32_t)(x % (uint32_t)whole.info.n_vocab);
    }
    float *ref = test_run_logits(&whole, tokens, N, 0, NULL);
    float *got = test_run_logits(&small, tokens, N, 0, NULL);
    if (memcmp(ref, got, (size_t)N * (size_t)whole.info.n_vocab * sizeof(float)))
        fail_msg("a %d-token prefill group's logits differ from all experts loaded", N);
    struct splash_expert_stats s;
    moe_expert_stats(small.model, &s);
    printf("  %d-token prefill: %llu loads, %llu experts read, %.2f MiB read\n", N,
           (unsigned long long)s.prefill.loads, (unsigned long long)s.prefill.read,
           (double)s.prefill.bytes_read / 1048576.0);
    /* one round per layer (qwen35moe-tiny: 4 MoE layers), not one per 512-row piece */
    assert_int_equal(s.prefill.loads, whole.info.n_layers);
    free(ref);
    free(got);
    free(tokens);
    test_run_close(&whole);
    test_run_close(&small);
}

/* ---- sizes -------------------------------------------------------------------------------- */

static void model_path(char *path, size_t size)
{
    test_testdata_path(path, size, "models/qwen35moe-tiny-Q4_K_M.gguf");
}

static void test_sizes(void **state)
{
    char path[512];
    model_path(path, sizeof path);
    struct test_run small;
    open_model(path, SPLASH_EXPERTS_SMALLEST, &small);
    uint64_t smallest = small.info.expert_store_min_bytes, routed = small.info.routed_expert_bytes;
    assert_true(smallest > 0 && smallest < routed);
    test_run_close(&small);
    /* below one layer's experts: refused, naming the option */
    struct test_run_opts o = {.fam = fam, .pool = pool, .kv_format = SPLASH_KV_BF16,
                              .state_format = SPLASH_STATE_F32, .expert_memory = smallest - 1};
    struct splash_meta *m;
    struct splash_err err = {{0}};
    assert_int_equal(splash_meta_open_gguf(path, 0, &m, &err), SPLASH_OK);
    splash_meta_bind_formats(m, splash_registry_global());
    void *model = NULL;
    struct splash_model_info info;
    struct splash_model_opts mo = {.pool = pool, .kv_format = SPLASH_KV_BF16,
                                   .expert_memory = o.expert_memory};
    assert_int_equal(splash_family_model_create(splash_registry_global(), fam, m, &mo, &model,
                                                &info, &err),
                     SPLASH_ERR_NOMEM);
    assert_non_null(strstr(err.msg, "--expert-memory"));
    assert_non_null(strstr(err.msg, "below one layer's experts"));
    splash_meta_close(m);
    /* a size that holds every expert loads them all */
    struct test_run all;
    open_model(path, routed, &all);
    assert_false(streams(&all));
    assert_int_equal(all.info.expert_store_bytes, 0);
    test_run_close(&all);
}

/* ---- an imported MLX checkpoint ------------------------------------------------------------ */

#define MLX_MOE "safetensors/qwen35moe-tiny-mlx-4bit"

/* The MLX MoE checkpoint loaded as the server loads it (the stacked experts' import deferred
 * to the bind), as a test_run. */
static struct splash_loaded_model *open_mlx_at(const char *path, uint64_t expert_memory,
                                               struct test_run *r)
{
    struct splash_model_opts mo = {.pool = pool, .kv_format = SPLASH_KV_BF16,
                                   .state_format = SPLASH_STATE_F32,
                                   .expert_memory = expert_memory};
    struct splash_loaded_model *lm;
    struct splash_err err = {{0}};
    if (splash_model_load(splash_registry_global(), path, &mo, 2, &lm, &err))
        fail_msg("%s: %s", path, err.msg);
    *r = (struct test_run){.fam = fam, .meta = lm->meta, .model = lm->model, .info = lm->info};
    return lm;
}

static struct splash_loaded_model *open_mlx(uint64_t expert_memory, struct test_run *r)
{
    char path[512];
    return open_mlx_at(test_testdata_path(path, sizeof path, MLX_MOE), expert_memory, r);
}

/* Bytes of the routed stacks' imports made (0 while every one stays deferred). */
static uint64_t stacks_imported(const struct splash_meta *m)
{
    static const char *const exps[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    uint64_t bytes = 0;
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, exps[p]);
            const struct splash_tensor_info *t = splash_meta_api_get()->tensor_find(m, name);
            assert_non_null(t);
            if (t->data)
                bytes += t->n_bytes;
        }
    return bytes;
}

/* Three lanes in one forward (rows 0..12, 30..40, 44..52), as a batched decode's verify
 * rows and prompts mix. */
static float *three_lanes(struct test_run *r, const int32_t *tokens)
{
    size_t V = (size_t)r->info.n_vocab;
    static const int32_t at[3] = {0, 30, 44}, len[3] = {12, 10, 8};
    float *out = malloc((size_t)30 * V * sizeof(float));
    struct splash_err err = {{0}};
    struct splash_lane lanes[3];
    void *seq[3];
    for (int i = 0, row = 0; i < 3; row += len[i], i++) {
        assert_int_equal(fam->seq_create(r->model, &seq[i], &err), SPLASH_OK);
        lanes[i] = (struct splash_lane){.seq = seq[i], .tokens = tokens + at[i],
                                        .n_tokens = len[i], .logits = out + (size_t)row * V,
                                        .logits_all = 1};
    }
    if (fam->forward(r->model, lanes, 3, &err))
        fail_msg("three lanes: %s", err.msg);
    for (int i = 0; i < 3; i++)
        fam->seq_destroy(r->model, seq[i]);
    return out;
}

/* The MLX MoE's experts stream from the planes in its shard, imported one expert at a time
 * into the slots: teacher-forced logits (one prefill, token by token, two and three lanes
 * batched) and greedy output bitwise those of every expert loaded (--expert-memory off), at
 * the smallest store and at half; the streamed loads never import the stacks whole, and the
 * weights' budget is the whole load's less the routed experts plus the store. */
static void test_mlx_streamed_bitwise_all_resident(void **state)
{
    struct test_golden g;
    assert_int_equal(test_golden_load_dir("safetensors", "qwen35moe-tiny-mlx-4bit", &g), 0);
    assert_true(g.n_tokens >= 52);
    struct test_run whole, small, mid;
    struct run_out ref, o_small, o_mid;
    struct splash_loaded_model *lw = open_mlx(0, &whole);
    assert_false(streams(&whole));
    assert_int_equal(whole.info.expert_store_bytes, 0);
    assert_int_equal(stacks_imported(whole.meta), whole.info.routed_expert_bytes);
    run_all(&whole, &g, &ref);
    float *ref3 = three_lanes(&whole, g.tokens);
    const size_t V = (size_t)g.n_vocab;
    struct splash_loaded_model *ls = open_mlx(SPLASH_EXPERTS_SMALLEST, &small);
    assert_true(streams(&small));
    assert_int_equal(stacks_imported(small.meta), 0);
    assert_int_equal(small.info.expert_store_bytes, small.info.expert_store_min_bytes);
    assert_int_equal(small.info.routed_expert_bytes, whole.info.routed_expert_bytes);
    assert_int_equal(small.info.weight_bytes - small.info.expert_store_bytes,
                     whole.info.weight_bytes - whole.info.routed_expert_bytes);
    run_all(&small, &g, &o_small);
    same_bits("qwen35moe-tiny-mlx-4bit", "smallest store", &o_small, &ref, &g);
    float *got3 = three_lanes(&small, g.tokens);
    if (memcmp(got3, ref3, 30 * V * sizeof(float)))
        fail_msg("MLX, smallest store: three batched lanes' logits differ from all experts loaded");
    free(got3);
    struct splash_expert_stats s;
    moe_expert_stats(small.model, &s);
    assert_true(s.decode.read > 0 && s.prefill.read > 0);
    assert_int_equal(stacks_imported(small.meta), 0); /* still: every read was one expert's */
    uint64_t half = small.info.expert_store_min_bytes +
                    (small.info.routed_expert_bytes - small.info.expert_store_min_bytes) / 2;
    struct splash_loaded_model *lmid = open_mlx(half, &mid);
    assert_true(streams(&mid));
    run_all(&mid, &g, &o_mid);
    same_bits("qwen35moe-tiny-mlx-4bit", "half store", &o_mid, &ref, &g);
    got3 = three_lanes(&mid, g.tokens);
    if (memcmp(got3, ref3, 30 * V * sizeof(float)))
        fail_msg("MLX, half store: three batched lanes' logits differ from all experts loaded");
    free(got3);
    struct splash_expert_stats sm;
    moe_expert_stats(mid.model, &sm);
    assert_true(sm.decode.read < sm.decode.routed);
    printf("  MLX bitwise equal: smallest %.2f MiB (%d slots, %.2f MiB of planes read), half "
           "%.2f MiB (%d slots, decode hit rate %.2f) of %.2f MiB of experts; weights %.2f MiB "
           "streamed at the smallest, %.2f MiB whole\n",
           (double)small.info.expert_store_bytes / 1048576.0, s.slots,
           (double)(s.decode.bytes_read + s.prefill.bytes_read) / 1048576.0,
           (double)mid.info.expert_store_bytes / 1048576.0, sm.slots,
           1.0 - (double)sm.decode.read / (double)sm.decode.routed,
           (double)whole.info.routed_expert_bytes / 1048576.0,
           (double)small.info.weight_bytes / 1048576.0, (double)whole.info.weight_bytes / 1048576.0);
    free(ref3);
    run_free(&ref);
    run_free(&o_small);
    run_free(&o_mid);
    splash_model_unload(lw);
    splash_model_unload(ls);
    splash_model_unload(lmid);
    test_golden_free(&g);
}

/* ---- reader counts ------------------------------------------------------------------------- */

#define READERS_ENV "SPLASH_EXPERT_READERS"

/* One GGUF MoE and the MLX MoE at the smallest store (every step reads), with one reader and
 * with sixteen (reads finishing in any order): outputs bitwise the same, and the store
 * reports the count it started. */
static void test_reader_counts_bitwise(void **state)
{
    char names[16][TEST_GOLDEN_NAME];
    assert_true(test_golden_names("qwen35moe-tiny-", names, 16) >= 1);
    struct test_golden g, gm;
    assert_int_equal(test_golden_load(names[0], &g), 0);
    assert_int_equal(test_golden_load_dir("safetensors", "qwen35moe-tiny-mlx-4bit", &gm), 0);
    char path[512], rel[256];
    snprintf(rel, sizeof rel, "models/%s", json_string_value(json_object_get(g.json, "file")));
    test_testdata_path(path, sizeof path, rel);
    static const int counts[2] = {1, 16};
    struct run_out o[2], om[2];
    for (int i = 0; i < 2; i++) {
        char v[8];
        snprintf(v, sizeof v, "%d", counts[i]);
        setenv(READERS_ENV, v, 1);
        struct test_run r, rm;
        struct splash_expert_stats s;
        open_model(path, SPLASH_EXPERTS_SMALLEST, &r);
        assert_true(moe_expert_stats(r.model, &s));
        assert_int_equal(s.readers, counts[i]);
        run_all(&r, &g, &o[i]);
        moe_expert_stats(r.model, &s);
        assert_true(s.decode.read > 0 && s.prefill.read > 0);
        test_run_close(&r);
        struct splash_loaded_model *lm = open_mlx(SPLASH_EXPERTS_SMALLEST, &rm);
        assert_true(moe_expert_stats(rm.model, &s));
        assert_int_equal(s.readers, counts[i]);
        run_all(&rm, &gm, &om[i]);
        splash_model_unload(lm);
    }
    unsetenv(READERS_ENV);
    same_bits(names[0], "1 reader against 16", &o[0], &o[1], &g);
    same_bits("qwen35moe-tiny-mlx-4bit", "1 reader against 16", &om[0], &om[1], &gm);
    for (int i = 0; i < 2; i++) {
        run_free(&o[i]);
        run_free(&om[i]);
    }
    test_golden_free(&g);
    test_golden_free(&gm);
}

/* A reader count that is not one (0, past the most, not a number) refuses the load, naming
 * the variable. */
static void test_bad_reader_count_refused(void **state)
{
    static const char *const bad[] = {"0", "65", "4x", "-2"};
    char path[512];
    test_testdata_path(path, sizeof path, MLX_MOE);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(READERS_ENV, bad[i], 1);
        struct splash_model_opts mo = {.pool = pool, .kv_format = SPLASH_KV_BF16,
                                       .state_format = SPLASH_STATE_F32,
                                       .expert_memory = SPLASH_EXPERTS_SMALLEST};
        struct splash_loaded_model *lm = NULL;
        struct splash_err err = {{0}};
        enum splash_status st = splash_model_load(splash_registry_global(), path, &mo, 2, &lm, &err);
        unsetenv(READERS_ENV);
        if (st == SPLASH_OK) {
            splash_model_unload(lm);
            fail_msg("SPLASH_EXPERT_READERS=%s was taken", bad[i]);
        }
        assert_non_null(strstr(err.msg, "SPLASH_EXPERT_READERS"));
    }
}

/* ---- failures ----------------------------------------------------------------------------- */

static enum splash_status one_forward(struct test_run *r, const int32_t *tokens, int32_t n,
                                      struct splash_err *err)
{
    void *seq;
    assert_int_equal(fam->seq_create(r->model, &seq, err), SPLASH_OK);
    struct splash_lane lane = {.seq = seq, .tokens = tokens, .n_tokens = n};
    enum splash_status st = fam->forward(r->model, &lane, 1, err);
    fam->seq_destroy(r->model, seq);
    return st;
}

#define READS_ENV "SPLASH_TEST_EXPERT_READ_FAIL"

/* A read error (the readers' test hook): retried once, else the step fails and the next
 * one runs. */
static void test_read_error_hook(void **state)
{
    char path[512];
    model_path(path, sizeof path);
    int32_t tokens[8] = {11, 12, 13, 14, 15, 16, 17, 18};
    struct splash_err err = {{0}};
    /* retried once: a read whose first attempt fails still loads, and the step's bits are
     * those of all experts loaded */
    struct test_run whole, r;
    open_model(path, 0, &whole);
    float *ref = test_run_logits(&whole, tokens, 8, 0, NULL);
    /* the store's third read fails once */
    setenv(READS_ENV, "3:1", 1);
    open_model(path, SPLASH_EXPERTS_SMALLEST, &r);
    float *got = test_run_logits(&r, tokens, 8, 0, NULL);
    assert_memory_equal(got, ref, (size_t)8 * (size_t)r.info.n_vocab * sizeof(float));
    test_run_close(&r);
    /* tried twice and failed: the step fails, naming the file; the next step runs */
    setenv(READS_ENV, "3", 1);
    open_model(path, SPLASH_EXPERTS_SMALLEST, &r);
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_ERR_IO);
    printf("  read error: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "qwen35moe-tiny-Q4_K_M.gguf"));
    assert_non_null(strstr(err.msg, "failed twice"));
    unsetenv(READS_ENV);
    free(got);
    got = test_run_logits(&r, tokens, 8, 0, NULL);
    assert_memory_equal(got, ref, (size_t)8 * (size_t)r.info.n_vocab * sizeof(float));
    free(got);
    free(ref);
    test_run_close(&r);
    test_run_close(&whole);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    fclose(b);
}

static void test_file_rewritten_fails_later_loads(void **state)
{
    char src[512], dir[] = "/tmp/splash-test-expert-store-XXXXXX", path[600];
    model_path(src, sizeof src);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    copy_file(src, path);
    struct test_run r;
    open_model(path, SPLASH_EXPERTS_SMALLEST, &r);
    int32_t tokens[8] = {21, 22, 23, 24, 25, 26, 27, 28};
    struct splash_err err = {{0}};
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_OK);
    /* rewritten in place with the same bytes: its mtime moves */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    struct timespec times[2] = {{.tv_sec = sb.st_mtim.tv_sec + 10}, {.tv_sec = sb.st_mtim.tv_sec + 10}};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_ERR_IO);
    printf("  rewritten: %s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "modified"));
    /* and every later load */
    assert_int_equal(one_forward(&r, tokens + 1, 4, &err), SPLASH_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    test_run_close(&r);
    remove(path);
    rmdir(dir);
}

/* The MLX MoE's reads fail as a GGUF's do: the hook's first failed attempt is retried (the
 * bits those of all experts loaded); failed twice, the step fails naming the shard and the
 * plane, and the next runs. */
static void test_mlx_read_error_hook(void **state)
{
    int32_t tokens[8] = {11, 12, 13, 14, 15, 16, 17, 18};
    struct splash_err err = {{0}};
    struct test_run whole, r;
    struct splash_loaded_model *lw = open_mlx(0, &whole);
    float *ref = test_run_logits(&whole, tokens, 8, 0, NULL);
    setenv(READS_ENV, "3:1", 1);
    struct splash_loaded_model *lm = open_mlx(SPLASH_EXPERTS_SMALLEST, &r);
    assert_true(streams(&r));
    float *got = test_run_logits(&r, tokens, 8, 0, NULL);
    assert_memory_equal(got, ref, (size_t)8 * (size_t)r.info.n_vocab * sizeof(float));
    free(got);
    splash_model_unload(lm);
    setenv(READS_ENV, "3", 1);
    lm = open_mlx(SPLASH_EXPERTS_SMALLEST, &r);
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_ERR_IO);
    printf("  MLX read error: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "qwen35moe-tiny-mlx-4bit/model.safetensors"));
    assert_non_null(strstr(err.msg, "failed twice"));
    assert_non_null(strstr(err.msg, "switch_mlp"));
    unsetenv(READS_ENV);
    got = test_run_logits(&r, tokens, 8, 0, NULL);
    assert_memory_equal(got, ref, (size_t)8 * (size_t)r.info.n_vocab * sizeof(float));
    free(got);
    free(ref);
    splash_model_unload(lm);
    splash_model_unload(lw);
}

/* The MLX MoE's shard rewritten while it serves fails the next load, naming the shard, and
 * every load after. */
static void test_mlx_shard_rewritten_fails_later_loads(void **state)
{
    char dir[256], src[1024], dst[1024];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s", MLX_MOE, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        copy_file(test_testdata_path(src, sizeof src, rel), dst);
    }
    struct test_run r;
    struct splash_loaded_model *lm = open_mlx_at(dir, SPLASH_EXPERTS_SMALLEST, &r);
    assert_true(streams(&r));
    int32_t tokens[8] = {21, 22, 23, 24, 25, 26, 27, 28};
    struct splash_err err = {{0}};
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_OK);
    char shard[1024];
    snprintf(shard, sizeof shard, "%s/model.safetensors", dir);
    struct stat sb;
    assert_int_equal(stat(shard, &sb), 0);
    struct timespec times[2] = {{.tv_sec = sb.st_mtim.tv_sec + 10},
                                {.tv_sec = sb.st_mtim.tv_sec + 10}};
    assert_int_equal(utimensat(AT_FDCWD, shard, times, 0), 0);
    assert_int_equal(one_forward(&r, tokens, 8, &err), SPLASH_ERR_IO);
    printf("  MLX shard rewritten: %s\n", err.msg);
    assert_non_null(strstr(err.msg, shard));
    assert_non_null(strstr(err.msg, "modified"));
    assert_int_equal(one_forward(&r, tokens + 1, 4, &err), SPLASH_ERR_IO);
    assert_non_null(strstr(err.msg, shard));
    splash_model_unload(lm);
    test_st_rmdir(dir);
}

/* The MLX MoE with its experts' scales and biases in a second shard: each expert's part
 * reads its codes from one file and its scales and biases from the other, bitwise the
 * logits of every expert loaded; the second shard rewritten fails the next load naming it. */
static void test_mlx_planes_in_two_shards(void **state)
{
    char dir[256], src[1024], path[1024];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    static const char *const copied[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s", MLX_MOE, copied[i]);
        snprintf(path, sizeof path, "%s/%s", dir, copied[i]);
        copy_file(test_testdata_path(src, sizeof src, rel), path);
    }
    static const char *const shard_name[2] = {"model-00001-of-00002.safetensors",
                                              "model-00002-of-00002.safetensors"};
    struct test_st_file all = {0}, shard[2] = {{0}};
    char rel[256];
    snprintf(rel, sizeof rel, "%s/model.safetensors", MLX_MOE);
    assert_int_equal(test_st_read(test_testdata_path(src, sizeof src, rel), &all), 0);
    json_t *map = json_object();
    int moved = 0;
    for (size_t i = 0; i < all.n; i++) {
        const struct test_st_tensor *t = &all.t[i];
        const int second = strstr(t->name, "switch_mlp") &&
                           (strstr(t->name, ".scales") || strstr(t->name, ".biases"));
        moved += second;
        test_st_add(&shard[second], t->name, t->dtype, t->rank, t->shape, t->data, t->n_bytes);
        json_object_set_new(map, t->name, json_string(shard_name[second]));
    }
    assert_int_equal(moved, 4 * 3 * 2);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, shard_name[k]);
        assert_int_equal(test_st_write(&shard[k], path), 0);
        test_st_free(&shard[k]);
    }
    test_st_free(&all);
    json_t *index = json_pack("{s:{}, s:o}", "metadata", "weight_map", map);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    assert_int_equal(json_dump_file(index, path, 0), 0);
    json_decref(index);

    int32_t tokens[12] = {31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42};
    struct test_run whole, r;
    struct splash_loaded_model *lw = open_mlx(0, &whole);
    float *ref = test_run_logits(&whole, tokens, 12, 0, NULL);
    float *ref_dec = test_run_logits(&whole, tokens, 12, 1, NULL);
    struct splash_loaded_model *lm = open_mlx_at(dir, SPLASH_EXPERTS_SMALLEST, &r);
    assert_true(streams(&r));
    struct splash_expert_planes pl;
    struct splash_err err = {{0}};
    const struct splash_tensor_info *t =
        splash_meta_api_get()->tensor_find(r.meta, "blk.1.ffn_down_exps.weight");
    assert_int_equal(splash_st_expert_planes(r.meta, t->name, &pl, &err), SPLASH_OK);
    assert_non_null(strstr(pl.path[0], shard_name[0]));
    assert_non_null(strstr(pl.path[1], shard_name[1]));
    assert_non_null(strstr(pl.path[2], shard_name[1]));
    float *got = test_run_logits(&r, tokens, 12, 0, NULL);
    float *got_dec = test_run_logits(&r, tokens, 12, 1, NULL);
    const size_t bytes = (size_t)12 * (size_t)r.info.n_vocab * sizeof(float);
    if (memcmp(got, ref, bytes) || memcmp(got_dec, ref_dec, bytes))
        fail_msg("MLX planes in two shards: logits differ from all experts loaded");
    struct splash_expert_stats s;
    moe_expert_stats(r.model, &s);
    assert_true(s.decode.read > 0); /* steps of at most 32 rows count as decode */
    /* the scales' shard rewritten: the next load names it */
    snprintf(path, sizeof path, "%s/%s", dir, shard_name[1]);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    struct timespec times[2] = {{.tv_sec = sb.st_mtim.tv_sec + 10},
                                {.tv_sec = sb.st_mtim.tv_sec + 10}};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    assert_int_equal(one_forward(&r, tokens, 12, &err), SPLASH_ERR_IO);
    printf("  MLX planes in two shards: bitwise; then %s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    free(got);
    free(got_dec);
    free(ref);
    free(ref_dec);
    splash_model_unload(lm);
    splash_model_unload(lw);
    test_st_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arc_keeps_what_decode_routes_again),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_mlx_streamed_bitwise_all_resident),
        cmocka_unit_test(test_mlx_read_error_hook),
        cmocka_unit_test(test_mlx_shard_rewritten_fails_later_loads),
        cmocka_unit_test(test_mlx_planes_in_two_shards),
        cmocka_unit_test(test_reader_counts_bitwise),
        cmocka_unit_test(test_bad_reader_count_refused),
        cmocka_unit_test(test_read_error_hook),
        cmocka_unit_test(test_file_rewritten_fails_later_loads),
        cmocka_unit_test(test_streamed_bitwise_all_resident),
        cmocka_unit_test(test_elastic_chunks_bitwise),
        cmocka_unit_test(test_prefill_group_reads_each_layer_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
