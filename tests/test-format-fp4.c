/* The mxfp4 plugin (MXFP4, MXFP4_MLX) and the nvfp4 plugin (NVFP4, NVFP4_G, FP8_E4M3).
 *
 * MXFP4 and NVFP4 are checked against ggml's vectors (../shared/testdata/quant/mxfp4.*,
 * nvfp4.*, README.md section 5): dequantization bit for bit, the quantizer byte for
 * byte, every kernel row's dot product with ggml's Q8_0 activations (.actq) against
 * ggml's vec_dot (.dot.f32). MLX, Model Optimizer and compressed-tensors planes have no
 * reference files: they are checked against values worked out by hand from the
 * formats' definitions (nibble order, E8M0/E4M3 encodings, g versus 1/g), and MLX mxfp4
 * and ModelOpt NVFP4 planes built from ggml's blocks must reproduce ggml's values.
 * Every SIMD row is compared with the scalar row on random blocks, mul_rows with 1..9
 * activation rows included. */
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
#include "tests/support/formats.h"
#include "tests/support/identical.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define REF_ROWS 8
#define REF_N 1024
#define ACT_ROW_BYTES (REF_N / 32 * 34)

/* Integer sums are exact; each 32- (MXFP4) or 16-value (NVFP4) group adds one
 * product rounded once and one rounded addition, at most 64 groups in 1024 values
 * plus a few lane-reduction additions, so |dot - exact| <= 2 * (64 + 8) * 2^-24 *
 * sum|wa| = 8.6e-6 sum|wa| for any summation order. A wrong code or scale moves a
 * dot by about sum|wa| / 64 or more. */
#define FP4_DOT_TOL 8.6e-6

/* ---- reference vectors ---------------------------------------------------------------------- */

struct ref_type {
    const char *name, *file;
    size_t row_bytes;
};

static const struct ref_type ref_types[] = {
    {"MXFP4", "mxfp4", REF_N / 32 * 17},
    {"NVFP4", "nvfp4", REF_N / 64 * 36},
};

static void test_fp4_to_float_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct ref_type *rt = &ref_types[t];
        const struct splash_format_type *f = test_format_find(rt->name);
        uint8_t *q = test_quant_load(rt->file, "q", REF_ROWS * rt->row_bytes, NULL);
        float *deq = test_quant_load(rt->file, "deq.f32", REF_ROWS * REF_N * 4, NULL);
        float out[REF_ROWS * REF_N];
        f->to_float(q, out, REF_ROWS * REF_N);
        test_assert_floats_identical(rt->name, out, deq, REF_ROWS * REF_N);
        struct splash_err err = {{0}};
        assert_int_equal(f->validate(q, REF_ROWS * rt->row_bytes, REF_ROWS * REF_N, &err),
                         SPLASH_OK);
        free(deq);
        free(q);
    }
}

static void test_fp4_from_float_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct ref_type *rt = &ref_types[t];
        const struct splash_format_type *f = test_format_find(rt->name);
        float *src = test_quant_load(rt->file, "src.f32", REF_ROWS * REF_N * 4, NULL);
        uint8_t *q = test_quant_load(rt->file, "q", REF_ROWS * rt->row_bytes, NULL);
        uint8_t out[REF_ROWS * REF_N];
        f->from_float(src, out, REF_ROWS * REF_N, NULL);
        test_assert_bytes_identical(rt->name, out, q, REF_ROWS * rt->row_bytes);
        free(q);
        free(src);
    }
}

