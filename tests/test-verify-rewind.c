/* A verify pass and its rewind (family ABI 1.3 seq_keep_rows + seq_truncate) on the dense
 * and MoE tiny models and the trained stories model, int8 and bf16 KV, fp32 and bf16 GDN
 * state: each row of an 8-row verify forward gives the logits a token-by-token decode
 * gives at that position, bit for bit, and after truncating to any number of kept rows the
 * sequence decodes on exactly as one that was only ever fed those tokens. On the 0.8B widths
 * a verify forward hands the thread pool no more sections than a 1-row step does (and the
 * save's copy). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/modelgen/model_writer.h"
#include "core/family.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/family.h"
#include "tests/support/model_run.h"
#include "tests/support/preset.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;

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

enum { PROMPT = 21, ROWS = 8, AFTER = 3 };

/* Feeds n tokens as one lane (logits of every row into out, when given). */
static void feed(struct test_run *r, void *seq, const int32_t *t, int32_t n, int32_t pos0,
                 float *out)
{
    struct splash_lane l = {.seq = seq, .tokens = t, .n_tokens = n, .pos0 = pos0,
                            .logits = out, .logits_all = 1};
    struct splash_err err;
    if (splash_family_forward(r->fam, r->model, &l, 1, &err) != SPLASH_OK)
        fail_msg("forward: %s", err.msg);
}

static void assert_rows_equal(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)))
            fail_msg("%s: logit %lld is %.9g, token by token %.9g", what, (long long)i,
                     (double)got[i], (double)want[i]);
}

static void rewind_case(const char *fam_name, const char *file, int kv, int state_format)
{
    char path[512], label[256];
    struct test_run r;
    struct test_run_opts o = {.fam = test_family(fam_name), .pool = pool, .kv_format = kv,
                              .state_format = state_format};
    if (test_run_open(&r, &o, test_testdata_path(path, sizeof path, file), file))
        return;
    int64_t V = r.info.n_vocab;
    int32_t t[PROMPT + ROWS + AFTER];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < PROMPT + ROWS + AFTER; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((x >> 33) % (uint64_t)(V < 500 ? V : 500));
    }
    /* the reference: the prompt in one forward, then token by token */
    float *want = malloc((size_t)(ROWS + AFTER) * (size_t)V * sizeof *want);
    float *got = malloc((size_t)ROWS * (size_t)V * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    struct splash_err err;
    void *ref, *seq;
    assert_int_equal(splash_family_seq_create(r.fam, r.model, &ref, &err), SPLASH_OK);
    feed(&r, ref, t, PROMPT, 0, NULL);
    for (int i = 0; i < ROWS + AFTER; i++)
        feed(&r, ref, t + PROMPT + i, 1, PROMPT + i, want + (size_t)i * (size_t)V);
    splash_family_seq_destroy(r.fam, r.model, ref);

    for (int keep = 0; keep <= ROWS; keep++) {
        assert_int_equal(splash_family_seq_create(r.fam, r.model, &seq, &err), SPLASH_OK);
        feed(&r, seq, t, PROMPT, 0, NULL);
        assert_int_equal(splash_family_seq_keep_rows(r.fam, r.model, seq, ROWS, &err), SPLASH_OK);
        feed(&r, seq, t + PROMPT, ROWS, PROMPT, got);
        snprintf(label, sizeof label, "%s kv %d state %d, verify rows", file, kv, state_format);
        assert_rows_equal(label, got, want, (int64_t)ROWS * V);
        if (splash_family_seq_truncate(r.fam, r.model, seq, PROMPT + keep, &err) != SPLASH_OK)
            fail_msg("%s: truncate to %d kept rows: %s", file, keep, err.msg);
        /* decode on from the kept rows: the reference's rows from there */
        for (int i = keep; i < keep + AFTER; i++) {
            feed(&r, seq, t + PROMPT + i, 1, PROMPT + i, got);
            snprintf(label, sizeof label, "%s kv %d state %d, %d rows kept, token %d", file, kv,
                     state_format, keep, i);
            assert_rows_equal(label, got, want + (size_t)i * (size_t)V, V);
        }
        splash_family_seq_destroy(r.fam, r.model, seq);
    }
    free(want);
    free(got);
    test_run_close(&r);
}

static void test_rewind_dense(void **state)
{
    (void)state;
    rewind_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, SPLASH_STATE_F32);
    rewind_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_BF16, SPLASH_STATE_F32);
    rewind_case("qwen_hybrid", "models/qwen35-tiny-Q8_0.gguf", SPLASH_KV_INT8, SPLASH_STATE_BF16);
    rewind_case("qwen_hybrid", "models/qwen35-tiny-Q4_K_M.gguf", SPLASH_KV_INT8, SPLASH_STATE_F32);
}

