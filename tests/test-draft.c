/* The DFlash2 draft plugin: its proposals against the PyTorch reference's recorded cycles
 * (../shared/testdata/drafts, teacher-forced: each cycle's context is the target's taps of
 * the recorded sequence before its start), with the projections as stored and quantized
 * to af4g64; its refusals of configurations the kernels or the target do not take, each
 * naming the key; and the target family's taps. */
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

#include "core/draft.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/draft.h"
#include "tests/support/config_file.h"
#include "tests/support/model_run.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;
static const struct splash_family_plugin *fam;

static int setup(void **state)
{
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    for (size_t i = 0; i < splash_registry_n_families(r); i++)
        if (!strcmp(splash_registry_family(r, i)->header.name, "qwen_hybrid"))
            fam = splash_registry_family(r, i);
    pool = splash_pool_create(2);
    return fam && pool ? 0 : -1;
}

static int teardown(void **state)
{
    splash_pool_destroy(pool);
    return 0;
}

static void open_target(struct test_run *t)
{
    char path[512];
    const struct test_run_opts o = {.fam = fam, .pool = pool, .kv_format = SPLASH_KV_BF16};
    assert_int_equal(test_run_open(t,
                                   &o,
                                   test_testdata_path(path, sizeof path,
                                                      "models/qwen35-stories-Q8_0.gguf"),
                                   "stories"),
                     0);
}

static struct splash_meta *open_draft(void)
{
    char dir[512];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    enum splash_status st =
        splash_draft_open(splash_registry_global(),
                          test_testdata_path(dir, sizeof dir, "drafts/qwen35-stories-DFlash2"), 0,
                          &m, &err);
    if (st)
        fail_msg("draft: %s", err.msg);
    return m;
}

/* The target's taps of tokens[0..n), one forward (n x n_taps * n_embd floats). */
static float *target_taps(struct test_run *t, const struct splash_draft_info *di,
                          const int32_t *tokens, int32_t n)
{
    struct splash_err err = {{0}};
    void *seq = NULL;
    assert_int_equal(splash_family_seq_create(t->fam, t->model, &seq, &err), SPLASH_OK);
    float *rows = malloc((size_t)n * (size_t)di->n_taps * (size_t)di->n_embd * sizeof(float));
    assert_non_null(rows);
    const struct splash_lane lane = {.seq = seq, .tokens = tokens, .n_tokens = n};
    const struct splash_taps taps = {
        .size = sizeof taps, .n_layers = di->n_taps, .layers = di->tap_layers, .rows = &rows};
    enum splash_status st = splash_family_forward_taps(t->fam, t->model, &lane, 1, &taps, &err);
    if (st)
        fail_msg("taps: %s", err.msg);
    splash_family_seq_destroy(t->fam, t->model, seq);
    return rows;
}

struct agreement {
    int rows, equal;       /* every proposal row */
    int cycles, whole;     /* cycles whose 7 proposals all agree */
    int prefix_rows, prefix_equal; /* rows whose earlier proposals agree */
};