static void check_dots(const struct splash_format_type *f, const uint8_t *q, size_t row_bytes,
                       const float *wf, double w_scale, const uint8_t *aq, const float *ref)
{
    float af[REF_ROWS * REF_N];
    test_q8_0_to_float(aq, af, REF_ROWS * REF_N);
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
                row->vec_dot(REF_N, &s, q + i * row_bytes, aq + j * ACT_ROW_BYTES);
                const double want = w_scale * (double)ref[i * REF_ROWS + j];
                const double scale = test_abs_dot(wf + i * REF_N, af + j * REF_N, REF_N);
                const double err = fabs((double)s - want) / scale;
                if (err > worst)
                    worst = err;
                if (!(err <= FP4_DOT_TOL))
                    fail_msg("%s %s: dot[%d][%d] = %.9g, ggml %.9g (rel %.3g)", f->name, row->isa,
                             i, j, (double)s, want, err);
            }
        print_message("  %s %s vs ggml vec_dot: max |dot - ref| / sum|wa| = %.3g\n", f->name,
                      row->isa, worst);
    }
}

static void test_fp4_dot_matches_ggml(void **state)
{
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const struct ref_type *rt = &ref_types[t];
        const struct splash_format_type *f = test_format_find(rt->name);
        assert_string_equal(f->act_type, "Q8_0");
        uint8_t *q = test_quant_load(rt->file, "q", REF_ROWS * rt->row_bytes, NULL);
        float *deq = test_quant_load(rt->file, "deq.f32", REF_ROWS * REF_N * 4, NULL);
        uint8_t *aq = test_quant_load(rt->file, "actq", REF_ROWS * ACT_ROW_BYTES, NULL);
        float *dot = test_quant_load(rt->file, "dot.f32", REF_ROWS * REF_ROWS * 4, NULL);
        check_dots(f, q, rt->row_bytes, deq, 1.0, aq, dot);
        free(dot);
        free(aq);
        free(deq);
        free(q);
    }
}

/* ---- SIMD rows against the scalar row, on random blocks -------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng_u32(void)
{
    return (uint32_t)(test_xorshift64(&rng_state) >> 32);
}

static float rng_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rng_u32() >> 8) * 0x1p-24f;
}

/* Random bytes with the fields that must be sane made so: every code and sign pattern
 * occurs; NVFP4 scale bytes take every value, 0x7f and bit 7 included. */
static void random_blocks(const struct splash_format_type *f, uint8_t *w, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *p = w + b * f->block_bytes;
        for (uint32_t k = 0; k < f->block_bytes; k++)
            p[k] = (uint8_t)rng_u32();
        if (!strcmp(f->name, "MXFP4") || !strcmp(f->name, "MXFP4_MLX")) {
            p[0] = (uint8_t)(112 + rng_u32() % 30);
        } else if (!strcmp(f->name, "NVFP4_G")) {
            float g = rng_float(0.01f, 4.0f);
            memcpy(p, &g, 4);
        } else if (!strcmp(f->name, "FP8_E4M3")) {
            float g = rng_float(0.001f, 2.0f);
            memcpy(p, &g, 4);
            for (uint32_t k = 4; k < f->block_bytes; k++)
                if ((p[k] & 0x7f) == 0x7f)
                    p[k] ^= 0x01;
        }
    }
}

static void random_acts(const char *act_type, uint8_t *a, float *af, int64_t n)
{
    if (!strcmp(act_type, "F32")) {
        for (int64_t k = 0; k < n; k++)
            af[k] = rng_float(-3.0f, 3.0f);
        memcpy(a, af, (size_t)n * 4);
        return;
    }
    assert_string_equal(act_type, "Q8_0");
    struct splash_q8_0_block *y = (struct splash_q8_0_block *)a;
    for (int64_t i = 0; i < n / 32; i++) {
        y[i].d = splash_fp32_to_fp16(rng_float(0.001f, 0.05f));
        for (int j = 0; j < 32; j++)
            y[i].qs[j] = (int8_t)(rng_u32() % 255 - 127);
    }
    test_q8_0_to_float(a, af, n);
}

#define RND_W 5
#define RND_ACT 9

