/* The affine plugin: MLX affine quantization as af<bits>g<group> formats.
 *
 * There are no reference files for MLX's formats, so every expected value here is
 * worked out by hand from the published definitions (models.md "MLX targets"; MLX's
 * packing and mx.quantize): code words built from the bit-stream definition and
 * decoded code by code (3/5/6-bit codes crossing 32-bit words included), quantizer
 * outputs computed by hand for small groups, dot products summed by hand. Every SIMD
 * row is compared with the scalar row on random data for all 18 types, mul_rows with
 * 1..9 activation rows included. */
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
#include "tests/support/kernel_rows.h"
#include "tests/support/rng.h"

static const int all_bits[] = {2, 3, 4, 5, 6, 8};
static const int all_groups[] = {32, 64, 128};

static const struct splash_format_type *find_af(int bits, int group)
{
    char name[16];
    snprintf(name, sizeof name, "af%dg%d", bits, group);
    return test_format_find(name);
}

/* Deterministic generator (splitmix64), so failures reproduce. */
static uint64_t rng_state = 0xAFF1E5u;

static uint64_t rng_next(void)
{
    return test_splitmix64(&rng_state);
}

static float rng_uniform(void) /* [0, 1) */
{
    return test_splitmix_uniform(&rng_state);
}

/* ---- descriptors -------------------------------------------------------- */

