/* The pq2 plugin (Q2_0, PQ2_0) and the Hadamard helper of include/splash/hadamard.h.
 *
 * Q2_0 is checked against ggml's vectors (../shared/testdata/quant/q2_0.*, README.md
 * section 5): dequantization bit for bit, the quantizer byte for byte, every kernel
 * row's dot product against ggml's vec_dot. PQ2_0 and the rotation have no reference
 * files: they are checked against values worked out by hand from their definitions
 * (models.md "PQ2_0"). Every SIMD row is compared with the scalar row on random data,
 * mul_rows with 1..9 activation rows included. */
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
#include "splash/act.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "splash/hadamard.h"
#include "tests/support/formats.h"
#include "tests/support/identical.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#if defined(__x86_64__)
/* The AVX2 transform, from this test's AVX2 unit (test-format-pq2_avx2.c). */
void test_hadamard_1024_avx2(float *x, const int8_t *signs);
#endif

#define REF_ROWS 8
#define REF_N 1024

/* Deterministic generator (splitmix64), so failures reproduce. */
static uint64_t rng_state = 0x5EED0042u;

static uint64_t rng_next(void)
{
    return test_splitmix64(&rng_state);
}

static float rng_uniform(void) /* [0, 1) */
{
    return test_splitmix_uniform(&rng_state);
}

/* Why this tolerance: a kernel forms each Q8_0 block's Σ (q - 1) a exactly in
 * integers and only scales (d_w d_a: two roundings) and accumulates in float, in
 * an order of its own (the SIMD rows keep 8 or 16 lane sums). Each result is then
 * within (n / 32 + 16) * 2^-24 * Σ |w a| of the exact sum; two kernels differ by at
 * most twice that. For n = 1024 that is 5.7e-6 of Σ |w a|, while a wrong code, code
 * order or scale moves a dot by O(1e-2) of it or more. */
static double dot_tol(int64_t n, double sum_abs)
{
    return 2.0 * ((double)n / 32.0 + 16.0) * ldexp(1.0, -24) * sum_abs + 1e-30;
}

/* ---- descriptors -------------------------------------------------------- */

static void test_pq2_descriptors_are_consistent(void **state)
{
    (void)state;
    const struct splash_format_type *q2 = test_format_find("Q2_0");
    const struct splash_format_type *pq2 = test_format_find("PQ2_0");
    assert_ptr_equal(splash_registry_format_by_gguf(test_formats_registry(), 42), q2);
    assert_ptr_equal(splash_registry_format_by_gguf(test_formats_registry(), 142), pq2);
    assert_int_equal(q2->block_elems, 64);
    assert_int_equal(q2->block_bytes, 18);
    assert_int_equal(pq2->block_elems, 128);
    assert_int_equal(pq2->block_bytes, 34);
    assert_true(fabsf(q2->bits_per_weight - 2.25f) < 1e-6f);
    assert_true(fabsf(pq2->bits_per_weight - 2.125f) < 1e-6f);
    const struct splash_format_type *types[] = {q2, pq2};
    for (int t = 0; t < 2; t++) {
        const struct splash_format_type *f = types[t];
        assert_string_equal(f->act_type, "Q8_0");
        assert_non_null(f->validate);
        assert_non_null(f->to_float);
        assert_non_null(f->from_float);
        assert_null(f->mlx_mode);
        assert_true(f->n_rows >= 1);
        assert_int_equal(f->rows[f->n_rows - 1].cpu_requires, 0);
        assert_string_equal(f->rows[f->n_rows - 1].isa, "scalar");
#if defined(__x86_64__)
        assert_int_equal(f->n_rows, 3);
        assert_string_equal(f->rows[0].isa, "avx512vnni");
        assert_string_equal(f->rows[1].isa, "avx2");
        assert_non_null(f->rows[0].mul_rows);
        assert_non_null(f->rows[1].mul_rows);
#endif
    }
}

/* ---- Q2_0 against ggml ---------------------------------------------------- */