static void check_simd_rows(const struct splash_format_type *f, int64_t n_blocks)
{
    const int64_t n = n_blocks * f->block_elems;
    const size_t w_row = splash_format_row_bytes(f, n);
    const int f32_act = !strcmp(f->act_type, "F32");
    const size_t a_row =
        f32_act ? (size_t)n * 4 : (size_t)n / 32 * sizeof(struct splash_q8_0_block);
    uint8_t *w = malloc(w_row * RND_W), *a = malloc(a_row * RND_ACT);
    float *wf = malloc((size_t)n * RND_W * 4), *af = malloc((size_t)n * RND_ACT * 4);
    random_blocks(f, w, n_blocks * RND_W);
    struct splash_err err = {{0}};
    assert_int_equal(f->validate(w, w_row * RND_W, n * RND_W, &err), SPLASH_OK);
    f->to_float(w, wf, n * RND_W);
    random_acts(f->act_type, a, af, n * RND_ACT);

    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    assert_int_equal(ref->cpu_requires, 0);
    float want[RND_ACT][RND_W];
    for (int j = 0; j < RND_ACT; j++)
        for (int i = 0; i < RND_W; i++) {
            ref->vec_dot(n, &want[j][i], w + i * w_row, a + j * a_row);
            /* the scalar row itself against the float64 dot of the values */
            double exact = 0.0;
            for (int64_t k = 0; k < n; k++)
                exact += (double)wf[i * n + k] * (double)af[j * n + k];
            double err_ref =
                fabs((double)want[j][i] - exact) / test_abs_dot(wf + i * n, af + j * n, n);
            if (!(err_ref <= FP4_DOT_TOL))
                fail_msg("%s scalar: dot[%d][%d] = %.9g, float64 %.9g", f->name, i, j,
                         (double)want[j][i], exact);
        }

    const struct test_rows rows = {n, w, w_row, RND_W, a, a_row, RND_ACT};
    /* mul_rows with 1..9 activation rows at once, output with a stride wider than n_w */
    test_simd_rows_near_scalar(f, &rows, wf, af, &want[0][0], FP4_DOT_TOL, 1);
    free(af);
    free(wf);
    free(a);
    free(w);
}

static void test_fp4_simd_rows_match_scalar(void **state)
{
    (void)state;
    /* 35 blocks: the AVX-512 tiles' partial groups of 4 and 16 */
    check_simd_rows(test_format_find("MXFP4"), 35);
    check_simd_rows(test_format_find("MXFP4"), 17);
    check_simd_rows(test_format_find("MXFP4"), 50);
    check_simd_rows(test_format_find("MXFP4_MLX"), 4);
    check_simd_rows(test_format_find("NVFP4"), 17);
    check_simd_rows(test_format_find("NVFP4_G"), 5);
    check_simd_rows(test_format_find("FP8_E4M3"), 9);
}

#if defined(__aarch64__)
/* The MXFP4 NEON rows sum each block exactly in int32 lanes and then take the scalar row's
 * float steps in its order (formats/mxfp4/mxfp4_neon.h), so they give the scalar row's
 * bits: on ggml's vectors and on random blocks (every code, scales 2^-16..2^13), vec_dot
 * and each activation row of mul_rows. */
static void test_fp4_mxfp4_neon_rows_give_scalar_bits(void **state)
{
    (void)state;
    static const char *const isas[] = {"neon-dotprod", "neon"};
    const struct splash_format_type *f = test_format_find("MXFP4");
    const size_t row_bytes = REF_N / 32 * 17;
    uint8_t *q = test_quant_load("mxfp4", "q", REF_ROWS * row_bytes, NULL);
    uint8_t *aq = test_quant_load("mxfp4", "actq", REF_ROWS * ACT_ROW_BYTES, NULL);
    enum { NB = 41, N = NB * 32 };
    uint8_t w[RND_W * NB * 17], a[RND_ACT * NB * 34];
    float af[RND_ACT * N];
    random_blocks(f, w, RND_W * NB);
    random_acts("Q8_0", a, af, RND_ACT * N);
    for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
        if (!test_row_gives_scalar_bits(f, isas[s], REF_N, q, row_bytes, aq, ACT_ROW_BYTES,
                                        REF_ROWS))
            continue;
        const int held = test_row_gives_scalar_bits(f, isas[s], N, w, NB * 17, a, NB * 34, RND_W);
        assert_true(held);
        print_message("  MXFP4 %s: scalar bits on %d x %d ggml dots and %d x %d random ones\n",
                      isas[s], REF_ROWS, REF_ROWS, RND_W, RND_W);
    }
    free(aq);
    free(q);
}
#endif

