/* The float plugin: F32, F16 and BF16.
 *
 * F16 and BF16 are checked against ggml's vectors (../shared/testdata/quant/f16.*,
 * bf16.*, README.md section 5): conversion to float bit for bit, the conversion from
 * float byte for byte, the activation conversion (ggml's vec_dot_type is the weight
 * type itself) byte for byte against .actq, and every kernel row's dot product
 * against ggml's vec_dot (.dot.f32). F32 has no reference files of its own: its rows
 * run on the F16 vectors widened to F32 (the same products) against the float64
 * reference .dotref.f32. Every SIMD row is compared with the scalar row on random
 * data, tails and mul_rows with 1..9 activation rows included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"
#include "core/registry.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/identical.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define REF_ROWS 8
#define REF_N 1024

/* ---- reference vectors -------------------------------------------------------------- */

static const char *const half_types[][2] = {{"F16", "f16"}, {"BF16", "bf16"}};

static void test_float_to_float_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct splash_format_type *f = test_format_find(half_types[t][0]);
        uint16_t *q = test_quant_load(half_types[t][1], "q", REF_ROWS * REF_N * 2, NULL);
        float *deq = test_quant_load(half_types[t][1], "deq.f32", REF_ROWS * REF_N * 4, NULL);
        float *out = malloc(REF_ROWS * REF_N * sizeof(float));
        f->to_float(q, out, REF_ROWS * REF_N);
        test_assert_floats_identical(f->name, out, deq, REF_ROWS * REF_N);
        free(out);
        free(deq);
        free(q);
    }
}

static void test_float_from_float_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct splash_format_type *f = test_format_find(half_types[t][0]);
        float *src = test_quant_load(half_types[t][1], "src.f32", REF_ROWS * REF_N * 4, NULL);
        uint8_t *q = test_quant_load(half_types[t][1], "q", REF_ROWS * REF_N * 2, NULL);
        uint8_t *out = malloc(REF_ROWS * REF_N * 2);
        f->from_float(src, out, REF_ROWS * REF_N, NULL);
        test_assert_bytes_identical(f->name, out, q, REF_ROWS * REF_N * 2);
        free(out);
        free(q);
        free(src);
    }
}

/* The core converts activations with the act type's from_float: for F16 and BF16
 * that is the type itself, as ggml's vec_dot_type. */
static void test_float_act_conversion_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct splash_format_type *f = test_format_find(half_types[t][0]);
        assert_string_equal(f->act_type, f->name);
        const struct splash_format_type *act = test_format_find(f->act_type);
        float *a = test_quant_load(half_types[t][1], "act.f32", REF_ROWS * REF_N * 4, NULL);
        uint8_t *aq = test_quant_load(half_types[t][1], "actq", REF_ROWS * REF_N * 2, NULL);
        uint8_t *out = malloc(REF_ROWS * REF_N * 2);
        act->from_float(a, out, REF_ROWS * REF_N, NULL);
        test_assert_bytes_identical(f->name, out, aq, REF_ROWS * REF_N * 2);
        free(out);
        free(aq);
        free(a);
    }
}

/* Every product is exact in binary32 (F16 x F16, BF16 x BF16), so two kernels
 * differ only by the order of 1024 binary32 additions: the worst case is
 * (n - 1) u sum|wa| = 6.1e-5 sum|wa| (u = 2^-24), random-order errors grow like
 * sqrt(n) u = 1.9e-6. ggml's vec_dot is within 4.3e-8 of the float64 reference
 * (README section 5) and our rows within 7e-8 of it, so 1e-6 leaves room for other
 * summation orders while any wrong element (a product of order sum|wa| / n, about
 * 1e-3 here) fails. */
#define HALF_DOT_TOL 1e-6

