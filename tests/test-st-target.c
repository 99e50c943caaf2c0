/* Safetensors targets (MLX, Model Optimizer) against the shared oracles in
 * ../shared/testdata/safetensors (README.md there): every decoded tensor against its
 * .decoded.json sums, teacher-forced logits against llama.cpp's for the same weights, and
 * the trained model's greedy continuation token for token. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/family.h"
#include "core/host_impl.h"
#include "core/import_mem.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "core/threadpool.h"
#include "kernels/kernels_impl.h"
#include "splash/format.h"
#include "tests/support/golden.h"
#include "tests/support/model_run.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;

static int setup(void **state)
{
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    pool = splash_pool_create(2);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    splash_pool_destroy(pool);
    return 0;
}

static struct splash_meta *open_dir_flags(const char *name, unsigned flags)
{
    char path[512], rel[256];
    snprintf(rel, sizeof rel, "safetensors/%s", name);
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    if (splash_st_target_open(splash_registry_global(), test_testdata_path(path, sizeof path, rel),
                              flags, &m, &err))
        fail_msg("%s: %s", name, err.msg);
    return m;
}

static struct splash_meta *open_dir(const char *name)
{
    return open_dir_flags(name, 0);
}

/* ---- decoded weights --------------------------------------------------------------- */

static int close_to(double a, double b, double scale, double rel)
{
    return fabs(a - b) <= rel * scale;
}

static void decoded_case(const char *name)
{
    char path[512], rel[256];
    snprintf(rel, sizeof rel, "safetensors/%s.decoded.json", name);
    json_t *ref = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    assert_non_null(ref);
    struct splash_meta *m = open_dir(name);
    const struct splash_meta_api *api = splash_meta_api_get();
    assert_int_equal(api->n_tensors(m), json_object_size(ref));
    const char *key;
    json_t *want;
    int checked = 0;
    json_object_foreach(ref, key, want) {
        const struct splash_tensor_info *t = api->tensor_find(m, key);
        if (!t)
            fail_msg("%s: %s is not mapped", name, key);
        json_t *shape = json_object_get(want, "shape");
        int64_t n = 1;
        size_t rank = json_array_size(shape);
        for (size_t d = 0; d < rank; d++) {
            int64_t v = json_integer_value(json_array_get(shape, d));
            if (t->ne[rank - 1 - d] != v)
                fail_msg("%s: %s: ne[%zu] %lld, expected %lld", name, key, rank - 1 - d,
                         (long long)t->ne[rank - 1 - d], (long long)v);
            n *= v;
        }
        assert_non_null(t->format);
        float *x = malloc((size_t)n * sizeof *x);
        t->format->to_float(t->data, x, n);
        double sum = 0, sumsq = 0;
        for (int64_t i = 0; i < n; i++) {
            sum += x[i];
            sumsq += (double)x[i] * x[i];
        }
        double ws = json_number_value(json_object_get(want, "sum")),
               wq = json_number_value(json_object_get(want, "sumsq"));
        /* 1e-4 relative: of the sum of squares, and of the sum against the values' size */
        if (!close_to(sumsq, wq, wq, 1e-4) || !close_to(sum, ws, fabs(ws) + sqrt(wq), 1e-4))
            fail_msg("%s: %s (%s): sum %.9g sumsq %.9g, expected %.9g %.9g", name, key,
                     t->type_name, sum, sumsq, ws, wq);
        int64_t row = t->ne[0];
        json_t *first = json_object_get(want, "first_row"), *last = json_object_get(want, "last_row");
        for (size_t j = 0; j < json_array_size(first); j++) {
            double a = json_number_value(json_array_get(first, j));
            double b = json_number_value(json_array_get(last, j));
            if (!close_to(x[j], a, fabs(a) + 1e-6, 1e-5) ||
                !close_to(x[n - row + (int64_t)j], b, fabs(b) + 1e-6, 1e-5))
                fail_msg("%s: %s: value %zu of the first or last row differs", name, key, j);
        }
        free(x);
        checked++;
    }
    printf("  %s: %d tensors decode to the oracle's sums\n", name, checked);
    splash_meta_close(m);
    json_decref(ref);
}

static void test_decoded_mlx(void **state)
{
    decoded_case("qwen35-stories-mlx-4bit");
}

static void test_decoded_modelopt(void **state)
{
    decoded_case("qwen35-stories-modelopt-nvfp4");
}

static void test_decoded_moe(void **state)
{
    decoded_case("qwen35moe-tiny-mlx-4bit");
}

/* ---- logits -------------------------------------------------------------------------- */