/* ---- hand-computed blocks ----------------------------------------------------------------- */

/* GGUF NVFP4 scales: 0x7f reads as 0, bit 7 is ignored otherwise (0xb8 is 1.0 and
 * 0xff is 480, not NaN), subnormals are m * 2^-9. */
static void test_fp4_nvfp4_scale_bytes(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("NVFP4");
    uint8_t blk[36] = {0x7f, 0xb8, 0xff, 0x03};
    for (int s = 0; s < 4; s++)
        blk[4 + 8 * s] = 0x72; /* value 16s: code 2 (1.0); value 16s + 8: code 7 (6.0) */
    float v[64];
    f->to_float(blk, v, 64);
    const float want[4][2] = {{0, 0}, {1.0f, 6.0f}, {480.0f, 2880.0f}, {3 * 0x1p-9f, 18 * 0x1p-9f}};
    for (int s = 0; s < 4; s++) {
        assert_true(v[16 * s] == want[s][0]);
        assert_true(v[16 * s + 8] == want[s][1]);
        for (int j = 1; j < 16; j++)
            if (j != 8)
                assert_true(v[16 * s + j] == 0.0f);
    }
}

static void test_fp4_mlx_mxfp4_hand_values(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("MXFP4_MLX");
    assert_string_equal(f->mlx_mode, "mxfp4");
    assert_int_equal(f->mlx_bits, 4);
    assert_int_equal(f->mlx_group_size, 32);
    assert_int_equal(f->gguf_type, -1);
    /* MLX: code k at bits 4 (k % 8) of word k / 8; scale 2^(s - 127), here s = 128 */
    const uint32_t words[8] = {0x76543210u, 0xfedcba98u, 0x00000001u, 0x10000000u,
                               0x000000f0u, 0x00000000u, 0x00000000u, 0x00000000u};
    const uint8_t scales[2] = {128, 125};
    struct splash_planes p = {.rows = 1,
                              .cols = 64,
                              .codes = words,
                              .codes_dtype = SPLASH_DTYPE_ST_U32,
                              .scales = scales,
                              .scales_dtype = SPLASH_DTYPE_ST_U8,
                              .global_scale = 1.0};
    uint8_t blocks[2 * 17];
    struct splash_err err = {{0}};
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    float v[64];
    f->to_float(blocks, v, 64);
    /* code 8 (-0) reads as +0: GGUF's doubled table is integers */
    const float want[32] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                            1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    test_assert_floats_identical("mxfp4 group 0", v, want, 32);
    for (int k = 32; k < 64; k++) /* group 1: element 33 is code 15 (-6) times 2^-2 */
        assert_true(v[k] == (k == 33 ? -1.5f : 0.0f));
    /* the GGUF bytes: e, then code j | code j + 16 << 4 */
    assert_int_equal(blocks[0], 128);
    assert_int_equal(blocks[1], 0x10);  /* codes 0 and 1 (value 16) */
    assert_int_equal(blocks[16], 0x1f); /* codes 15 and 1 (value 31) */
    assert_int_equal(blocks[17], 125);
    assert_int_equal(blocks[19], 0x0f); /* group 1's value 1 (element 33): code 15 */
}

/* GGUF MXFP4 blocks and the MLX planes of the same values (MLX's layout written from
 * its definition) must give the same bytes, values and dots. */