static void check_rows_against(const struct splash_format_type *f, const void *w, size_t w_row,
                               const void *a, size_t a_row, const float *wf, const float *af,
                               const float *ref, double tol, const char *what)
{
    for (uint32_t r = 0; r < f->n_rows; r++) {
        const struct splash_kernel_row *row = &f->rows[r];
        if (!test_row_runs_here(row)) {
            print_message("  %s %s: not on this CPU, skipped\n", f->name, row->isa);
            continue;
        }
        double worst = 0.0;
        for (int i = 0; i < REF_ROWS; i++)
            for (int j = 0; j < REF_ROWS; j++) {
                float s = NAN;
                row->vec_dot(REF_N, &s, (const char *)w + i * w_row, (const char *)a + j * a_row);
                double scale = test_abs_dot(wf + i * REF_N, af + j * REF_N, REF_N);
                double err = fabs((double)s - (double)ref[i * REF_ROWS + j]) / scale;
                if (err > worst)
                    worst = err;
                if (!(err <= tol))
                    fail_msg("%s %s %s: dot[%d][%d] = %.9g, reference %.9g (rel %.3g > %.3g)",
                             f->name, row->isa, what, i, j, (double)s,
                             (double)ref[i * REF_ROWS + j], err, tol);
            }
        print_message("  %s %s vs %s: max |dot - ref| / sum|wa| = %.3g\n", f->name, row->isa,
                      what, worst);
    }
}

static void test_float_dot_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct splash_format_type *f = test_format_find(half_types[t][0]);
        uint16_t *q = test_quant_load(half_types[t][1], "q", REF_ROWS * REF_N * 2, NULL);
        uint16_t *aq = test_quant_load(half_types[t][1], "actq", REF_ROWS * REF_N * 2, NULL);
        float *dot = test_quant_load(half_types[t][1], "dot.f32", REF_ROWS * REF_ROWS * 4, NULL);
        float *wf = malloc(REF_ROWS * REF_N * sizeof(float));
        float *af = malloc(REF_ROWS * REF_N * sizeof(float));
        f->to_float(q, wf, REF_ROWS * REF_N);
        f->to_float(aq, af, REF_ROWS * REF_N);
        check_rows_against(f, q, REF_N * 2, aq, REF_N * 2, wf, af, dot, HALF_DOT_TOL,
                           "ggml vec_dot");
        free(af);
        free(wf);
        free(dot);
        free(aq);
        free(q);
    }
}

/* F32 rows on the F16 vectors widened to F32: the same exact products, so the
 * float64 reference of the F16 dot is F32's too. */
static void test_float_f32_dot_matches_reference(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("F32");
    assert_string_equal(f->act_type, "F32");
    uint16_t *q = test_quant_load("f16", "q", REF_ROWS * REF_N * 2, NULL);
    uint16_t *aq = test_quant_load("f16", "actq", REF_ROWS * REF_N * 2, NULL);
    float *ref = test_quant_load("f16", "dotref.f32", REF_ROWS * REF_ROWS * 4, NULL);
    float *wf = malloc(REF_ROWS * REF_N * sizeof(float));
    float *af = malloc(REF_ROWS * REF_N * sizeof(float));
    for (int k = 0; k < REF_ROWS * REF_N; k++) {
        wf[k] = splash_fp16_to_fp32(q[k]);
        af[k] = splash_fp16_to_fp32(aq[k]);
    }
    check_rows_against(f, wf, REF_N * 4, af, REF_N * 4, wf, af, ref, HALF_DOT_TOL,
                       "float64 reference");
    free(af);
    free(wf);
    free(ref);
    free(aq);
    free(q);
}

/* ---- SIMD rows against the scalar row ---------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double rng_uniform(void)
{
    return (double)(test_xorshift64(&rng_state) >> 11) * 0x1p-53;
}

static float rng_normal(void)
{
    double u1 = rng_uniform(), u2 = rng_uniform();
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* n not a multiple of any vector width, so every tail path runs. */
#define RND_N 1000 + 37
#define RND_W 5
#define RND_ACT 9