static void test_q2_0_to_float_matches_ggml_bitwise(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q2_0");
    const size_t n = (size_t)REF_ROWS * REF_N;
    uint8_t *q = test_quant_load("q2_0", "q", REF_ROWS * 288, NULL);
    float *want = test_quant_load("q2_0", "deq.f32", n * sizeof(float), NULL);
    float *got = malloc(n * sizeof(float));
    assert_non_null(got);
    f->to_float(q, got, (int64_t)n);
    assert_int_equal(test_count_float_mismatches("", got, want, n, REF_N), 0);
    free(got);
    free(want);
    free(q);
}

static void test_q2_0_from_float_matches_ggml_bytewise(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q2_0");
    const size_t n = (size_t)REF_ROWS * REF_N;
    float *src = test_quant_load("q2_0", "src.f32", n * sizeof(float), NULL);
    uint8_t *want = test_quant_load("q2_0", "q", REF_ROWS * 288, NULL);
    uint8_t *got = malloc(REF_ROWS * 288);
    assert_non_null(got);
    for (int r = 0; r < REF_ROWS; r++)
        f->from_float(src + (size_t)r * REF_N, got + (size_t)r * 288, REF_N, NULL);
    assert_int_equal(test_count_byte_mismatches("", got, want, REF_ROWS * 288, 18), 0);
    free(got);
    free(want);
    free(src);
}

static void test_q2_0_vec_dot_matches_ggml_per_row(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q2_0");
    const size_t n = (size_t)REF_ROWS * REF_N;
    const size_t act_row_bytes = REF_N / 32 * sizeof(struct splash_q8_0_block);
    uint8_t *q = test_quant_load("q2_0", "q", REF_ROWS * 288, NULL);
    float *deq = test_quant_load("q2_0", "deq.f32", n * sizeof(float), NULL);
    uint8_t *actq = test_quant_load("q2_0", "actq", REF_ROWS * act_row_bytes, NULL);
    float *want = test_quant_load("q2_0", "dot.f32", REF_ROWS * REF_ROWS * sizeof(float), NULL);
    float *act_deq = malloc(n * sizeof(float));
    assert_non_null(act_deq);
    for (int j = 0; j < REF_ROWS; j++)
        test_q8_0_to_float((const void *)(actq + j * act_row_bytes), act_deq + (size_t)j * REF_N,
                           REF_N);
    int tested = 0;
    for (uint32_t r = 0; r < f->n_rows; r++) {
        const struct splash_kernel_row *row = &f->rows[r];
        if (!test_row_runs_here(row))
            continue;
        tested++;
        double worst = 0;
        for (int i = 0; i < REF_ROWS; i++) {
            for (int j = 0; j < REF_ROWS; j++) {
                float got = NAN;
                row->vec_dot(REF_N, &got, q + i * 288, actq + j * act_row_bytes);
                const double ref = want[i * REF_ROWS + j];
                const double sa =
                    test_abs_dot(deq + (size_t)i * REF_N, act_deq + (size_t)j * REF_N, REF_N);
                const double err = fabs(got - ref);
                if (!(err <= dot_tol(REF_N, sa)))
                    fail_msg("Q2_0 %s: dot(w%d, a%d) = %.9g, ggml %.9g (|err| %.3g, tol %.3g)",
                             row->isa, i, j, got, ref, err, dot_tol(REF_N, sa));
                worst = fmax(worst, err / sa);
            }
        }
        fprintf(stderr, "  Q2_0 %s: max |dot - ggml| / sum|w a| = %.3g\n", row->isa, worst);
    }
    assert_true(tested >= 1);
    free(act_deq);
    free(want);
    free(actq);
    free(deq);
    free(q);
}

/* ---- validate ----------------------------------------------------------- */