static void test_fp4_mlx_mxfp4_matches_gguf(void **state)
{
    (void)state;
    const struct splash_format_type *gguf = test_format_find("MXFP4"),
                                    *mlx = test_format_find("MXFP4_MLX");
    const size_t row_bytes = REF_N / 32 * 17;
    uint8_t *q = test_quant_load("mxfp4", "q", REF_ROWS * row_bytes, NULL);
    float *deq = test_quant_load("mxfp4", "deq.f32", REF_ROWS * REF_N * 4, NULL);
    uint8_t *aq = test_quant_load("mxfp4", "actq", REF_ROWS * ACT_ROW_BYTES, NULL);
    float *dot = test_quant_load("mxfp4", "dot.f32", REF_ROWS * REF_ROWS * 4, NULL);

    uint32_t words[REF_ROWS * REF_N / 8] = {0};
    uint8_t scales[REF_ROWS * REF_N / 32];
    for (int64_t b = 0; b < REF_ROWS * REF_N / 32; b++) {
        const uint8_t *blk = q + b * 17;
        scales[b] = blk[0];
        for (int j = 0; j < 32; j++) {
            /* GGUF: value j < 16 low nibble of qs[j], value j + 16 high nibble of qs[j] */
            uint32_t code = j < 16 ? blk[1 + j] & 0xfu : (uint32_t)blk[1 + j - 16] >> 4;
            int64_t k = b * 32 + j;
            words[k / 8] |= code << (4 * (k % 8));
        }
    }
    struct splash_planes p = {.rows = REF_ROWS,
                              .cols = REF_N,
                              .codes = words,
                              .codes_dtype = SPLASH_DTYPE_ST_U32,
                              .scales = scales,
                              .scales_dtype = SPLASH_DTYPE_ST_U8,
                              .global_scale = 1.0};
    uint8_t blocks[REF_ROWS * REF_N / 32 * 17];
    struct splash_err err = {{0}};
    assert_int_equal(mlx->import_planes(&p, blocks, &err), SPLASH_OK);
    test_assert_bytes_identical("MLX mxfp4 as GGUF blocks", blocks, q, sizeof blocks);
    float v[REF_ROWS * REF_N];
    mlx->to_float(blocks, v, REF_ROWS * REF_N);
    test_assert_floats_identical("MLX mxfp4 values", v, deq, REF_ROWS * REF_N);
    check_dots(mlx, blocks, row_bytes, deq, 1.0, aq, dot);
    assert_ptr_equal(mlx->rows, gguf->rows);

    /* refusals name the group */
    scales[1] = 0xff;
    assert_int_equal(mlx->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "mxfp4: row 0 group 1: E8M0 scale 0xff is NaN");
    p.cols = 48;
    assert_int_equal(mlx->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "mxfp4: shape 8 x 48, columns not a multiple of 32");
    free(dot);
    free(aq);
    free(deq);
    free(q);
}

/* One 256-column row of NVFP4 planes as Model Optimizer writes them: U8 codes, the
 * lower-indexed value in the low nibble; an E4M3 scale per 16. */
static void nvfp4_hand_row(uint8_t codes[128], uint8_t scales[16])
{
    memset(codes, 0, 128);
    codes[0] = 0x21;   /* value 0: code 1 (0.5), value 1: code 2 (1.0) */
    codes[1] = 0xf7;   /* value 2: code 7 (6.0), value 3: code 15 (-6.0) */
    codes[8] = 0x03;   /* value 16: code 3 (1.5), group 1 */
    codes[127] = 0x9a; /* value 254: code 10 (-1.0), value 255: code 9 (-0.5) */
    for (int s = 0; s < 16; s++)
        scales[s] = 0x30; /* E4M3 0.5: exponent 6, mantissa 0 */
    scales[0] = 0x38;     /* 1.0 */
    scales[15] = 0x48;    /* 4.0 */
}

static void check_nvfp4_hand_values(const float *v, float g)
{
    for (int k = 0; k < 256; k++) {
        float want = 0.0f;
        switch (k) {
        case 0: want = 0.5f * 1.0f; break;
        case 1: want = 1.0f * 1.0f; break;
        case 2: want = 6.0f * 1.0f; break;
        case 3: want = -6.0f * 1.0f; break;
        case 16: want = 1.5f * 0.5f; break;
        case 254: want = -1.0f * 4.0f; break;
        case 255: want = -0.5f * 4.0f; break;
        }
        if (v[k] != want * g)
            fail_msg("value %d: got %.9g, want %.9g", k, (double)v[k], (double)(want * g));
    }
}