static void run_open(const char *name, unsigned flags, int kv_format, struct test_run *r)
{
    memset(r, 0, sizeof *r);
    r->meta = open_dir_flags(name, flags);
    struct splash_family_verdict v;
    struct splash_err err = {{0}};
    struct splash_model_opts o = {.pool = pool, .kv_format = kv_format,
                                  .state_format = SPLASH_STATE_F32};
    if (splash_family_select(splash_registry_global(), r->meta, &r->fam, &v, &err) ||
        splash_family_model_create(splash_registry_global(), r->fam, r->meta, &o, &r->model,
                                   &r->info, &err))
        fail_msg("%s: %s", name, err.msg);
}

/* The trained model's bound is README's "within about 0.15"; the random MoE's that of
 * the 4-bit golden files (tests/test-qwen-hybrid.c: 0.35), its argmax on 90% of rows. */
static void logits_case(const char *name, unsigned flags, double bound, int argmax_pct)
{
    struct test_golden g;
    assert_int_equal(test_golden_load_dir("safetensors", name, &g), 0);
    struct test_run r;
    run_open(name, flags, SPLASH_KV_BF16, &r);
    assert_int_equal(r.info.n_vocab, g.n_vocab);
    for (int decode = 0; decode < 2; decode++) {
        float *out = test_run_logits(&r, g.tokens, g.n_tokens, decode, NULL);
        struct test_logits_diff d = test_logits_compare(out, g.logits, g.n_tokens, g.n_vocab);
        if (getenv("ST_ROWS"))
            for (int32_t i = 0; i < g.n_tokens; i++)
                printf("    row %d: %.4f\n", i,
                       test_logits_row_diff(out + (size_t)i * g.n_vocab,
                                            g.logits + (size_t)i * g.n_vocab, g.n_vocab));
        printf("  %s%s %s max|dlogit| %.4f (row %d, bound %.2f) argmax %d/%d\n", name,
               flags & SPLASH_ST_DECODE_F32 ? " (F32)" : "", decode ? "decode " : "prefill", d.max_abs, d.worst_row, bound, d.argmax_equal,
               g.n_tokens);
        if (d.max_abs > bound || d.argmax_equal * 100 < g.n_tokens * argmax_pct)
            fail_msg("%s: max |dlogit| %.4f (bound %.2f), argmax %d/%d", name, d.max_abs, bound,
                     d.argmax_equal, g.n_tokens);
        free(out);
    }
    test_run_close(&r);
    test_golden_free(&g);
}

static void test_logits_mlx(void **state)
{
    logits_case("qwen35-stories-mlx-4bit", 0, 0.15, 95);
}

static void test_logits_modelopt(void **state)
{
    logits_case("qwen35-stories-modelopt-nvfp4", 0, 0.15, 95);
}

/* The random MoE through the kernels. The reference (an F32 GGUF) multiplies float
 * activations, as MLX does; affine formats are SPLASH_FORMAT_FINE_ACT, so their products in
 * the first layers (kernels/matmul.c: FINE_ACT_LAYERS) take split 15-bit activations
 * instead of Q8_0. With Q8_0 everywhere the rounding flipped routing near-ties (README
 * section 6): max 1.89, argmax 51/64, failing both checks. Split in layers 0-1: max 0.91,
 * 63/64 (in every layer 0.0038 and 64/64, at half the prefill speed). */
static void test_logits_moe(void **state)
{
    logits_case("qwen35moe-tiny-mlx-4bit", SPLASH_ST_DECODE_F32, 0.01, 100);
    logits_case("qwen35moe-tiny-mlx-4bit", 0, 1.0, 90);
}

/* The trained model's affine checkpoint with split activations in its first layers:
 * max 0.090 (0.129 with Q8_0 activations, seen failing this bound). */
static void test_logits_mlx_fine(void **state)
{
    logits_case("qwen35-stories-mlx-4bit", 0, 0.1, 100);
}

/* Every checkpoint decoded to F32 gives llama.cpp's F32 logits closely: the mapping alone. */
static void test_logits_f32_reference(void **state)
{
    logits_case("qwen35-stories-mlx-4bit", SPLASH_ST_DECODE_F32, 0.05, 100);
    logits_case("qwen35-stories-modelopt-nvfp4", SPLASH_ST_DECODE_F32, 0.05, 100);
}