static void test_rewind_moe(void **state)
{
    (void)state;
    rewind_case("qwen_moe", "models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_INT8, SPLASH_STATE_F32);
    rewind_case("qwen_moe", "models/qwen35moe-tiny-Q4_K_M.gguf", SPLASH_KV_BF16, SPLASH_STATE_F32);
}

static void test_rewind_stories(void **state)
{
    (void)state;
    rewind_case("qwen_hybrid", "models/qwen35-stories-Q8_0.gguf", SPLASH_KV_INT8, SPLASH_STATE_F32);
    rewind_case("qwen_hybrid", "models/qwen35-stories-Q8_0.gguf", SPLASH_KV_BF16, SPLASH_STATE_F32);
}

/* A verify pass's 8 rows on the 0.8B widths (4 layers, a small vocabulary): every matmul is
 * split over the pool for one row already, and the rest (activation quantization, the
 * gates, SwiGLU, the query split) is a few microseconds of work for 8 rows, so the verify
 * opens the 1-row step's sections and the save's copy, not one more per element-wise op
 * (each a hand-off, a time slice on a busy machine). */
static void test_verify_sections(void **state)
{
    (void)state;
    struct splash_model_shape *shape = test_preset("qwen35-0.8b");
    struct splash_err err = {{0}};
    if (splash_model_shape_parse_dims(shape, "block_count=4,vocab=4096", &err))
        fail_msg("dims: %s", err.msg);
    char path[] = "/tmp/splash-verify-sections-XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    struct splash_model_write_opts opts = {.mix = "Q8_0", .seed = 7, .pool = pool};
    if (splash_model_write(splash_registry_global(), shape, &opts, path, NULL, &err))
        fail_msg("write: %s", err.msg);
    struct test_run r;
    struct test_run_opts o = {.fam = test_family("qwen_hybrid"), .pool = pool,
                              .kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32};
    int skipped = test_run_open(&r, &o, path, "qwen35-0.8b widths");
    unlink(path);
    if (skipped)
        return;
    int32_t t[PROMPT + 1 + ROWS];
    for (int i = 0; i < PROMPT + 1 + ROWS; i++)
        t[i] = (int32_t)(i * 37 % 4096);
    float *logits = malloc((size_t)ROWS * (size_t)r.info.n_vocab * sizeof *logits);
    assert_non_null(logits);
    void *seq;
    assert_int_equal(splash_family_seq_create(r.fam, r.model, &seq, &err), SPLASH_OK);
    feed(&r, seq, t, PROMPT, 0, NULL);
    unsigned long long s0 = splash_pool_sections(pool);
    feed(&r, seq, t + PROMPT, 1, PROMPT, logits);
    unsigned long long step = splash_pool_sections(pool) - s0;
    assert_int_equal(splash_family_seq_keep_rows(r.fam, r.model, seq, ROWS, &err), SPLASH_OK);
    s0 = splash_pool_sections(pool);
    feed(&r, seq, t + PROMPT + 1, ROWS, PROMPT + 1, logits);
    unsigned long long verify = splash_pool_sections(pool) - s0;
    if (verify > step + 1)
        fail_msg("a %d-row verify opened %llu parallel sections, a 1-row step %llu", ROWS, verify,
                 step);
    splash_family_seq_destroy(r.fam, r.model, seq);
    free(logits);
    test_run_close(&r);
}

/* Outside the saved forward, a partial truncation is still refused with its reason; an
 * armed sequence refuses a forward longer than it was armed for. */
static void test_rewind_refusals(void **state)
{
    (void)state;
    char path[512];
    struct test_run r;
    struct test_run_opts o = {.fam = test_family("qwen_hybrid"), .pool = pool};
    const char *file = "models/qwen35-tiny-Q8_0.gguf";
    assert_int_equal(test_run_open(&r, &o, test_testdata_path(path, sizeof path, file), file), 0);
    int32_t t[20];
    for (int i = 0; i < 20; i++)
        t[i] = 10 + i;
    struct splash_err err;
    void *seq;
    assert_int_equal(splash_family_seq_create(r.fam, r.model, &seq, &err), SPLASH_OK);
    feed(&r, seq, t, 10, 0, NULL);
    assert_int_equal(splash_family_seq_truncate(r.fam, r.model, seq, 5, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_int_equal(splash_family_seq_keep_rows(r.fam, r.model, seq, 16, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(splash_family_seq_keep_rows(r.fam, r.model, seq, 4, &err), SPLASH_OK);
    struct splash_lane l = {.seq = seq, .tokens = t + 10, .n_tokens = 5, .pos0 = 10};
    assert_int_equal(splash_family_forward(r.fam, r.model, &l, 1, &err), SPLASH_ERR_INVALID);
    feed(&r, seq, t + 10, 4, 10, NULL);
    /* before the saved forward's first position: refused */
    assert_int_equal(splash_family_seq_truncate(r.fam, r.model, seq, 9, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_int_equal(splash_family_seq_truncate(r.fam, r.model, seq, 12, &err), SPLASH_OK);
    /* one rewind per save */
    assert_int_equal(splash_family_seq_truncate(r.fam, r.model, seq, 11, &err),
                     SPLASH_ERR_UNSUPPORTED);
    splash_family_seq_destroy(r.fam, r.model, seq);
    test_run_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewind_dense),
        cmocka_unit_test(test_rewind_moe),
        cmocka_unit_test(test_rewind_stories),
        cmocka_unit_test(test_rewind_refusals),
        cmocka_unit_test(test_verify_sections),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