static void test_fp4_nvfp4_checkpoint_planes(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("NVFP4_G");
    assert_string_equal(f->mlx_mode, "nvfp4");
    assert_int_equal(f->mlx_group_size, 16);
    assert_int_equal(f->block_elems, 256);
    assert_int_equal(f->block_bytes, 148);
    assert_true(f->bits_per_weight == 4.625f);
    uint8_t codes[128], scales[16];
    nvfp4_hand_row(codes, scales);
    uint8_t blocks[148];
    float v[256];
    struct splash_err err = {{0}};

    /* Model Optimizer: g is .weight_scale_2 */
    struct splash_planes p = {.rows = 1,
                              .cols = 256,
                              .codes = codes,
                              .codes_dtype = SPLASH_DTYPE_ST_U8,
                              .scales = scales,
                              .scales_dtype = SPLASH_DTYPE_ST_F8_E4M3,
                              .global_scale = 0.25};
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    assert_int_equal(f->validate(blocks, sizeof blocks, 256, &err), SPLASH_OK);
    f->to_float(blocks, v, 256);
    check_nvfp4_hand_values(v, 0.25f);

    /* compressed-tensors: .weight_global_scale is 1/g; the planes carry g */
    const float weight_global_scale = 4.0f;
    p.global_scale = 1.0 / weight_global_scale;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    f->to_float(blocks, v, 256);
    check_nvfp4_hand_values(v, 0.25f);

    /* MLX nvfp4: the same codes as U32 words, tensor scale 1 */
    uint32_t words[32];
    memcpy(words, codes, sizeof words); /* little-endian: word k holds bytes 4k..4k+3 */
    assert_int_equal(words[0], 0x0000f721u);
    p.codes = words;
    p.codes_dtype = SPLASH_DTYPE_ST_U32;
    p.scales_dtype = SPLASH_DTYPE_ST_U8;
    p.global_scale = 1.0;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    f->to_float(blocks, v, 256);
    check_nvfp4_hand_values(v, 1.0f);

    /* refusals */
    scales[3] = 0xb8; /* -1.0 */
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "nvfp4: row 0 group 3: E4M3 scale 0xb8 is negative or NaN");
    scales[3] = 0x7f;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "nvfp4: row 0 group 3: E4M3 scale 0x7f is negative or NaN");
    scales[3] = 0x80; /* -0 is 0 */
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    p.cols = 128;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "nvfp4: shape 1 x 128, columns not a multiple of 256");
    p.cols = 256;
    p.global_scale = NAN;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "nvfp4: tensor scale nan");
}

/* ModelOpt planes of ggml's NVFP4 values: g = 1 reproduces ggml's values and dots,
 * g = 0.5 halves both exactly. */