/* Free-running greedy decoding reproduces the reference's continuation. */
static void greedy_case(const char *name)
{
    struct test_golden g;
    assert_int_equal(test_golden_load_dir("safetensors", name, &g), 0);
    struct test_run r;
    run_open(name, 0, SPLASH_KV_BF16, &r);
    struct splash_err err = {{0}};
    void *seq;
    assert_int_equal(r.fam->seq_create(r.model, &seq, &err), SPLASH_OK);
    float *logits = malloc((size_t)r.info.n_vocab * sizeof *logits);
    struct splash_lane lane = {
        .seq = seq, .tokens = g.tokens, .n_tokens = g.n_prompt, .logits = logits};
    assert_int_equal(r.fam->forward(r.model, &lane, 1, &err), SPLASH_OK);
    int32_t got[64];
    for (int32_t i = 0; i < g.n_greedy; i++) {
        got[i] = test_argmax(logits, (int32_t)r.info.n_vocab);
        if (got[i] != g.greedy[i])
            fail_msg("%s: greedy token %d: %d, the reference has %d", name, i, got[i],
                     g.greedy[i]);
        lane.tokens = &got[i];
        lane.n_tokens = 1;
        lane.pos0 = g.n_prompt + i;
        assert_int_equal(r.fam->forward(r.model, &lane, 1, &err), SPLASH_OK);
    }
    printf("  %s: %d greedy tokens as the reference\n", name, g.n_greedy);
    free(logits);
    r.fam->seq_destroy(r.model, seq);
    test_run_close(&r);
    test_golden_free(&g);
}

static void test_greedy_mlx(void **state)
{
    greedy_case("qwen35-stories-mlx-4bit");
}

static void test_greedy_modelopt(void **state)
{
    greedy_case("qwen35-stories-modelopt-nvfp4");
}

/* 1 if the kernels repack af4g64 here (a SIMD row of af4g64_R16 for this CPU). */
static int affine_repacks(void)
{
    const struct splash_format_type *f =
        splash_registry_format_by_name(splash_registry_global(), "af4g64_R16");
    if (!f || getenv("SPLASH_NO_REPACK"))
        return 0;
    const struct splash_kernel_row *row = splash_format_pick_row(f, splash_cpu_features());
    return row && row != &f->rows[f->n_rows - 1] && row->mul_rows;
}

/* Resident bytes of the whole pages inside [p, p + n). */
static size_t resident_bytes(const void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
    if (e <= b)
        return 0;
    size_t pages = (e - b) / page, in = 0;
    unsigned char *v = malloc(pages);
    assert_non_null(v);
    assert_int_equal(mincore((void *)b, e - b, v), 0);
    for (size_t i = 0; i < pages; i++)
        in += v[i] & 1;
    free(v);
    return in * page;
}

/* An MLX checkpoint's imported affine blocks give their pages back once the kernels hold
 * their repacked image: before, the plain blocks stayed resident beside it (the model's
 * weights twice). The token table, read as stored, stays. The logits are the same after
 * splash_matmul_release_images, which must keep the images it could not make again. */
static void test_import_given_back(void **state)
{
    const char *name = "qwen35-stories-mlx-4bit";
    const size_t base = splash_import_held();
    struct test_golden g;
    assert_int_equal(test_golden_load_dir("safetensors", name, &g), 0);
    struct test_run r;
    run_open(name, 0, SPLASH_KV_BF16, &r);
    size_t bytes = 0, resident = 0;
    int n = 0;
    for (size_t i = 0; i < r.meta->n_tensors; i++) {
        const struct splash_tensor_info *t = r.meta->tensors[i];
        if (!t->format || strncmp(t->format->name, "af4", 3) ||
            !strcmp(t->name, "token_embd.weight"))
            continue;
        bytes += t->n_bytes;
        resident += resident_bytes(t->data, t->n_bytes);
        n++;
    }
    printf("  %s: %d affine matrices, %zu bytes, %zu resident after the bind\n", name, n, bytes,
           resident);
    assert_true(n > 0);
    if (affine_repacks())
        assert_int_equal(resident, 0);
    float *a = test_run_logits(&r, g.tokens, g.n_tokens, 0, NULL);
    splash_matmul_release_images();
    float *b = test_run_logits(&r, g.tokens, g.n_tokens, 0, NULL);
    assert_memory_equal(a, b, (size_t)g.n_tokens * (size_t)g.n_vocab * sizeof *a);
    struct test_logits_diff d = test_logits_compare(b, g.logits, g.n_tokens, g.n_vocab);
    assert_true(d.max_abs <= 0.15);
    free(a);
    free(b);
    test_run_close(&r);
    assert_int_equal(splash_import_held(), base); /* every region unmapped */
    test_golden_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoded_mlx),     cmocka_unit_test(test_decoded_modelopt),
        cmocka_unit_test(test_decoded_moe),     cmocka_unit_test(test_logits_mlx),
        cmocka_unit_test(test_logits_modelopt), cmocka_unit_test(test_logits_moe),
        cmocka_unit_test(test_logits_mlx_fine),
        cmocka_unit_test(test_greedy_mlx),      cmocka_unit_test(test_greedy_modelopt),
        cmocka_unit_test(test_logits_f32_reference), cmocka_unit_test(test_import_given_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