static void test_affine_descriptors_cover_every_mlx_width(void **state)
{
    (void)state;
    for (size_t b = 0; b < 6; b++) {
        for (size_t g = 0; g < 3; g++) {
            const int bits = all_bits[b], group = all_groups[g];
            const struct splash_format_type *f = find_af(bits, group);
            assert_int_equal(f->gguf_type, -1);
            assert_int_equal(f->block_elems, group);
            /* codes, then bf16 scale and bias: the checkpoint's bits per weight */
            assert_int_equal(f->block_bytes, bits * group / 8 + 4);
            assert_true(fabsf(f->bits_per_weight - (bits + 32.0f / group)) < 1e-6f);
            assert_string_equal(f->act_type, "Q8_0");
            assert_string_equal(f->mlx_mode, "affine");
            assert_int_equal(f->mlx_bits, bits);
            assert_int_equal(f->mlx_group_size, group);
            assert_non_null(f->validate);
            assert_non_null(f->to_float);
            assert_non_null(f->from_float);
            assert_non_null(f->import_planes);
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
    /* 4.5 bits per weight for the drafts' af4g64, as MLX's 4-bit checkpoints */
    assert_int_equal(find_af(4, 64)->block_bytes, 36);
    assert_null(splash_registry_format_by_name(test_formats_registry(), "af7g64"));
}

/* ---- packing: MLX planes in, values out ----------------------------------- */

/* One row of 32 codes c_j = (5 j + 3) mod 2^bits packed as MLX packs them: code j at
 * bits j*bits .. j*bits + bits - 1 of the little-endian stream of 32-bit words. The
 * words below were worked out from that definition (e.g. 3 bits: codes 3, 0, 5, 2 ->
 * 3 | 0 << 3 | 5 << 6 | 2 << 9 = 0x543 at the bottom of word 0). Codes 10 and 21 (3
 * bits), 6, 12, 19, 25 (5 bits) and 5, 10, 21, 26 (6 bits) cross a word boundary.
 * scale 0.5 (bf16 0x3F00), bias -1 (0xBF80): value j = 0.5 c_j - 1, exact. */
static void check_packed_row(int bits, const uint32_t *words)
{
    const struct splash_format_type *f = find_af(bits, 32);
    const uint16_t scale = 0x3F00, bias = 0xBF80;
    struct splash_planes planes = {
        .rows = 1,
        .cols = 32,
        .codes = words,
        .codes_dtype = SPLASH_DTYPE_ST_U32,
        .scales = &scale,
        .scales_dtype = SPLASH_DTYPE_BF16,
        .biases = &bias,
        .biases_dtype = SPLASH_DTYPE_BF16,
        .global_scale = 1.0,
    };
    uint8_t block[32];
    struct splash_err err = {{0}};
    assert_int_equal(f->import_planes(&planes, block, &err), SPLASH_OK);
    assert_int_equal(f->validate(block, f->block_bytes, 32, &err), SPLASH_OK);
    float out[32];
    f->to_float(block, out, 32);
    for (int j = 0; j < 32; j++) {
        const int c = (5 * j + 3) & ((1 << bits) - 1);
        if (out[j] != 0.5f * (float)c - 1.0f)
            fail_msg("%d bits: value %d = %g, want 0.5 * %d - 1", bits, j, out[j], c);
    }
}

static void test_affine_codes_crossing_words_decode(void **state)
{
    (void)state;
    const uint32_t w3[3] = {0x43c67543u, 0x7543c675u, 0xc67543c6u};
    const uint32_t w5[5] = {0x79793503u, 0xfd560b30u, 0x77137249u, 0x1bb45871u, 0xf668f514u};
    const uint32_t w6[6] = {0x1748d203u, 0x5c2b9a17u, 0x38913febu,
                            0x2789d613u, 0x503bdb1bu, 0x79950f28u};
    check_packed_row(3, w3);
    check_packed_row(5, w5);
    check_packed_row(6, w6);
}

/* 2, 4 and 8 bits by hand: 2-bit word 0xE4E4E4E4 holds codes 0, 1, 2, 3 repeated
 * (0xE4 = 0b11100100); 4-bit word 0x76543210 codes 0..7; 8-bit word 0x030201FF codes
 * 255, 1, 2, 3. Scale 2 (0x4000), bias 0.5 (0x3F00). Two rows for 8 bits, so the
 * second row's block must come from the second row of every plane. */
static void test_affine_2_4_8_bit_words_decode(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    uint16_t scale[2] = {0x4000, 0xBF80}, bias[2] = {0x3F00, 0x0000};
    struct splash_planes p = {.rows = 1,
                              .cols = 32,
                              .codes_dtype = SPLASH_DTYPE_ST_U32,
                              .scales = scale,
                              .scales_dtype = SPLASH_DTYPE_BF16,
                              .biases = bias,
                              .biases_dtype = SPLASH_DTYPE_BF16,
                              .global_scale = 1.0};
    float out[64];
    uint8_t blk[2 * 36];

    uint32_t w2[2] = {0xE4E4E4E4u, 0xE4E4E4E4u};
    p.codes = w2;
    assert_int_equal(find_af(2, 32)->import_planes(&p, blk, &err), SPLASH_OK);
    find_af(2, 32)->to_float(blk, out, 32);
    for (int j = 0; j < 32; j++)
        assert_true(out[j] == 2.0f * (float)(j % 4) + 0.5f);

    uint32_t w4[4] = {0x76543210u, 0xFEDCBA98u, 0x76543210u, 0xFEDCBA98u};
    p.codes = w4;
    assert_int_equal(find_af(4, 32)->import_planes(&p, blk, &err), SPLASH_OK);
    find_af(4, 32)->to_float(blk, out, 32);
    for (int j = 0; j < 32; j++)
        assert_true(out[j] == 2.0f * (float)(j % 16) + 0.5f);

    uint32_t w8[16] = {0};
    w8[0] = 0x030201FFu; /* row 0: 255, 1, 2, 3, then zeros */
    w8[8] = 0x00000080u; /* row 1: 128, then zeros */
    p.codes = w8;
    p.rows = 2;
    assert_int_equal(find_af(8, 32)->import_planes(&p, blk, &err), SPLASH_OK);
    find_af(8, 32)->to_float(blk, out, 64);
    assert_true(out[0] == 510.5f && out[1] == 2.5f && out[2] == 4.5f && out[3] == 6.5f);
    assert_true(out[4] == 0.5f && out[31] == 0.5f);
    assert_true(out[32] == -128.0f && out[33] == 0.0f); /* row 1: scale -1, bias 0 */
}

/* F16 and F32 scale planes are rounded to bf16 (nearest even): 0.1f is 0x3DCCCCCD ->
 * bf16 0x3DCD; fp16 0x2E66 (0.0999755859375 = 0x3DCCC000) -> 0x3DCD as well. */
static void test_affine_import_converts_scale_dtypes_and_refuses_bad_planes(void **state)
{
    (void)state;
    const struct splash_format_type *f = find_af(4, 32);
    struct splash_err err = {{0}};
    uint32_t w4[4] = {0};
    const float s32 = 0.1f, z32 = -2.0f;
    const uint16_t s16 = 0x2E66, z16 = 0xC000; /* -2 */
    struct splash_planes p = {.rows = 1,
                              .cols = 32,
                              .codes = w4,
                              .codes_dtype = SPLASH_DTYPE_ST_U32,
                              .scales = &s32,
                              .scales_dtype = SPLASH_DTYPE_F32,
                              .biases = &z32,
                              .biases_dtype = SPLASH_DTYPE_F32,
                              .global_scale = 1.0};
    uint8_t blk[20];
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_OK);
    assert_int_equal(blk[16] | blk[17] << 8, 0x3DCD);
    assert_int_equal(blk[18] | blk[19] << 8, 0xC000);
    p.scales = &s16;
    p.scales_dtype = SPLASH_DTYPE_F16;
    p.biases = &z16;
    p.biases_dtype = SPLASH_DTYPE_F16;
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_OK);
    assert_int_equal(blk[16] | blk[17] << 8, 0x3DCD);
    assert_int_equal(blk[18] | blk[19] << 8, 0xC000);

    p.codes_dtype = SPLASH_DTYPE_ST_U8;
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g32: weight is U8, expected U32 words");
    p.codes_dtype = SPLASH_DTYPE_ST_U32;
    p.cols = 48;
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g32: shape [1, 48] is not whole 32-column groups");
    p.cols = 32;
    p.biases = NULL;
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g32: biases are missing, expected BF16, F16 or F32");
    const uint16_t nan_bf16 = 0x7FC0;
    p.biases = &z16;
    p.scales = &nan_bf16;
    p.scales_dtype = SPLASH_DTYPE_BF16;
    assert_int_equal(f->import_planes(&p, blk, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g32: row 0 group 0: scale is not finite");
}

/* ---- MLX's quantizer on hand examples ------------------------------------ */

static uint16_t block_u16(const uint8_t *b, int at)
{
    return (uint16_t)(b[at] | (b[at + 1] << 8));
}

/* 4 bits, 32 per group. Group A: x_j = 2.75 - 0.25 c_j with c_j = j mod 16, except
 * x_31 = 2.125. w_max 2.75, w_min -1: (2.75 + 1) / 15 = 0.25; |w_min| < |w_max|, so
 * scale -0.25 and edge 2.75; q0 = round(2.75 / -0.25) = -11, scale = 2.75 / -11 = -0.25,
 * bias 2.75; codes round((x - 2.75) / -0.25) = c_j, and x_31 gives 2.5, which MLX's GPU
 * round() takes away from zero: 3 (the CPU's rint would give 2). Bytes: codes low
 * nibble first, 0x10 0x32 .. 0xFE twice with the last byte 0x3E; scale bf16 0xBE80,
 * bias 0x4030. */
static void test_affine_quantize_matches_mlx_by_hand(void **state)
{
    (void)state;
    const struct splash_format_type *f = find_af(4, 32);
    float x[32];
    uint8_t b[20];
    for (int j = 0; j < 32; j++)
        x[j] = 2.75f - 0.25f * (float)(j % 16);
    x[31] = 2.125f;
    f->from_float(x, b, 32, NULL);
    const uint8_t want_a[20] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0x10, 0x32,
                                0x54, 0x76, 0x98, 0xBA, 0xDC, 0x3E, 0x80, 0xBE, 0x30, 0x40};
    assert_memory_equal(b, want_a, 20);
    float y[32];
    f->to_float(b, y, 32);
    for (int j = 0; j < 31; j++)
        assert_true(y[j] == x[j]);
    assert_true(y[31] == 2.0f);

    /* Group B: -3, 0.5, 0, -1, 0.25, rest 0. Range 3.5 / 15 = 0.2333; |w_min| wins:
     * edge -3, q0 = round(-3 / 0.2333) = round(-12.86) = -13, scale = -3 / -13 =
     * 0.23076923 (bf16 0x3E6C), bias -3 (0xC040). Codes round((x + 3) / 0.23076923):
     * -3 -> 0, 0.5 -> 15.17 -> 15, 0 -> 13, -1 -> 8.67 -> 9, 0.25 -> 14.08 -> 14. */
    memset(x, 0, sizeof x);
    x[0] = -3.0f;
    x[1] = 0.5f;
    x[3] = -1.0f;
    x[4] = 0.25f;
    f->from_float(x, b, 32, NULL);
    assert_int_equal(b[0], 0xF0);                 /* codes 0, 15 */
    assert_int_equal(b[1], 0x9D);                 /* codes 13, 9 */
    assert_int_equal(b[2], 0xDE);                 /* codes 14, 13 */
    for (int k = 3; k < 16; k++)
        assert_int_equal(b[k], 0xDD);             /* zeros: code 13 */
    assert_int_equal(block_u16(b, 16), 0x3E6C);
    assert_int_equal(block_u16(b, 18), 0xC040);

    /* Group C, all negative: -3, -1, rest -2. MLX's GPU reduction starts the maximum
     * at 0, so the range is 3 - 0: scale 0.2 (bf16 0x3E4D), edge -3, q0 = -15, bias -3;
     * codes -3 -> 0, -1 -> 10, -2 -> 5. */
    for (int j = 0; j < 32; j++)
        x[j] = -2.0f;
    x[0] = -3.0f;
    x[1] = -1.0f;
    f->from_float(x, b, 32, NULL);
    assert_int_equal(b[0], 0xA0);
    for (int k = 1; k < 16; k++)
        assert_int_equal(b[k], 0x55);
    assert_int_equal(block_u16(b, 16), 0x3E4D);
    assert_int_equal(block_u16(b, 18), 0xC040);

    /* Group D, all zero: scale max(0 / 15, 1e-7) negated (|w_min| = |w_max|): bf16 of
     * -1e-7 = 0xB3D7; q0 = 0 so bias 0; every code 0; values back to 0. */
    memset(x, 0, sizeof x);
    f->from_float(x, b, 32, NULL);
    for (int k = 0; k < 16; k++)
        assert_int_equal(b[k], 0);
    assert_int_equal(block_u16(b, 16), 0xB3D7);
    assert_int_equal(block_u16(b, 18), 0x0000);
    f->to_float(b, y, 32);
    for (int j = 0; j < 32; j++)
        assert_true(y[j] == 0.0f);
}

/* 3 bits, 64 per group (codes crossing bytes): x_j = 0.5 (j mod 8) - 1 on [-1, 2.5]:
 * (2.5 + 1) / 7 = 0.5, max wins: scale -0.5, edge 2.5, q0 = -5, scale -0.5, bias 2.5,
 * codes 7 - (j mod 8), so the stream is the 24-bit pattern 7, 6, .., 0 =
 * 7 | 6 << 3 | 5 << 6 | 4 << 9 | 3 << 12 | 2 << 15 | 1 << 18 = 0x053977, repeated: bytes
 * 0x77 0x39 0x05 eight times. Scale bf16 -0.5 = 0xBF00, bias 2.5 = 0x4020. */
static void test_affine_quantize_3_bit_stream_by_hand(void **state)
{
    (void)state;
    const struct splash_format_type *f = find_af(3, 64);
    float x[64], y[64];
    uint8_t b[28];
    for (int j = 0; j < 64; j++)
        x[j] = 0.5f * (float)(j % 8) - 1.0f;
    f->from_float(x, b, 64, NULL);
    for (int k = 0; k < 24; k += 3) {
        assert_int_equal(b[k], 0x77);
        assert_int_equal(b[k + 1], 0x39);
        assert_int_equal(b[k + 2], 0x05);
    }
    assert_int_equal(block_u16(b, 24), 0xBF00);
    assert_int_equal(block_u16(b, 26), 0x4020);
    f->to_float(b, y, 64);
    for (int j = 0; j < 64; j++)
        assert_true(y[j] == x[j]);
}

/* ---- dot products by hand ------------------------------------------------- */

/* Group A of the quantizer test (s = -0.25, z = 2.75, codes c_j = j mod 16 but
 * c_31 = 3, Σ c = 2 * 120 - 12 = 228) against a = 1 everywhere with d = 1:
 * s Σ c + 32 z = -57 + 88 = 31. Against a_j = j - 16 with d = 0.5: Σ c a =
 * Σ_{j<16} j (j - 16) + Σ_{m<16} m * m - 15 (15 - 3) = (1240 - 1920) + 1240 - 180 = 380,
 * Σ a = -16, so 0.5 (-0.25 * 380 + 2.75 * -16) = 0.5 (-95 - 44) = -69.5. Exact in float. */
static void test_affine_vec_dot_by_hand(void **state)
{
    (void)state;
    const struct splash_format_type *f = find_af(4, 32);
    float x[32];
    uint8_t b[20];
    for (int j = 0; j < 32; j++)
        x[j] = 2.75f - 0.25f * (float)(j % 16);
    x[31] = 2.125f;
    f->from_float(x, b, 32, NULL);
    struct splash_q8_0_block ones = {.d = 0x3c00}, ramp = {.d = 0x3800}; /* 1, 0.5 */
    int sum_qa = 0, sum_a = 0;
    for (int j = 0; j < 32; j++) {
        const int c = j == 31 ? 3 : j % 16;
        ones.qs[j] = 1;
        ramp.qs[j] = (int8_t)(j - 16);
        sum_qa += c * (j - 16);
        sum_a += j - 16;
    }
    assert_int_equal(sum_qa, 380);
    assert_int_equal(sum_a, -16);
    const float want_ramp = -69.5f;
    for (uint32_t r = 0; r < f->n_rows; r++) {
        if (!test_row_runs_here(&f->rows[r]))
            continue;
        float s = 0;
        f->rows[r].vec_dot(32, &s, b, &ones);
        if (s != 31.0f)
            fail_msg("af4g32 %s: dot with ones = %.9g, want 31", f->rows[r].isa, s);
        f->rows[r].vec_dot(32, &s, b, &ramp);
        if (s != want_ramp)
            fail_msg("af4g32 %s: dot with ramp = %.9g, want %.9g", f->rows[r].isa, s, want_ramp);
    }
}

/* ---- validate ----------------------------------------------------------- */

static void test_affine_validate_rejects_bad_blocks(void **state)
{
    (void)state;
    const struct splash_format_type *f = find_af(4, 64);
    uint8_t blk[4 * 36] = {0};
    struct splash_err err = {{0}};
    assert_int_equal(f->validate(blk, sizeof blk, 256, &err), SPLASH_OK);
    assert_int_equal(f->validate(blk, sizeof blk - 1, 256, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g64: 143 bytes for 256 values, expected 144");
    assert_int_equal(f->validate(blk, sizeof blk, 250, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g64: 250 values is not a whole number of 64-value groups");
    blk[2 * 36 + 32] = 0xC1;
    blk[2 * 36 + 33] = 0x7F; /* scale of block 2: NaN */
    assert_int_equal(f->validate(blk, sizeof blk, 256, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g64 block 2: scale is NaN");
    blk[2 * 36 + 32] = 0;
    blk[2 * 36 + 33] = 0;
    blk[3 * 36 + 34] = 0x80;
    blk[3 * 36 + 35] = 0xFF; /* bias of block 3: -Inf */
    assert_int_equal(f->validate(blk, sizeof blk, 256, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "af4g64 block 3: bias is Inf");
}

/* ---- SIMD rows against the scalar row --------------------------------------- */

/* Σ over elements of d_a (|s q a| + |z a|): the magnitude the kernels' float
 * roundings scale with (s Σ q a and z Σ a may cancel, so Σ |w a| would not do). */
static double affine_abs_terms(int bits, int group, const uint8_t *w,
                               const struct splash_q8_0_block *y, int64_t n)
{
    const int cb = bits * group / 8, bb = cb + 4;
    double t = 0;
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *b = w + (k / group) * bb;
        const int j = (int)(k % group), p = j * bits;
        const int q = ((b[p / 8] | (b[p / 8 + 1] << 8)) >> (p % 8)) & ((1 << bits) - 1);
        const double s = splash_bf16_to_fp32(block_u16(b, cb));
        const double z = splash_bf16_to_fp32(block_u16(b, cb + 2));
        const double a = y[k / 32].qs[k % 32] * (double)splash_fp16_to_fp32(y[k / 32].d);
        t += fabs(s * q * a) + fabs(z * a);
    }
    return t;
}

/* Why this tolerance: every kernel forms Σ q a and Σ a per Q8_0 block exactly in
 * integers and only scales and accumulates in float, in its own order (the SIMD rows
 * keep 8 or 16 lane sums); each result is within ~(n / 32 + 16) * 2^-24 of the sum of
 * the magnitudes of its terms, and two kernels differ by at most twice that (5.7e-6
 * for n = 1024), while a wrong code, piece or scale moves a dot by far more. */
static double dot_tol(int64_t n, double terms)
{
    return 2.0 * ((double)n / 32.0 + 16.0) * ldexp(1.0, -24) * terms + 1e-30;
}

static void check_type_rows(int bits, int group, int64_t n)
{
    const struct splash_format_type *f = find_af(bits, group);
    const int64_t n_w = 3, max_act = 9;
    const size_t w_bytes = splash_format_row_bytes(f, n);
    const size_t a_bytes = (size_t)n / 32 * sizeof(struct splash_q8_0_block);
    uint8_t *w = malloc(n_w * w_bytes);
    struct splash_q8_0_block *act = malloc(max_act * a_bytes);
    float ref[9][3], one[9][3];
    assert_true(w && act);
    for (size_t i = 0; i < n_w * w_bytes; i++)
        w[i] = (uint8_t)rng_next();
    for (int64_t b = 0; b < n_w * n / group; b++) {
        uint8_t *blk = w + b * f->block_bytes + bits * group / 8;
        const uint16_t s = splash_fp32_to_bf16((rng_uniform() - 0.5f) * 0.1f);
        const uint16_t z = splash_fp32_to_bf16((rng_uniform() - 0.5f) * 4.0f);
        blk[0] = (uint8_t)s;
        blk[1] = (uint8_t)(s >> 8);
        blk[2] = (uint8_t)z;
        blk[3] = (uint8_t)(z >> 8);
    }
    test_random_q8_0(&rng_state, act, max_act * n / 32);
    const struct splash_kernel_row *scalar = &f->rows[f->n_rows - 1];
    for (int64_t j = 0; j < max_act; j++)
        for (int64_t i = 0; i < n_w; i++)
            scalar->vec_dot(n, &ref[j][i], w + i * w_bytes, act + j * (n / 32));
    for (uint32_t r = 0; r + 1 < f->n_rows; r++) {
        const struct splash_kernel_row *row = &f->rows[r];
        if (!test_row_runs_here(row))
            continue;
        for (int64_t j = 0; j < max_act; j++) {
            for (int64_t i = 0; i < n_w; i++) {
                float s = NAN;
                row->vec_dot(n, &s, w + i * w_bytes, act + j * (n / 32));
                one[j][i] = s;
                const double t =
                    affine_abs_terms(bits, group, w + i * w_bytes, act + j * (n / 32), n);
                if (!(fabs(s - ref[j][i]) <= dot_tol(n, t)))
                    fail_msg("af%dg%d n=%d %s vec_dot(w%d, a%d) = %.9g, scalar %.9g", bits, group,
                             (int)n, row->isa, (int)i, (int)j, s, ref[j][i]);
            }
        }
        const struct test_rows rows = {n, w, w_bytes, n_w, act, a_bytes, max_act};
        const struct test_mul_rows_rule rule = {.vec_dot = "vec_dot", .out_stride = 5};
        test_mul_rows_match(f->name, row, &rows, &rule, &one[0][0]);
    }
    free(act);
    free(w);
}

static void test_affine_simd_rows_match_scalar(void **state)
{
    (void)state;
    for (size_t b = 0; b < 6; b++)
        for (size_t g = 0; g < 3; g++)
            check_type_rows(all_bits[b], all_groups[g], 1024);
    /* an odd number of Q8_0 blocks (the AVX-512 rows pair them) and short rows */
    for (size_t b = 0; b < 6; b++) {
        check_type_rows(all_bits[b], 32, 96);
        check_type_rows(all_bits[b], 32, 32);
        check_type_rows(all_bits[b], 64, 192);
    }
}

/* The scalar row against the dequantized weights and activations in float64: the
 * identity Σ (s q + z) a = s Σ q a + z Σ a the kernels rely on. */
static void test_affine_scalar_dot_matches_dequantized_dot(void **state)
{
    (void)state;
    for (size_t b = 0; b < 6; b++) {
        for (size_t g = 0; g < 3; g++) {
            const int bits = all_bits[b], group = all_groups[g];
            const struct splash_format_type *f = find_af(bits, group);
            const int64_t n = 512;
            float x[512], wf[512];
            uint8_t w[512 + 128];
            struct splash_q8_0_block act[16];
            for (int k = 0; k < n; k++)
                x[k] = (rng_uniform() - 0.3f) * 2.0f;
            f->from_float(x, w, n, NULL);
            f->to_float(w, wf, n);
            for (int i = 0; i < 16; i++) {
                act[i].d = splash_fp32_to_fp16(0.01f + 0.02f * rng_uniform());
                for (int j = 0; j < 32; j++)
                    act[i].qs[j] = (int8_t)((int)(rng_next() % 255) - 127);
            }
            double ref = 0;
            for (int k = 0; k < n; k++)
                ref += (double)wf[k] * act[k / 32].qs[k % 32] * splash_fp16_to_fp32(act[k / 32].d);
            float s = NAN;
            f->rows[f->n_rows - 1].vec_dot(n, &s, w, act);
            const double t = affine_abs_terms(bits, group, w, act, n);
            if (!(fabs(s - ref) <= dot_tol(n, t)))
                fail_msg("af%dg%d: scalar dot %.9g, dequantized dot %.9g", bits, group, s, ref);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_affine_descriptors_cover_every_mlx_width),
        cmocka_unit_test(test_affine_codes_crossing_words_decode),
        cmocka_unit_test(test_affine_2_4_8_bit_words_decode),
        cmocka_unit_test(test_affine_import_converts_scale_dtypes_and_refuses_bad_planes),
        cmocka_unit_test(test_affine_quantize_matches_mlx_by_hand),
        cmocka_unit_test(test_affine_quantize_3_bit_stream_by_hand),
        cmocka_unit_test(test_affine_vec_dot_by_hand),
        cmocka_unit_test(test_affine_validate_rejects_bad_blocks),
        cmocka_unit_test(test_affine_simd_rows_match_scalar),
        cmocka_unit_test(test_affine_scalar_dot_matches_dequantized_dot),
    };
    return cmocka_run_group_tests(tests, test_formats_setup, test_formats_teardown);
}