static void test_fp4_nvfp4_planes_match_gguf(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("NVFP4_G");
    const size_t row_bytes = REF_N / 64 * 36;
    uint8_t *q = test_quant_load("nvfp4", "q", REF_ROWS * row_bytes, NULL);
    float *deq = test_quant_load("nvfp4", "deq.f32", REF_ROWS * REF_N * 4, NULL);
    uint8_t *aq = test_quant_load("nvfp4", "actq", REF_ROWS * ACT_ROW_BYTES, NULL);
    float *dot = test_quant_load("nvfp4", "dot.f32", REF_ROWS * REF_ROWS * 4, NULL);

    uint8_t codes[REF_ROWS * REF_N / 2] = {0};
    uint8_t scales[REF_ROWS * REF_N / 16];
    for (int64_t b = 0; b < REF_ROWS * REF_N / 64; b++) {
        const uint8_t *blk = q + b * 36;
        for (int s = 0; s < 4; s++) {
            scales[b * 4 + s] = blk[s];
            for (int j = 0; j < 16; j++) {
                /* GGUF: value 16s + j is nibble j / 8 of qs[8s + j % 8] */
                uint8_t byte = blk[4 + 8 * s + j % 8];
                uint8_t code = j < 8 ? byte & 0xf : byte >> 4;
                int64_t k = b * 64 + 16 * s + j;
                codes[k / 2] |= (uint8_t)(code << (4 * (k % 2)));
            }
        }
    }
    const double gs[2] = {1.0, 0.5};
    for (int t = 0; t < 2; t++) {
        struct splash_planes p = {.rows = REF_ROWS,
                                  .cols = REF_N,
                                  .codes = codes,
                                  .codes_dtype = SPLASH_DTYPE_ST_U8,
                                  .scales = scales,
                                  .scales_dtype = SPLASH_DTYPE_ST_F8_E4M3,
                                  .global_scale = gs[t]};
        uint8_t blocks[REF_ROWS * REF_N / 256 * 148];
        struct splash_err err = {{0}};
        assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
        float v[REF_ROWS * REF_N], want[REF_ROWS * REF_N];
        f->to_float(blocks, v, REF_ROWS * REF_N);
        for (int k = 0; k < REF_ROWS * REF_N; k++)
            want[k] = deq[k] * (float)gs[t];
        test_assert_floats_identical("NVFP4_G values", v, want, REF_ROWS * REF_N);
        check_dots(f, blocks, REF_N / 256 * 148, want, gs[t], aq, dot);
    }
    free(dot);
    free(aq);
    free(deq);
    free(q);
}

static void test_fp4_fp8_planes(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("FP8_E4M3");
    assert_string_equal(f->act_type, "F32");
    /* E4M3 (OCP fn): sign, 4 exponent bits (bias 7), 3 mantissa bits */
    const uint8_t hand[8] = {0x38, 0x3c, 0x01, 0x7e, 0xc0, 0x08, 0x80, 0x77};
    const float hand_values[8] = {1.0f, 1.5f, 0x1p-9f, 448.0f, -2.0f, 0x1p-6f, -0.0f, 240.0f};
    uint8_t codes[2 * 128];
    for (int k = 0; k < 256; k++)
        codes[k] = k < 8 ? hand[k] : (uint8_t)(k & 0x7f) == 0x7f ? 0 : (uint8_t)k;
    uint8_t blocks[2 * 132];
    float v[256];
    struct splash_err err = {{0}};

    /* Model Optimizer FP8: one .weight_scale per tensor */
    struct splash_planes p = {.rows = 2,
                              .cols = 128,
                              .codes = codes,
                              .codes_dtype = SPLASH_DTYPE_ST_F8_E4M3,
                              .global_scale = 0.5};
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    assert_int_equal(f->validate(blocks, sizeof blocks, 256, &err), SPLASH_OK);
    f->to_float(blocks, v, 256);
    for (int k = 0; k < 8; k++)
        assert_true(v[k] == 0.5f * hand_values[k]);
    for (int k = 8; k < 256; k++) /* every other code against fp.h's decoder */
        assert_true(v[k] == 0.5f * splash_e4m3_to_fp32(codes[k]));
    assert_true(signbit(v[6]));

    /* compressed-tensors channel scales: [rows, 1] */
    const float row_scales[2] = {2.0f, 0.125f};
    p.global_scale = 1.0;
    p.row_scales = row_scales;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_OK);
    f->to_float(blocks, v, 256);
    assert_true(v[3] == 896.0f);
    assert_true(v[128 + 56] == -0.125f); /* code 184 = 0xb8: -1.0 */
    for (int k = 128; k < 256; k++)
        assert_true(v[k] == 0.125f * splash_e4m3_to_fp32(codes[k]));

    codes[5] = 0xff;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "fp8: row 0 column 5: 0xff is NaN");
    p.cols = 100;
    assert_int_equal(f->import_planes(&p, blocks, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "fp8: shape 2 x 100, columns not a multiple of 128");
}

/* ---- validation and claims ----------------------------------------------------------------- */

