/* Q3_K_R16, the load-time 16-row layout of Q3_K: repack and to_float against ggml's
 * reference blocks and their dequantized values (../shared/testdata/quant, README.md
 * section 5), every kernel row's mul_rows against double-precision dot products of
 * those values, the AVX-512 row against the scalar row, and validate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/kquants/q8_blocks.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define Q3K_BLOCK 110
#define REF_ROWS 8
#define REF_N 1024
#define REF_NB (REF_N / 256)
#define N_BLOCKS_REF (REF_ROWS * REF_NB)
#define MAX_ROWS 40

/* Dot products against exact float64 sums of the reference values: both kernels form
 * each (sub-)block's integer sum exactly, so they differ from the exact dot only by float
 * rounding of the scaled sums and their accumulation (a few dozen roundings of 2^-24 of
 * partial sums bounded by sum |w a|) and by the reference dequantization, which rounds
 * (d * scale) * q twice per value (2^-23 relative at most). 1e-5 of sum |w a| is >10x that
 * bound and far below any layout error (a wrong level, scale or row moves a dot by
 * O(1e-2) of sum |w a| or more). */
#define DOT_TOL 1e-5
/* The AVX-512 row against the scalar row: the same integer sums, float steps in a
 * different order (per sub-block vs per block; the scalar row keeps the block's sum an
 * integer): a few roundings of 2^-24. */
#define ROW_TOL 2e-6

static uint8_t *ref_q;   /* ggml's Q3_K blocks, [8 rows][4 blocks] */
static float *ref_deq;   /* their values */
static const struct splash_format_type *r16, *q3k, *q8k;

static int setup(void **state)
{
    if (test_formats_setup(state))
        return -1;
    ref_q = test_quant_load("q3_K", "q", (size_t)N_BLOCKS_REF * Q3K_BLOCK, NULL);
    ref_deq = test_quant_load("q3_K", "deq.f32", (size_t)REF_ROWS * REF_N * sizeof(float), NULL);
    r16 = test_format_find("Q3_K_R16");
    q3k = test_format_find("Q3_K");
    q8k = test_format_find("Q8_K");
    return 0;
}

static int teardown(void **state)
{
    free(ref_q);
    free(ref_deq);
    return test_formats_teardown(state);
}

/* Reference block used at block b of matrix row i: the 32 reference blocks shuffled, so
 * that rows of a group differ and every reference block appears in many positions. */
static int ref_block(int i, int b)
{
    return (i * 7 + b * 13 + i / 5) % N_BLOCKS_REF;
}

/* n_rows plain rows of REF_N values from the reference blocks, and their values. */
static void make_matrix(int n_rows, uint8_t *plain, float *values)
{
    for (int i = 0; i < n_rows; i++)
        for (int b = 0; b < REF_NB; b++) {
            const int k = ref_block(i, b);
            memcpy(plain + ((size_t)i * REF_NB + b) * Q3K_BLOCK, ref_q + (size_t)k * Q3K_BLOCK,
                   Q3K_BLOCK);
            if (values)
                memcpy(values + (size_t)i * REF_N + b * 256, ref_deq + (size_t)k * 256,
                       256 * sizeof(float));
        }
}

/* n_act random activation rows of n values quantized by the registry's Q8_K, and their
 * values d * q. */
static void make_acts(uint64_t seed, int64_t n, int n_act, struct q8_k_block *q, float *values)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int j = 0; j < n_act; j++) {
        for (int64_t k = 0; k < n; k++)
            x[k] = 2.0f * test_splitmix_uniform(&seed) - 1.0f + (k % 97 == 0 ? 5.0f : 0.0f);
        q8k->from_float(x, q + j * (n / 256), n, NULL);
    }
    for (int64_t b = 0; b < n_act * (n / 256); b++)
        for (int k = 0; k < 256; k++)
            values[b * 256 + k] = q[b].d * q[b].qs[k];
    free(x);
}

static void test_q3k_r16_descriptor_matches_q3k(void **state)
{
    (void)state;
    assert_true(r16->flags & SPLASH_FORMAT_REPACKED);
    assert_int_equal(r16->gguf_type, -1);
    assert_int_equal(r16->row_group, 16);
    assert_int_equal(r16->block_elems, 16 * q3k->block_elems);
    assert_int_equal(r16->block_bytes, 16 * q3k->block_bytes);
    assert_true(r16->bits_per_weight == q3k->bits_per_weight);
    assert_float_equal(r16->bits_per_weight, 3.4375, 0);
    assert_string_equal(r16->act_type, "Q8_K");
    assert_int_equal(r16->rows[r16->n_rows - 1].cpu_requires, 0);
    assert_string_equal(r16->rows[r16->n_rows - 1].isa, "scalar");
    for (uint32_t k = 0; k < r16->n_rows; k++)
        assert_non_null(r16->rows[k].mul_rows);
    assert_non_null(q3k->repack);
    assert_non_null(q3k->repack_to);
    assert_string_equal(q3k->repack_to, "Q3_K_R16");
}