static void check_simd_rows(const struct splash_format_type *f)
{
    const int64_t n = RND_N;
    const struct splash_format_type *act = test_format_find(f->act_type);
    const size_t w_row = splash_format_row_bytes(f, n), a_row = splash_format_row_bytes(act, n);
    float *x = malloc((size_t)n * RND_ACT * sizeof(float));
    uint8_t *w = malloc(w_row * RND_W), *a = malloc(a_row * RND_ACT);
    float *wf = malloc((size_t)n * RND_W * sizeof(float)), *af = malloc((size_t)n * RND_ACT * 4);
    for (int64_t k = 0; k < n * RND_W; k++)
        x[k] = rng_normal();
    f->from_float(x, w, n * RND_W, NULL);
    f->to_float(w, wf, n * RND_W);
    for (int64_t k = 0; k < n * RND_ACT; k++)
        x[k] = rng_normal() * 3.0f;
    act->from_float(x, a, n * RND_ACT, NULL);
    act->to_float(a, af, n * RND_ACT);

    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    float want[RND_ACT][RND_W];
    for (int j = 0; j < RND_ACT; j++)
        for (int i = 0; i < RND_W; i++)
            ref->vec_dot(n, &want[j][i], w + i * w_row, a + j * a_row);

    const struct test_rows rows = {n, w, w_row, RND_W, a, a_row, RND_ACT};
    /* mul_rows with 1..9 activation rows at once, output with a stride wider than n_w */
    test_simd_rows_near_scalar(f, &rows, wf, af, &want[0][0], HALF_DOT_TOL, 0);
    free(af);
    free(wf);
    free(a);
    free(w);
    free(x);
}

static void test_float_simd_rows_match_scalar(void **state)
{
    (void)state;
    check_simd_rows(test_format_find("F32"));
    check_simd_rows(test_format_find("F16"));
    check_simd_rows(test_format_find("BF16"));
}

/* ---- metadata and validation --------------------------------------------------------------- */

static void test_float_types_describe_ggml(void **state)
{
    (void)state;
    const struct splash_format_type *f32 = test_format_find("F32"), *f16 = test_format_find("F16"),
                                    *bf16 = test_format_find("BF16");
    assert_int_equal(f32->gguf_type, 0);
    assert_int_equal(f16->gguf_type, 1);
    assert_int_equal(bf16->gguf_type, 30);
    assert_ptr_equal(splash_registry_format_by_gguf(test_formats_registry(), 30), bf16);
    assert_int_equal(f32->block_elems, 1);
    assert_int_equal(f32->block_bytes, 4);
    assert_int_equal(f16->block_bytes, 2);
    assert_int_equal(bf16->block_bytes, 2);
    assert_true(f16->flags & SPLASH_FORMAT_FLOAT);
    assert_string_equal(f16->rows[f16->n_rows - 1].isa, "scalar");
    /* BF16's widening is exact: its top 16 bits */
    uint16_t b = 0x3fc1;
    float v;
    bf16->to_float(&b, &v, 1);
    assert_true(v == 0x1.82p0f);
    /* F16 keeps Inf, NaN and subnormals */
    uint16_t h[3] = {0x7c00, 0xfe00, 0x0001};
    float hv[3];
    f16->to_float(h, hv, 3);
    assert_true(isinf(hv[0]) && hv[0] > 0);
    assert_true(isnan(hv[1]));
    assert_true(hv[2] == 0x1p-24f);
}

static void test_float_validate_rejects_bad_sizes(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    uint16_t buf[64] = {0x7c00, 0xffff}; /* any bit pattern is a value */
    assert_int_equal(test_format_find("F16")->validate(buf, 128, 64, &err), SPLASH_OK);
    assert_int_equal(test_format_find("BF16")->validate(buf, 128, 64, &err), SPLASH_OK);
    assert_int_equal(test_format_find("F32")->validate(buf, 128, 32, &err), SPLASH_OK);

    assert_int_equal(test_format_find("F16")->validate(buf, 127, 64, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "F16: 127 bytes for 64 values, expected 128");
    assert_int_equal(test_format_find("BF16")->validate(buf, 128, 65, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "BF16: 128 bytes for 65 values, expected 130");
    assert_int_equal(test_format_find("F32")->validate(buf, 100, 32, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "F32: 100 bytes for 32 values, expected 128");
    assert_int_equal(test_format_find("F32")->validate(buf, 0, -1, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "F32: negative element count -1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_types_describe_ggml),
        cmocka_unit_test(test_float_to_float_matches_ggml),
        cmocka_unit_test(test_float_from_float_matches_ggml),
        cmocka_unit_test(test_float_act_conversion_matches_ggml),
        cmocka_unit_test(test_float_dot_matches_ggml),
        cmocka_unit_test(test_float_f32_dot_matches_reference),
        cmocka_unit_test(test_float_simd_rows_match_scalar),
        cmocka_unit_test(test_float_validate_rejects_bad_sizes),
    };
    return cmocka_run_group_tests(tests, test_formats_setup, test_formats_teardown);
}