static void test_fp4_validate_rejects_corrupt_blocks(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    uint8_t *q = test_quant_load("mxfp4", "q", REF_ROWS * REF_N / 32 * 17, NULL);
    const struct splash_format_type *mx = test_format_find("MXFP4");
    assert_int_equal(mx->validate(q, 543, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "MXFP4: 543 bytes for 1024 values, expected 544");
    assert_int_equal(mx->validate(q, 544, 1000, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "MXFP4: 1000 values, not a multiple of the 32-value block");
    q[5 * 17] = 0xff;
    assert_int_equal(mx->validate(q, 544, 1024, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "MXFP4 block 5: E8M0 scale 0xff is NaN");
    free(q);

    const struct splash_format_type *nv = test_format_find("NVFP4");
    uint8_t nb[2 * 36];
    memset(nb, 0xff, sizeof nb); /* every byte pattern decodes */
    assert_int_equal(nv->validate(nb, 72, 128, &err), SPLASH_OK);
    assert_int_equal(nv->validate(nb, 71, 128, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "NVFP4: 71 bytes for 128 values, expected 72");

    const struct splash_format_type *g = test_format_find("NVFP4_G");
    uint8_t gb[2 * 148] = {0};
    float bad = INFINITY;
    memcpy(gb + 148, &bad, 4);
    assert_int_equal(g->validate(gb, 296, 512, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "NVFP4_G block 1: tensor scale inf");
    assert_int_equal(g->validate(gb, 148, 512, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "NVFP4_G: 148 bytes for 512 values, expected 296");

    const struct splash_format_type *f8 = test_format_find("FP8_E4M3");
    uint8_t fb[132] = {0};
    fb[4 + 3] = 0x7f;
    assert_int_equal(f8->validate(fb, 132, 128, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "FP8_E4M3 block 0: value 3 is NaN (0x7f)");
}

static void test_fp4_checkpoint_claims(void **state)
{
    (void)state;
    struct splash_registry *registry = test_formats_registry();
    const struct splash_format_plugin *nv = NULL;
    for (size_t i = 0; i < splash_registry_n_formats(registry); i++)
        if (!strcmp(splash_registry_format(registry, i)->header.name, "nvfp4"))
            nv = splash_registry_format(registry, i);
    assert_non_null(nv);
    const char *want[] = {"modelopt:NVFP4", "modelopt:FP8",
                          "compressed-tensors:nvfp4-pack-quantized",
                          "compressed-tensors:float-quantized"};
    for (size_t w = 0; w < 4; w++) {
        int found = 0;
        for (const char *const *c = nv->checkpoint_formats; *c; c++)
            found |= !strcmp(*c, want[w]);
        if (!found)
            fail_msg("nvfp4 does not claim %s", want[w]);
    }
    assert_ptr_equal(splash_registry_format_by_gguf(registry, 39), test_format_find("MXFP4"));
    assert_ptr_equal(splash_registry_format_by_gguf(registry, 40), test_format_find("NVFP4"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp4_to_float_matches_ggml),
        cmocka_unit_test(test_fp4_from_float_matches_ggml),
        cmocka_unit_test(test_fp4_dot_matches_ggml),
        cmocka_unit_test(test_fp4_simd_rows_match_scalar),
#if defined(__aarch64__)
        cmocka_unit_test(test_fp4_mxfp4_neon_rows_give_scalar_bits),
#endif
        cmocka_unit_test(test_fp4_nvfp4_scale_bytes),
        cmocka_unit_test(test_fp4_mlx_mxfp4_hand_values),
        cmocka_unit_test(test_fp4_mlx_mxfp4_matches_gguf),
        cmocka_unit_test(test_fp4_nvfp4_checkpoint_planes),
        cmocka_unit_test(test_fp4_nvfp4_planes_match_gguf),
        cmocka_unit_test(test_fp4_fp8_planes),
        cmocka_unit_test(test_fp4_validate_rejects_corrupt_blocks),
        cmocka_unit_test(test_fp4_checkpoint_claims),
    };
    return cmocka_run_group_tests(tests, test_formats_setup, test_formats_teardown);
}