/* Whole groups decode to the reference values bit for bit; tail rows stay plain. */
static void test_q3k_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    const int n_rows = MAX_ROWS; /* 2 groups and 8 tail rows */
    const size_t bytes = (size_t)n_rows * REF_NB * Q3K_BLOCK;
    uint8_t *plain = malloc(bytes), *img = malloc(bytes);
    float *want = malloc((size_t)n_rows * REF_N * sizeof *want);
    float *got = malloc(16 * 256 * sizeof *got);
    make_matrix(n_rows, plain, want);
    memset(img, 0xA5, bytes);
    q3k->repack(REF_N, plain, n_rows, img);
    size_t bad = 0;
    for (int g = 0; g < n_rows / 16; g++)
        for (int b = 0; b < REF_NB; b++) {
            r16->to_float(img + ((size_t)g * REF_NB + b) * r16->block_bytes, got,
                          r16->block_elems);
            for (int r = 0; r < 16; r++)
                for (int j = 0; j < 256; j++) {
                    const float w = want[(size_t)(16 * g + r) * REF_N + 256 * b + j];
                    const float v = got[r * 256 + j];
                    if (memcmp(&w, &v, sizeof w) && bad++ < 5)
                        fprintf(stderr, "group %d block %d row %d value %d: %.9g, want %.9g\n",
                                g, b, r, j, v, w);
                }
        }
    assert_int_equal(bad, 0);
    const size_t groups = (size_t)(n_rows / 16) * 16 * REF_NB * Q3K_BLOCK;
    assert_memory_equal(img + groups, plain + groups, bytes - groups);
    free(plain);
    free(img);
    free(want);
    free(got);
}

/* Every kernel row's mul_rows on repacked reference rows against float64 dots. */
static void test_q3k_r16_mul_rows_match_reference_dots(void **state)
{
    (void)state;
    static const int n_acts[] = {1, 2, 7, 8, 9, 16, 17, 33};
    static const int n_ws[] = {16, 32, 40, 19};
    const int max_act = 33;
    const size_t row_bytes = REF_NB * Q3K_BLOCK;
    uint8_t *plain = malloc(MAX_ROWS * row_bytes), *img = malloc(MAX_ROWS * row_bytes);
    float *wf = malloc((size_t)MAX_ROWS * REF_N * sizeof *wf);
    struct q8_k_block *act = malloc((size_t)max_act * REF_NB * sizeof *act);
    float *af = malloc((size_t)max_act * REF_N * sizeof *af);
    const size_t out_stride = MAX_ROWS + 3;
    float *out = malloc((size_t)max_act * out_stride * sizeof *out);
    make_acts(0x5EED3001, REF_N, max_act, act, af);
    int ran = 0;
    for (uint32_t k = 0; k < r16->n_rows; k++) {
        const struct splash_kernel_row *row = &r16->rows[k];
        if (!test_row_runs_here(row)) {
            fprintf(stderr, "  Q3_K_R16 %s: not on this CPU, skipped\n", row->isa);
            continue;
        }
        double worst = 0;
        for (size_t a = 0; a < sizeof n_ws / sizeof n_ws[0]; a++) {
            const int n_w = n_ws[a];
            make_matrix(n_w, plain, wf);
            q3k->repack(REF_N, plain, n_w, img);
            for (size_t c = 0; c < sizeof n_acts / sizeof n_acts[0]; c++) {
                const int n_act = n_acts[c];
                for (size_t e = 0; e < (size_t)max_act * out_stride; e++)
                    out[e] = -12345.0f;
                row->mul_rows(REF_N, img, row_bytes, n_w, act, sizeof *act * REF_NB, n_act, out,
                              out_stride);
                for (int j = 0; j < max_act; j++)
                    for (size_t i = 0; i < out_stride; i++) {
                        const float o = out[j * out_stride + i];
                        if (j >= n_act || (int)i >= n_w) {
                            if (o != -12345.0f)
                                fail_msg("%s n_w %d n_act %d: wrote out[%d][%zu]", row->isa,
                                         n_w, n_act, j, i);
                            continue;
                        }
                        double want = 0;
                        const float *w = wf + i * REF_N, *x = af + (size_t)j * REF_N;
                        for (int t = 0; t < REF_N; t++)
                            want += (double)w[t] * x[t];
                        const double scale = test_abs_dot(w, x, REF_N);
                        const double rel = fabs(o - want) / scale;
                        if (rel > worst)
                            worst = rel;
                        if (rel > DOT_TOL)
                            fail_msg("%s n_w %d n_act %d: row %zu act %d: %.9g, want %.9g "
                                     "(%.3g of sum |w a|)",
                                     row->isa, n_w, n_act, i, j, o, want, rel);
                    }
            }
        }
        fprintf(stderr, "  Q3_K_R16 %s: worst %.3g of sum |w a|\n", row->isa, worst);
        ran++;
    }
    assert_true(ran >= 1);
    free(plain);
    free(img);
    free(wf);
    free(act);
    free(af);
    free(out);
}