static void test_q2_0_validate_rejects_bad_blocks(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q2_0");
    uint8_t *q = test_quant_load("q2_0", "q", REF_ROWS * 288, NULL);
    struct splash_err err = {{0}};
    assert_int_equal(f->validate(q, REF_ROWS * 288, REF_ROWS * REF_N, &err), SPLASH_OK);

    assert_int_equal(f->validate(q, 287, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q2_0: 287 bytes for 1024 values, expected 288");
    assert_int_equal(f->validate(q, 288, 1000, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q2_0: 1000 values is not a whole number of 64-value blocks");

    uint8_t bad[288];
    memcpy(bad, q, sizeof bad);
    bad[3 * 18] = 0x01;
    bad[3 * 18 + 1] = 0x7e; /* d = NaN (0x7e01) */
    assert_int_equal(f->validate(bad, sizeof bad, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q2_0 block 3: scale d is NaN");
    memcpy(bad, q, sizeof bad);
    bad[15 * 18] = 0x00;
    bad[15 * 18 + 1] = 0xfc; /* d = -Inf */
    assert_int_equal(f->validate(bad, sizeof bad, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q2_0 block 15: scale d is Inf");

    const struct splash_format_type *p = test_format_find("PQ2_0");
    assert_int_equal(p->validate(q, 288, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "PQ2_0: 288 bytes for 1024 values, expected 272");
    assert_int_equal(p->validate(q, 272, 64, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "PQ2_0: 64 values is not a whole number of 128-value blocks");
    free(q);
}

/* ---- PQ2_0 by hand ------------------------------------------------------- */

/* One block, d = 0.5 (fp16 0x3800). Code byte 0 is 0x1B = codes 3, 2, 1, 0 from the
 * low bits up, so elements 0..3 are 1.0, 0.5, 0, -0.5; every other byte is 0xE4 =
 * codes 0, 1, 2, 3: elements 4k .. 4k + 3 are -0.5, 0, 0.5, 1.0. */
static void test_pq2_0_to_float_by_hand(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("PQ2_0");
    uint8_t b[34];
    b[0] = 0x00;
    b[1] = 0x38;
    b[2] = 0x1B;
    memset(b + 3, 0xE4, 31);
    float out[128];
    f->to_float(b, out, 128);
    const float first[8] = {1.0f, 0.5f, 0.0f, -0.5f, -0.5f, 0.0f, 0.5f, 1.0f};
    for (int j = 0; j < 8; j++)
        assert_true(out[j] == first[j]);
    assert_true(out[124] == -0.5f && out[125] == 0.0f && out[126] == 0.5f && out[127] == 1.0f);

    /* Dot with 4 Q8_0 blocks, d = 1 and a_j = 1 for all j: 0.5 * Σ (q - 1) = 0.5 * 32
     * groups * (-1 + 0 + 1 + 2) = 32.
     * With a_j = j % 32 - 16 and d = 0.25: over one Q8_0 block, the elements with code
     * c (j = c mod 4) sum to Σ_m (4m + c - 16) = 8c - 16, so Σ (q - 1) a = Σ_c (c - 1)
     * (8c - 16) = 16 + 0 + 0 + 16 = 32 for blocks 1..3. Block 0's first four codes are
     * reversed on a = -16..-13: 2(-16) + 1(-15) + 0 - (-13) = -34 instead of
     * 16 + 0 - 14 - 26 = -24, so it gives 22. Total 3 * 32 + 22 = 118, times
     * d_w d_a = 0.125: 14.75 (every step exact in float). */
    struct splash_q8_0_block act[4];
    for (int i = 0; i < 4; i++) {
        act[i].d = 0x3c00; /* 1.0 */
        memset(act[i].qs, 1, sizeof act[i].qs);
    }
    struct splash_q8_0_block act2[4];
    for (int i = 0; i < 4; i++) {
        act2[i].d = 0x3400; /* 0.25 */
        for (int j = 0; j < 32; j++)
            act2[i].qs[j] = (int8_t)(j - 16);
    }
    for (uint32_t r = 0; r < f->n_rows; r++) {
        if (!test_row_runs_here(&f->rows[r]))
            continue;
        float s = 0;
        f->rows[r].vec_dot(128, &s, b, act);
        assert_true(s == 32.0f);
        f->rows[r].vec_dot(128, &s, b, act2);
        if (s != 14.75f)
            fail_msg("PQ2_0 %s: got %.9g, want 14.75", f->rows[r].isa, s);
    }
}

/* ggml's rounding (d = max |x|, code = clamp(round(x / d) + 1, 0, 3), halves away from
 * zero) on a hand example: x = 2, -2, 0.9, -1.1, 1, -1, 0.3, then zeros; d = 2 (fp16
 * 0x4000); x / d = 1, -1, .45, -.55, .5, -.5, .15, 0 -> codes 2, 0, 1, 0, 2, 0, 1, 1
 * -> bytes 0x12, 0x52, then 0x55 (code 1 = 0) for the rest. */
static void test_pq2_0_from_float_by_hand(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("PQ2_0");
    float x[128] = {2.0f, -2.0f, 0.9f, -1.1f, 1.0f, -1.0f, 0.3f};
    uint8_t b[34];
    f->from_float(x, b, 128, NULL);
    assert_int_equal(b[0], 0x00);
    assert_int_equal(b[1], 0x40);
    assert_int_equal(b[2], 0x12);
    assert_int_equal(b[3], 0x52);
    for (int i = 4; i < 34; i++)
        assert_int_equal(b[i], 0x55);
    /* an all-zero block: d = 0 and every code 1 */
    float z[128] = {0};
    f->from_float(z, b, 128, NULL);
    assert_int_equal(b[0] | b[1], 0);
    for (int i = 2; i < 34; i++)
        assert_int_equal(b[i], 0x55);
}

/* ---- SIMD rows against the scalar row --------------------------------------- */

static void check_rows_against_scalar(const char *name)
{
    const struct splash_format_type *f = test_format_find(name);
    const int64_t n = 1024, n_w = 3, max_act = 9;
    const size_t w_bytes = splash_format_row_bytes(f, n);
    const size_t a_bytes = (size_t)n / 32 * sizeof(struct splash_q8_0_block);
    uint8_t *w = malloc(n_w * w_bytes);
    struct splash_q8_0_block *act = malloc(max_act * a_bytes);
    float *wf = malloc(n_w * n * sizeof(float)), *af = malloc(max_act * n * sizeof(float));
    float ref[9][3], one[9][3];
    assert_true(w && act && wf && af);
    /* random codes (all four, code 3 included) and fp16 scales of both signs */
    for (size_t i = 0; i < n_w * w_bytes; i++)
        w[i] = (uint8_t)rng_next();
    for (int64_t b = 0; b < n_w * n / f->block_elems; b++) {
        uint16_t d = splash_fp32_to_fp16((rng_uniform() - 0.5f) * 0.2f);
        w[b * f->block_bytes] = (uint8_t)d;
        w[b * f->block_bytes + 1] = (uint8_t)(d >> 8);
    }
    test_random_q8_0(&rng_state, act, max_act * n / 32);
    f->to_float(w, wf, n_w * n);
    for (int64_t j = 0; j < max_act; j++)
        test_q8_0_to_float(act + j * (n / 32), af + j * n, n);
    const struct splash_kernel_row *scalar = &f->rows[f->n_rows - 1];
    for (int64_t j = 0; j < max_act; j++)
        for (int64_t i = 0; i < n_w; i++)
            scalar->vec_dot(n, &ref[j][i], w + i * w_bytes, act + j * (n / 32));
    for (uint32_t r = 0; r + 1 < f->n_rows; r++) {
        const struct splash_kernel_row *row = &f->rows[r];
        if (!test_row_runs_here(row)) {
            fprintf(stderr, "  %s %s: not supported by this CPU, skipped\n", name, row->isa);
            continue;
        }
        double worst = 0;
        for (int64_t j = 0; j < max_act; j++) {
            for (int64_t i = 0; i < n_w; i++) {
                float s = NAN;
                row->vec_dot(n, &s, w + i * w_bytes, act + j * (n / 32));
                one[j][i] = s;
                const double sa = test_abs_dot(wf + i * n, af + j * n, n);
                if (!(fabs(s - ref[j][i]) <= dot_tol(n, sa)))
                    fail_msg("%s %s vec_dot(w%d, a%d) = %.9g, scalar %.9g", name, row->isa,
                             (int)i, (int)j, s, ref[j][i]);
                worst = fmax(worst, fabs(s - ref[j][i]) / sa);
            }
        }
        /* mul_rows with 1..9 activation rows, out_stride 5 (> n_w) */
        const struct test_rows rows = {n, w, w_bytes, n_w, act, a_bytes, max_act};
        const struct test_mul_rows_rule rule = {.vec_dot = "its vec_dot", .out_stride = 5};
        test_mul_rows_match(name, row, &rows, &rule, &one[0][0]);
        fprintf(stderr, "  %s %s: max |simd - scalar| / sum|w a| = %.3g\n", name, row->isa, worst);
    }
    free(af);
    free(wf);
    free(act);
    free(w);
}

static void test_q2_0_simd_rows_match_scalar(void **state)
{
    (void)state;
    check_rows_against_scalar("Q2_0");
}

static void test_pq2_0_simd_rows_match_scalar(void **state)
{
    (void)state;
    check_rows_against_scalar("PQ2_0");
}

/* ---- the Hadamard rotation --------------------------------------------- */

static int popcount_parity(unsigned v)
{
    int p = 0;
    for (; v; v &= v - 1)
        p ^= 1;
    return p;
}

/* H e_k is column k of H_1024 / 32: entry i is (-1)^popcount(i & k) / 32 (Sylvester
 * order), exactly; with signs, H D e_k = sign_k H e_k. */
static void test_hadamard_unit_vectors_give_walsh_columns(void **state)
{
    (void)state;
    static float x[1024];
    static int8_t signs[1024];
    for (int i = 0; i < 1024; i++)
        signs[i] = (i * 7 + 3) % 5 < 2 ? -1 : 1;
    const int ks[] = {0, 1, 2, 5, 8, 100, 512, 1023};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        const int k = ks[t];
        for (int pass = 0; pass < 2; pass++) {
            memset(x, 0, sizeof x);
            x[k] = 1.0f;
            splash_hadamard_1024(x, pass ? signs : NULL);
            const float sk = pass && signs[k] < 0 ? -1.0f : 1.0f;
            for (int i = 0; i < 1024; i++) {
                const float want = sk * (popcount_parity((unsigned)(i & k)) ? -1.0f : 1.0f) / 32;
                if (x[i] != want)
                    fail_msg("H e_%d [%d] = %.9g, want %.9g (signs %d)", k, i, x[i], want, pass);
            }
        }
    }
}

/* H is symmetric and orthonormal, so H H = I: applying it twice to every unit vector
 * gives the vector back exactly (every intermediate is a multiple of 1/32). */
static void test_hadamard_is_an_involution(void **state)
{
    (void)state;
    static float x[1024];
    for (int k = 0; k < 1024; k++) {
        memset(x, 0, sizeof x);
        x[k] = 1.0f;
        splash_hadamard_1024(x, NULL);
        splash_hadamard_1024(x, NULL);
        for (int i = 0; i < 1024; i++)
            if (x[i] != (i == k ? 1.0f : 0.0f))
                fail_msg("H H e_%d [%d] = %.9g", k, i, x[i]);
    }
    /* and a random row of two blocks: H (D (D^-1 ... )) = round trip within rounding;
     * the norm is kept (orthonormal) */
    static float r[2048], r0[2048];
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 2048; i++) {
        r[i] = r0[i] = rng_uniform() * 2 - 1;
        n0 += (double)r[i] * r[i];
    }
    assert_int_equal(splash_hadamard_rotate(r, 2048, NULL), 0);
    for (int i = 0; i < 2048; i++)
        n1 += (double)r[i] * r[i];
    assert_true(fabs(n1 - n0) <= 1e-5 * n0);
    assert_int_equal(splash_hadamard_rotate(r, 2048, NULL), 0);
    for (int i = 0; i < 2048; i++)
        assert_true(fabsf(r[i] - r0[i]) <= 1e-6f);
    assert_int_equal(splash_hadamard_rotate(r, 1000, NULL), -1);
}

/* The 1024-point transform against the plain O(n^2) definition on random data. */
static void test_hadamard_matches_definition(void **state)
{
    (void)state;
    static float x[1024], y[1024];
    static int8_t signs[1024];
    for (int i = 0; i < 1024; i++) {
        x[i] = rng_uniform() * 4 - 2;
        signs[i] = (rng_next() & 1) ? -1 : 1;
    }
    memcpy(y, x, sizeof x);
    splash_hadamard_1024(y, signs);
    for (int i = 0; i < 1024; i++) {
        double s = 0;
        for (int k = 0; k < 1024; k++)
            s += (popcount_parity((unsigned)(i & k)) ? -1.0 : 1.0) * signs[k] * x[k];
        s /= 32;
        if (fabs(y[i] - s) > 1e-5)
            fail_msg("(H D x)[%d] = %.9g, definition %.9g", i, y[i], s);
    }
    /* packed sign bits expand LSB first, 1 = negative */
    const uint8_t bits[2] = {0x05, 0x80};
    int8_t s16[16];
    splash_hadamard_signs_from_bits(bits, s16, 16);
    const int8_t want[16] = {-1, 1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1};
    assert_memory_equal(s16, want, 16);
}

static void test_hadamard_avx2_matches_portable_bitwise(void **state)
{
    (void)state;
#if defined(__x86_64__)
    if (!test_cpu_has(SPLASH_CPU_AVX2, "splash_hadamard_1024_avx2")) {
        print_message("  no AVX2 on this CPU: skipped\n");
        skip();
    }
    static float a[1024], b[1024];
    static int8_t signs[1024];
    for (int rep = 0; rep < 4; rep++) {
        for (int i = 0; i < 1024; i++) {
            a[i] = b[i] = (rng_uniform() - 0.5f) * (float)(1 << (rep * 4));
            signs[i] = (int8_t)((rng_next() % 3) - 1); /* -1, 0, 1: only < 0 flips */
        }
        splash_hadamard_1024_c(a, rep & 1 ? signs : NULL);
        test_hadamard_1024_avx2(b, rep & 1 ? signs : NULL);
        for (int i = 0; i < 1024; i++)
            if (splash_fp32_to_bits(a[i]) != splash_fp32_to_bits(b[i]))
                fail_msg("rep %d elem %d: C %.9g, AVX2 %.9g", rep, i, a[i], b[i]);
    }
    print_message("  AVX2 transform = portable transform, bit for bit (4 x 1024 values)\n");
#else
    skip(); /* AVX2 is x86-64's */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pq2_descriptors_are_consistent),
        cmocka_unit_test(test_q2_0_to_float_matches_ggml_bitwise),
        cmocka_unit_test(test_q2_0_from_float_matches_ggml_bytewise),
        cmocka_unit_test(test_q2_0_vec_dot_matches_ggml_per_row),
        cmocka_unit_test(test_q2_0_validate_rejects_bad_blocks),
        cmocka_unit_test(test_pq2_0_to_float_by_hand),
        cmocka_unit_test(test_pq2_0_from_float_by_hand),
        cmocka_unit_test(test_q2_0_simd_rows_match_scalar),
        cmocka_unit_test(test_pq2_0_simd_rows_match_scalar),
        cmocka_unit_test(test_hadamard_unit_vectors_give_walsh_columns),
        cmocka_unit_test(test_hadamard_is_an_involution),
        cmocka_unit_test(test_hadamard_matches_definition),
        cmocka_unit_test(test_hadamard_avx2_matches_portable_bitwise),
    };
    return cmocka_run_group_tests(tests, test_formats_setup, test_formats_teardown);
}