/* Teacher-forces every recorded cycle of every prompt through the draft. */
static void run_cycles(const struct splash_draft_plugin *dp, void *dm,
                       const struct splash_draft_info *di, struct test_run *t, json_t *results,
                       struct agreement *a)
{
    struct splash_err err = {{0}};
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res) {
        json_t *prompt = json_object_get(res, "prompt"), *spec = json_object_get(res, "spec");
        int32_t n = (int32_t)(json_array_size(prompt) + json_array_size(spec));
        int32_t *seq = malloc((size_t)n * sizeof *seq);
        assert_non_null(seq);
        for (int32_t j = 0; j < n; j++) {
            size_t np = json_array_size(prompt);
            json_t *v = (size_t)j < np ? json_array_get(prompt, (size_t)j)
                                       : json_array_get(spec, (size_t)j - np);
            seq[j] = (int32_t)json_integer_value(v);
        }
        float *taps = target_taps(t, di, seq, n);
        const int64_t width = (int64_t)di->n_taps * di->n_embd;
        void *ctx = NULL;
        assert_int_equal(splash_draft_ctx_create(dp, dm, &ctx, &err), SPLASH_OK);
        int32_t held = 0;
        size_t c;
        json_t *cycle;
        json_array_foreach(json_object_get(res, "cycles"), c, cycle) {
            int32_t start = (int32_t)json_integer_value(json_object_get(cycle, "start"));
            json_t *want = json_object_get(cycle, "proposals");
            assert_true(start < n && start >= held);
            assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps + held * width, width,
                                                         held, start - held, &err),
                             SPLASH_OK);
            held = start;
            int32_t got[7];
            const struct splash_draft_block b = {
                .size = sizeof b, .anchor = seq[start], .pos = start, .n_rows = 7, .tokens = got};
            if (splash_draft_propose(dp, dm, ctx, &b, &err))
                fail_msg("propose: %s", err.msg);
            int all = 1, prefix = 1;
            for (int r = 0; r < 7; r++) {
                int eq = got[r] == (int32_t)json_integer_value(json_array_get(want, (size_t)r));
                a->rows++;
                a->equal += eq;
                if (prefix) {
                    a->prefix_rows++;
                    a->prefix_equal += eq;
                }
                prefix &= eq;
                all &= eq;
            }
            a->cycles++;
            a->whole += all;
        }
        splash_draft_ctx_destroy(dp, dm, ctx);
        free(taps);
        free(seq);
    }
}

static json_t *load_decode(void)
{
    char path[512];
    json_error_t je;
    json_t *d = json_load_file(
        test_testdata_path(path, sizeof path, "drafts/qwen35-stories-DFlash2.decode.json"), 0,
        &je);
    if (!d)
        fail_msg("decode.json: %s", je.text);
    return d;
}

/* keep_stored: 1 the exact F32 path, 0 the projections in af4g64. */
static void agreement_run(int keep_stored, double min_rows)
{
    struct test_run t;
    open_target(&t);
    struct splash_meta *dmeta = open_draft();
    const struct splash_draft_plugin *dp = NULL;
    struct splash_draft_verdict v;
    struct splash_err err = {{0}};
    if (splash_draft_select(splash_registry_global(), dmeta, t.meta, &dp, &v, &err))
        fail_msg("select: %s", err.msg);
    assert_string_equal(v.architecture, "DFlash2");
    void *dm = NULL;
    struct splash_draft_info di;
    const struct splash_draft_opts o = {.pool = pool, .keep_stored = keep_stored};
    if (splash_draft_create(splash_registry_global(), dp, dmeta, t.meta, &o, &dm, &di, &err))
        fail_msg("create: %s", err.msg);
    assert_int_equal(di.block_size, 8);
    assert_int_equal(di.n_taps, 4);
    json_t *d = load_decode();
    struct agreement a = {0};
    run_cycles(dp, dm, &di, &t, json_object_get(d, "results"), &a);
    printf("draft %s: %d/%d proposal rows equal the reference's (%.1f%%), %d/%d rows after "
           "an agreeing prefix (%.1f%%), %d/%d cycles whole\n",
           keep_stored ? "as stored (F32)" : "af4g64", a.equal, a.rows, 100.0 * a.equal / a.rows,
           a.prefix_equal, a.prefix_rows, 100.0 * a.prefix_equal / a.prefix_rows, a.whole,
           a.cycles);
    assert_int_equal(a.cycles, 317);
    assert_true((double)a.equal / a.rows >= min_rows);
    json_decref(d);
    splash_draft_destroy(dp, dm);
    splash_meta_close(dmeta);
    test_run_close(&t);
}

static void test_proposals_match_reference_f32(void **state)
{
    agreement_run(1, 0.98);
}

static void test_proposals_match_reference_af4g64(void **state)
{
    agreement_run(0, 0.88);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proposals_match_reference_f32),
        cmocka_unit_test(test_proposals_match_reference_af4g64),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