/* Random blocks (every level, scale and sign pattern), 3 groups and a tail, longer rows:
 * each SIMD row within ROW_TOL of the scalar row. */
static void test_q3k_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    const int64_t n = 2048, nb = n / 256;
    const int n_w = 53, max_act = 17;
    const size_t row_bytes = (size_t)nb * Q3K_BLOCK;
    uint8_t *plain = malloc(n_w * row_bytes), *img = malloc(n_w * row_bytes);
    uint64_t seed = 0x5EED3002;
    for (size_t b = 0; b < (size_t)n_w * nb; b++) {
        uint8_t *p = plain + b * Q3K_BLOCK;
        for (int k = 0; k < Q3K_BLOCK; k++)
            p[k] = (uint8_t)test_splitmix64(&seed);
        const uint16_t d = splash_fp32_to_fp16(1e-3f * (0.5f + test_splitmix_uniform(&seed)));
        memcpy(p + Q3K_BLOCK - 2, &d, 2);
    }
    q3k->repack(n, plain, n_w, img);
    float *wf = malloc((size_t)n_w * n * sizeof *wf);
    q3k->to_float(plain, wf, (int64_t)n_w * n);
    struct q8_k_block *act = malloc((size_t)max_act * nb * sizeof *act);
    float *af = malloc((size_t)max_act * n * sizeof *af);
    make_acts(0x5EED3003, n, max_act, act, af);
    float *want = malloc((size_t)max_act * n_w * sizeof *want);
    float *got = malloc((size_t)max_act * n_w * sizeof *got);
    const struct splash_kernel_row *ref = &r16->rows[r16->n_rows - 1];
    ref->mul_rows(n, img, row_bytes, n_w, act, sizeof *act * nb, max_act, want, n_w);
    for (uint32_t k = 0; k + 1 < r16->n_rows; k++) {
        const struct splash_kernel_row *row = &r16->rows[k];
        if (!test_row_runs_here(row)) {
            fprintf(stderr, "  Q3_K_R16 %s: not on this CPU, skipped\n", row->isa);
            continue;
        }
        double worst = 0;
        for (int n_act = 1; n_act <= max_act; n_act++) {
            row->mul_rows(n, img, row_bytes, n_w, act, sizeof *act * nb, n_act, got, n_w);
            for (int j = 0; j < n_act; j++)
                for (int i = 0; i < n_w; i++) {
                    const double scale =
                        test_abs_dot(wf + (size_t)i * n, af + (size_t)j * n, n);
                    const double rel = fabs(got[j * n_w + i] - want[j * n_w + i]) / scale;
                    if (rel > worst)
                        worst = rel;
                    if (rel > ROW_TOL)
                        fail_msg("%s n_act %d: row %d act %d: %.9g, scalar %.9g", row->isa,
                                 n_act, i, j, got[j * n_w + i], want[j * n_w + i]);
                }
        }
        fprintf(stderr, "  Q3_K_R16 %s vs scalar: worst %.3g of sum |w a|\n", row->isa, worst);
    }
    free(plain);
    free(img);
    free(wf);
    free(act);
    free(af);
    free(want);
    free(got);
}

static void test_q3k_r16_validate_refuses_truncated_and_nan(void **state)
{
    (void)state;
    const int n_rows = 32;
    const size_t bytes = (size_t)n_rows * REF_NB * Q3K_BLOCK;
    const int64_t n_elems = (int64_t)n_rows * REF_N;
    uint8_t *plain = malloc(bytes), *img = malloc(bytes);
    make_matrix(n_rows, plain, NULL);
    q3k->repack(REF_N, plain, n_rows, img);
    struct splash_err err = {{0}};
    assert_int_equal(r16->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_int_not_equal(r16->validate(img, bytes - 1, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "Q3_K_R16"));
    assert_int_not_equal(r16->validate(img, bytes - r16->block_bytes, n_elems, &err), SPLASH_OK);
    /* not a whole number of 16-row blocks */
    assert_int_not_equal(r16->validate(img, bytes, n_elems - 256, &err), SPLASH_OK);
    /* a NaN d in row 5 of the third block */
    const uint16_t nan = 0x7E00;
    memcpy(img + 2 * r16->block_bytes + r16->block_bytes - 32 + 2 * 5, &nan, 2);
    assert_int_not_equal(r16->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 2"));
    assert_non_null(strstr(err.msg, "NaN"));
    free(plain);
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q3k_r16_descriptor_matches_q3k),
        cmocka_unit_test(test_q3k_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q3k_r16_mul_rows_match_reference_dots),
        cmocka_unit_test(test_q3k_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q3k_r16_validate_refuses_truncated_and_nan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
