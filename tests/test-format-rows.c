/* Every registered format type's kernel rows, from one table.
 *
 * The test walks the registry, not a list: each type a plugin registers must have an entry
 * in `entries` below (a type without one fails, so does an entry naming no type), and
 * gets the checks its entry asks for:
 *   - a plain type: every SIMD row this CPU runs against the scalar reference row, vec_dot
 *     within the entry's tolerance and mul_rows its vec_dot bit for bit, on quantized random
 *     rows and on random valid blocks (tests/support/kernel_rows.h);
 *   - a repacked type (SPLASH_FORMAT_REPACKED, e.g. Q4_K_R16): the shared 16-row repack
 *     checks against ggml's reference blocks and dot products of the plain type
 *     (tests/support/repack_check.h, ../shared/testdata/quant README section 5): descriptor,
 *     to_float bit for bit, mul_rows against float64 dots, SIMD rows against the scalar row,
 *     validate, and, as the entry says, ggml's dotref, ggml's vec_dot bits, a plain row's
 *     bits, batch bits and checks of the format's own (NaN scales, special scale bytes);
 *   - an activation-only type (Q8_K, Q8_1) has no rows and needs no entry.
 * The plugins' own tests (test-format-kquants.c, ...) hold the plain types to ggml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/registry.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

/* ---- random plain blocks for the repack checks ------------------------------------ */

/* Random bytes, then n_scales fp16 scales in [1e-4, 1e-2) at byte `at` (d, then dmin). */
static void fp16_scales_at(uint64_t *rng, uint8_t *q, int64_t n_blocks, size_t bytes, size_t at,
                           int n_scales)
{
    for (int64_t b = 0; b < n_blocks; b++, q += bytes) {
        for (size_t k = 0; k < bytes; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        for (int h = 0; h < n_scales; h++) {
            const uint16_t v = splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
            memcpy(q + at + 2 * h, &v, 2);
        }
    }
}

/* Random bytes (every level, scale and sign pattern), d (the last 2 bytes) in [5e-4, 1.5e-3). */
static void fp16_d_last(uint64_t *rng, uint8_t *q, int64_t n_blocks, size_t bytes)
{
    for (int64_t b = 0; b < n_blocks; b++, q += bytes) {
        for (size_t k = 0; k < bytes; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint16_t d = splash_fp32_to_fp16(1e-3f * (0.5f + test_splitmix_uniform(rng)));
        memcpy(q + bytes - 2, &d, 2);
    }
}

/* An fp16 of random sign and mantissa with exponent field 5..24 (2^-10 .. 2^9), or, one
 * time in 16, subnormal (exponent field 0). */
static uint16_t random_fp16(uint64_t *rng)
{
    const uint64_t r = test_splitmix64(rng);
    const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
    return r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
}

/* Random codes after n_scales scales of random_fp16 (d, then m) at byte 0. */
static void signed_fp16_scales(uint64_t *rng, uint8_t *q, int64_t n_blocks, size_t bytes,
                               int n_scales)
{
    for (int64_t b = 0; b < n_blocks; b++, q += bytes) {
        for (size_t k = 2 * (size_t)n_scales; k < bytes; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        for (int h = 0; h < n_scales; h++) {
            const uint16_t v = random_fp16(rng);
            q[2 * h] = (uint8_t)v;
            q[2 * h + 1] = (uint8_t)(v >> 8);
        }
    }
}

static void q2_k_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 84, 80, 2); /* d, dmin after 16 scales and 64 qs */
}
static void q4_k_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 144, 0, 2);
}
static void q5_k_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 176, 0, 2);
}
static void q3_k_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_d_last(r, q, n, 110);
}
static void q6_k_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_d_last(r, q, n, 210);
}
static void iq1_s_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 50, 0, 1);
}
static void iq2_xxs_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 66, 0, 1);
}
static void iq2_xs_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 74, 0, 1);
}
static void iq2_s_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 82, 0, 1);
}
static void iq3_xxs_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 98, 0, 1);
}
static void iq3_s_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 110, 0, 1);
}
static void iq4_xs_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    fp16_scales_at(r, q, n, 136, 0, 1);
}
static void q4_0_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 18, 1);
}
static void q5_0_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 22, 1); /* fp16 d, 4 fifth-bit bytes, 16 codes */
}
static void q4_1_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 20, 2); /* d and m of independent sign and magnitude */
}
static void q5_1_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 24, 2);
}
static void q2_0_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 18, 1); /* all four codes, though ggml never makes 3 */
}
static void pq2_0_blocks(uint64_t *r, uint8_t *q, int64_t n)
{
    signed_fp16_scales(r, q, n, 34, 1); /* 128 values: fp16 d, 32 code bytes */
}

/* MLX affine blocks of G values at 4 or 8 bits: random codes, then a bf16 scale of random
 * sign and magnitude (in [1e-3, 1e-2) per 16 levels) and a bias putting the codes' zero at a
 * random level (as MLX's quantizer does: bias = -s q0), off by up to half a step. */
static void af_blocks(uint64_t *r, uint8_t *q, int64_t n, int bits, int group)
{
    const size_t cb = (size_t)(bits * group / 8);
    const int levels = 1 << bits;
    for (int64_t b = 0; b < n; b++, q += cb + 4) {
        for (size_t k = 0; k < cb; k++)
            q[k] = (uint8_t)test_splitmix64(r);
        const float mag = (1e-3f + 9e-3f * test_splitmix_uniform(r)) * 16.0f / (float)levels;
        const float s = test_splitmix64(r) & 1 ? -mag : mag;
        const float q0 =
            (float)(test_splitmix64(r) % (uint64_t)levels) + test_splitmix_uniform(r) - 0.5f;
        const uint16_t sh = splash_fp32_to_bf16(s), zh = splash_fp32_to_bf16(-s * q0);
        q[cb] = (uint8_t)sh;
        q[cb + 1] = (uint8_t)(sh >> 8);
        q[cb + 2] = (uint8_t)zh;
        q[cb + 3] = (uint8_t)(zh >> 8);
    }
}
#define AF_BLOCKS(bits, group)                                                                     \
    static void af##bits##g##group##_blocks(uint64_t *r, uint8_t *q, int64_t n)                    \
    {                                                                                              \
        af_blocks(r, q, n, bits, group);                                                           \
    }
AF_BLOCKS(4, 32)
AF_BLOCKS(4, 64)
AF_BLOCKS(4, 128)
AF_BLOCKS(8, 32)
AF_BLOCKS(8, 64)
AF_BLOCKS(8, 128)

/* IQ1_M keeps d in the top nibbles of its four scale words (bytes 48..55). */
static void iq1_m_blocks(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += 56) {
        for (int k = 0; k < 56; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint16_t v = splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
        for (int w = 0; w < 4; w++)
            q[48 + 2 * w + 1] = (uint8_t)((q[48 + 2 * w + 1] & 0x0F) | ((v >> 4 * w) & 0xF) << 4);
    }
}

/* IQ4_NL: a finite fp16 d of either sign, exponent field 1..29 (2^-14 .. 2^14), one block
 * in 16 subnormal. */
static void iq4_nl_blocks(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += 18) {
        for (int k = 2; k < 18; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const unsigned sign = (unsigned)(r >> 20 & 1) << 15, mant = (unsigned)(r >> 8 & 0x3FF);
        const unsigned ex = r % 16 == 0 ? 0 : 1 + (unsigned)(r >> 24) % 29;
        const uint16_t d = (uint16_t)(sign | ex << 10 | (ex ? mant : mant | 1));
        memcpy(q, &d, 2);
    }
}

/* MXFP4: E8M0 scales 2^(e - 127) for e in [100, 150), one block in 16 with e in 0..3
 * (scales times d subnormal). */
static void mxfp4_blocks(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += 17) {
        for (int k = 1; k < 17; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        q[0] = r % 16 == 0 ? (uint8_t)(r >> 8 & 3) : (uint8_t)(100 + (r >> 8) % 50);
    }
}

/* NVFP4: any byte is a UE4M3 scale as GGUF reads it (2^-9 .. 480, bit 7 ignored); one
 * scale in 16 is a byte read specially: 0x7f (0), 0xff (480), 0x00, 0x80 (0), 0x01. */
static void nvfp4_blocks(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    static const uint8_t special[5] = {0x7f, 0xff, 0x00, 0x80, 0x01};
    for (int64_t b = 0; b < n_blocks; b++, q += 36) {
        for (int k = 4; k < 36; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        for (int s = 0; s < 4; s++) {
            const uint64_t r = test_splitmix64(rng);
            q[s] = r % 16 == 0 ? special[(r >> 8) % 5] : (uint8_t)(r >> 16);
        }
    }
}

/* ---- checks of a format's own --------------------------------------------------- */

/* Q3_K_R16, Q6_K_R16: validate refuses a count that is not whole 16-row blocks and a NaN d
 * (the 16 rows' d are a block's last 32 bytes), naming the block. */
static void validate_refuses_nan_d(const struct test_repack_case *c)
{
    const struct splash_format_type *f = test_format_find(c->repacked);
    size_t bytes;
    int64_t n_elems;
    uint8_t *img = test_repack_image(32, &bytes, &n_elems);
    struct splash_err err = {{0}};
    assert_int_not_equal(f->validate(img, bytes, n_elems - 256, &err), SPLASH_OK);
    const uint16_t nan = 0x7E00; /* row 5 of the third block */
    memcpy(img + 2 * f->block_bytes + f->block_bytes - 32 + 2 * 5, &nan, 2);
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 2"));
    assert_non_null(strstr(err.msg, "NaN"));
    free(img);
}

/* Q4_1_R16, Q5_1_R16: validate refuses a count that is not whole 16-row blocks, a NaN m
 * (the 16 m follow the 16 d) and an infinite d, naming the block, the scale and the row. */
static void validate_refuses_nan_m_and_inf_d(const struct test_repack_case *c)
{
    const struct splash_format_type *f = test_format_find(c->repacked);
    size_t bytes;
    int64_t n_elems;
    uint8_t *img = test_repack_image(32, &bytes, &n_elems);
    struct splash_err err = {{0}};
    assert_int_not_equal(f->validate(img, bytes, n_elems - 32, &err), SPLASH_OK);
    const uint16_t nan = 0x7E00, inf = 0xFC00;
    uint8_t *blk = img + 2 * f->block_bytes;
    uint16_t keep;
    memcpy(&keep, blk + 32 + 2 * 5, 2);
    memcpy(blk + 32 + 2 * 5, &nan, 2); /* m of row 5 of the third block */
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 2"));
    assert_non_null(strstr(err.msg, "m (row 5)"));
    assert_non_null(strstr(err.msg, "NaN"));
    memcpy(blk + 32 + 2 * 5, &keep, 2);
    memcpy(img + 2 * 15, &inf, 2); /* d of row 15 of the first block */
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 0"));
    assert_non_null(strstr(err.msg, "d (row 15)"));
    assert_non_null(strstr(err.msg, "Inf"));
    free(img);
}

/* NVFP4_R16: the scale bytes GGUF reads specially keep their values through the repack
 * (models.md: 0x7f reads as 0, bit 7 is ignored otherwise): 16 rows of one block of codes
 * 1 (E2M1 0.5) whose scales are, per row r and sub-block s, one of 0x7f (0), 0xff (480),
 * 0xb8 (bit 7 and 1.0), 0x01 (2^-9), 0x00 (0), 0x7e (448), 0x08 (2^-6, the smallest
 * normal) and 0x80 (0). */
static void nvfp4_scale_bytes_read_as_gguf(const struct test_repack_case *c)
{
    (void)c;
    static const uint8_t bytes[8] = {0x7f, 0xff, 0xb8, 0x01, 0x00, 0x7e, 0x08, 0x80};
    static const float value[8] = {0.0f, 480.0f, 1.0f, 0x1p-9f, 0.0f, 448.0f, 0x1p-6f, 0.0f};
    const struct splash_format_type *f = test_format_find("NVFP4_R16"),
                                    *p = test_format_find("NVFP4");
    uint8_t q[16 * 36], img[16 * 36];
    float got[16 * 64];
    for (int r = 0; r < 16; r++) {
        for (int s = 0; s < 4; s++)
            q[r * 36 + s] = bytes[(r + 3 * s) % 8];
        memset(q + r * 36 + 4, 0x11, 32);
    }
    p->repack(64, q, 16, img);
    f->to_float(img, got, 16 * 64);
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 64; k++) {
            const float want = 0.5f * value[(r + 3 * (k / 16)) % 8];
            if (got[r * 64 + k] != want)
                fail_msg("row %d value %d (scale byte 0x%02x): %.9g, want %.9g", r, k,
                         bytes[(r + 3 * (k / 16)) % 8], (double)got[r * 64 + k], (double)want);
        }
}

/* ---- the table ------------------------------------------------------------------ */

struct shape {
    int64_t n, n_rows;
};

struct entry {
    const char *name; /* a registered type; "af*": every type whose name starts "af" */
    /* plain types: a SIMD row's vec_dot against the scalar row's, as a fraction of
     * sum |w a|; and whether random valid blocks are fair weights (not where any bytes
     * are valid scales that overflow the dot) */
    double simd_tol;
    int no_random_blocks;
    /* repacked types */
    const struct test_repack_case *repack;
    struct shape simd[4];   /* test_repack_check_simd_rows shapes; none: 2048 x 53 */
    int ggml_dot_bits;      /* every row gives ggml's own vec_dot bits (<ref>.dot.f32) */
    struct {                /* every row gives this plain row's bits */
        const char *isa;
        int64_t n[2];
        uint64_t seed;
    } plain_bits;
    struct {                /* every row gives each activation row alone its batch bits */
        int64_t n, n_rows;
        uint64_t seed;
        int64_t batches[9]; /* batch sizes, 0-terminated; none: 2, 9, 16, 23 */
    } batch_bits;
    void (*own)(const struct test_repack_case *c); /* a check of the format's own */
    const char *own_name;                           /* its test's name */
};

/* The repacked formats' tolerances (test_repack_case): why each is what it is.
 *
 * dot_tol, against float64 dots of ggml's values: the kernels sum each (sub-)block exactly
 * in integers (as ggml does) and only scale and accumulate in float, a few roundings of
 * 2^-24 per block of partial sums bounded by sum |w a| (a few times that with K-quant mins
 * that subtract), so 32 blocks of a 1024-value row stay below ~4e-6; 1e-5 leaves room and
 * is far below an indexing, sign or scale mistake (O(1e-2)). Q4_1 and Q5_1 take a block's
 * dot as d d_a sum(q a) + m s_a, s_a the Q8_1 block's fp16 d_a sum(q_a): its rounding
 * (2^-11) moves a dot by up to 2^-11 |m| sum |a|, not bounded by sum |w a|; with the
 * harness's activations (one value in 97 is 40x) the worst seen is 1.7e-3 (ggml's own
 * vec_dot is 3.2e-4 off its dotref, index.json), hence 5e-3, with their sums pinned bit for
 * bit by ggml's vec_dot and the plain AVX2 row. PQ2_0 rounds five times per 128-value block
 * (four Q8_0 blocks' isum d, and the running FMA with d_w): 66 * 5 * 6e-8 = 2e-5 for an
 * 8320-value row, the plain rows 3.1e-5, so 6e-5 between any two.
 *
 * simd_tol, an AVX-512 row against the scalar row on random blocks: 0 where the row takes
 * the scalar row's integer sums and float steps; ~1e-6 where it only fuses the per-block
 * multiply-add (seen within 1e-7); 2e-6 for Q3_K/Q6_K (per sub-block vs per block steps).
 * simd_tail_tol: the group rows must be the scalar row's bits, the plain tail rows within
 * (nb + 1) * 2 * 6e-8 of the exact value for nb blocks, twice that between two rows: 1e-5
 * for 65 blocks, 4e-5 for 257 (Q4_0, Q5_0), 8e-5 for NVFP4's 8256 values (one rounding per
 * 16-value sub-block) and Q2_0's 258 Q8_0 blocks. */
#define R16(plain_, ref_, bv, bb, act, blocks, dot, simd)                                      \
    .plain = plain_, .repacked = plain_ "_R16", .ref = ref_, .block_values = bv,               \
    .block_bytes = bb, .act_type = act, .random_blocks = blocks, .dot_tol = dot, .simd_tol = simd

static const struct test_repack_case q2_k_r16 = {R16("Q2_K", "q2_K", 256, 84, "Q8_K",
                                                         q2_k_blocks, 1e-5, 1e-6),
                                                 .scalar_is_plain = 1};
static const struct test_repack_case q3_k_r16 = {
    R16("Q3_K", "q3_K", 256, 110, "Q8_K", q3_k_blocks, 1e-5, 2e-6), .validate_rows = 32,
    .bits_per_weight = 3.4375f};
static const struct test_repack_case q4_k_r16 = {R16("Q4_K", "q4_K", 256, 144, "Q8_K",
                                                         q4_k_blocks, 1e-5, 1e-6),
                                                 .scalar_is_plain = 1};
static const struct test_repack_case q5_k_r16 = {
    R16("Q5_K", "q5_K", 256, 176, "Q8_K", q5_k_blocks, 1e-5, 1e-6), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case q6_k_r16 = {
    R16("Q6_K", "q6_K", 256, 210, "Q8_K", q6_k_blocks, 1e-5, 2e-6), .validate_rows = 32,
    .bits_per_weight = 6.5625f};
static const struct test_repack_case iq1_s_r16 = {
    R16("IQ1_S", "iq1_s", 256, 50, "Q8_K", iq1_s_blocks, 1e-5, 0), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq1_m_r16 = {
    R16("IQ1_M", "iq1_m", 256, 56, "Q8_K", iq1_m_blocks, 1e-5, 0), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq2_xxs_r16 = {
    R16("IQ2_XXS", "iq2_xxs", 256, 66, "Q8_K", iq2_xxs_blocks, 1e-5, 1e-6), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq2_xs_r16 = {
    R16("IQ2_XS", "iq2_xs", 256, 74, "Q8_K", iq2_xs_blocks, 1e-5, 1e-6), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq2_s_r16 = {
    R16("IQ2_S", "iq2_s", 256, 82, "Q8_K", iq2_s_blocks, 1e-5, 1e-6), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq3_xxs_r16 = {
    R16("IQ3_XXS", "iq3_xxs", 256, 98, "Q8_K", iq3_xxs_blocks, 1e-5, 0), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq3_s_r16 = {
    R16("IQ3_S", "iq3_s", 256, 110, "Q8_K", iq3_s_blocks, 1e-5, 0), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case iq4_xs_r16 = {
    R16("IQ4_XS", "iq4_xs", 256, 136, "Q8_K", iq4_xs_blocks, 1e-5, 1e-6), .scalar_is_plain = 1,
    .simd_batch_bits = 1};
static const struct test_repack_case q4_0_r16 = {
    R16("Q4_0", "q4_0", 32, 18, "Q8_0", q4_0_blocks, 1e-5, 0), .simd_tail_tol = 4e-5,
    .gguf_type_id = 2, .dotref = 1, .mul_rows_batch_bits = 1};
static const struct test_repack_case q5_0_r16 = {
    R16("Q5_0", "q5_0", 32, 22, "Q8_0", q5_0_blocks, 1e-5, 0), .simd_tail_tol = 4e-5,
    .gguf_type_id = 6, .dotref = 1, .simd_batch_bits = 1, .mul_rows_batch_bits = 1};
static const struct test_repack_case iq4_nl_r16 = {
    R16("IQ4_NL", "iq4_nl", 32, 18, "Q8_0", iq4_nl_blocks, 1e-5, 0), .simd_tail_tol = 1e-5,
    .gguf_type_id = 20, .dotref = 1, .mul_rows_batch_bits = 1};
static const struct test_repack_case q4_1_r16 = {
    R16("Q4_1", "q4_1", 32, 20, "Q8_1", q4_1_blocks, 5e-3, 0),
    .simd_batch_bits = 1, .mul_rows_batch_bits = 1, .validate_rows = 32, .gguf_type_id = 3,
    .dotref = 1};
static const struct test_repack_case q5_1_r16 = {
    R16("Q5_1", "q5_1", 32, 24, "Q8_1", q5_1_blocks, 5e-3, 0),
    .simd_batch_bits = 1, .mul_rows_batch_bits = 1, .validate_rows = 32, .gguf_type_id = 7,
    .dotref = 1};
static const struct test_repack_case mxfp4_r16 = {
    R16("MXFP4", "mxfp4", 32, 17, "Q8_0", mxfp4_blocks, 1e-5, 0), .simd_tail_tol = 1e-5,
    .gguf_type_id = 39, .dotref = 1, .mul_rows_batch_bits = 1};
static const struct test_repack_case nvfp4_r16 = {
    R16("NVFP4", "nvfp4", 64, 36, "Q8_0", nvfp4_blocks, 1e-5, 0), .simd_tail_tol = 8e-5,
    .gguf_type_id = 40, .dotref = 1, .mul_rows_batch_bits = 1, .simd_batch_bits = 1,
    .bits_per_weight = 4.5f};
static const struct test_repack_case q2_0_r16 = {
    R16("Q2_0", "q2_0", 64, 18, "Q8_0", q2_0_blocks, 1e-5, 0), .simd_tail_tol = 8e-5,
    .simd_batch_bits = 1, .gguf_type_id = 42, .dotref = 1, .mul_rows_batch_bits = 1};
/* PQ2_0 (Prism ML's type 142) has no ggml reference: random blocks and the plain type's
 * values stand in, and every row is also held to the plain scalar vec_dot. */
static const struct test_repack_case pq2_0_r16 = {
    R16("PQ2_0", NULL, 128, 34, "Q8_0", pq2_0_blocks, 6e-5, 0),
    .plain_tol = 6e-5, .simd_tail_tol = 6e-5, .simd_rows_exact = 1, .simd_batch_bits = 1,
    .mul_rows_batch_bits = 1};

/* MLX affine has no ggml reference either: random blocks and the plain type's values stand
 * in, and every row is also held to the plain scalar vec_dot. Every row rounds a few times
 * per 32-value piece (its scaled sum, the bias's factor, the group's FMAs), with terms up to
 * ~4x sum |w a| (the bias takes the codes' offset back: w = s (q - q0)); the worst seen is
 * 1.3e-7, so 2e-6 between any two rows, far below a wrong code, nibble or scale (O(1e-2)). */
#define AF_R16(bits, grp)                                                                      \
    R16("af" #bits "g" #grp, NULL, grp, bits * grp / 8 + 4, "Q8_0", af##bits##g##grp##_blocks,  \
        2e-6, 0),                                                                              \
        .plain_tol = 2e-6, .simd_tail_tol = 2e-6, .simd_rows_exact = 1, .simd_batch_bits = 1,  \
        .mul_rows_batch_bits = 1, .validate_rows = 32
static const struct test_repack_case af4g32_r16 = {AF_R16(4, 32)};
static const struct test_repack_case af4g64_r16 = {AF_R16(4, 64)};
static const struct test_repack_case af4g128_r16 = {AF_R16(4, 128)};
static const struct test_repack_case af8g32_r16 = {AF_R16(8, 32)};
static const struct test_repack_case af8g64_r16 = {AF_R16(8, 64)};
static const struct test_repack_case af8g128_r16 = {AF_R16(8, 128)};

/* Plain types. Their SIMD rows form the same integer (sub-)block sums as the scalar row
 * and differ only in the order of float scaling and accumulation: for 1024 values at most
 * (blocks + 16) * 2 * 2^-24 of sum |w a| (5.7e-6 for 32-value blocks), so 1e-5 unless a
 * type says otherwise; a wrong code, scale or order is O(1e-2). */
#define PLAIN(name_) {.name = name_, .simd_tol = 1e-5}
/* 65 and 257 blocks of 32 values: the tail rows and tiles that split a row into K chunks */
#define SIMD_Q8_0_SHAPES {{2080, 53}, {8224, 21}}

static const struct entry entries[] = {
    /* MLX affine 4/8-bit repacks (ahead of "af*"): ~65 and ~257 Q8_0 blocks (K chunks) with
     * tail rows, and one whole group */
    {.name = "af4g32_R16", .repack = &af4g32_r16, .simd = {{2080, 53}, {8224, 21}},
     .batch_bits = {4128, 37, 0xAF432ull}},
    {.name = "af4g64_R16", .repack = &af4g64_r16, .simd = {{2112, 53}, {8256, 21}, {1024, 16}},
     .batch_bits = {4160, 37, 0xAF464ull}},
    {.name = "af4g128_R16", .repack = &af4g128_r16, .simd = {{2176, 53}, {8320, 21}},
     .batch_bits = {4224, 37, 0xAF4128ull}},
    {.name = "af8g32_R16", .repack = &af8g32_r16, .simd = {{2080, 53}, {8224, 21}},
     .batch_bits = {4128, 37, 0xAF832ull}},
    {.name = "af8g64_R16", .repack = &af8g64_r16, .simd = {{2112, 53}, {8256, 21}, {1024, 16}},
     .batch_bits = {4160, 37, 0xAF864ull}},
    {.name = "af8g128_R16", .repack = &af8g128_r16, .simd = {{2176, 53}, {8320, 21}},
     .batch_bits = {4224, 37, 0xAF8128ull}},
    /* the affine plugin's af<bits>g<group> types: their bf16 scales and biases are valid
     * at any magnitude, so random blocks overflow the dot to Inf and NaN */
    {.name = "af*", .simd_tol = 1e-5, .no_random_blocks = 1},
    /* float rows sum 1024 products in float in their own orders: the float test's 1e-6 */
    {.name = "F32", .simd_tol = 1e-6},
    {.name = "F16", .simd_tol = 1e-6},
    {.name = "BF16", .simd_tol = 1e-6},
    {.name = "FP8_E4M3", .simd_tol = 1e-6},
    PLAIN("Q4_0"), PLAIN("Q4_1"), PLAIN("Q5_0"), PLAIN("Q5_1"), PLAIN("Q8_0"), PLAIN("Q1_0"),
    PLAIN("Q2_K"), PLAIN("Q3_K"), PLAIN("Q4_K"), PLAIN("Q5_K"), PLAIN("Q6_K"),
    PLAIN("IQ1_S"), PLAIN("IQ1_M"), PLAIN("IQ2_XXS"), PLAIN("IQ2_XS"), PLAIN("IQ2_S"),
    PLAIN("IQ3_XXS"), PLAIN("IQ3_S"), PLAIN("IQ4_NL"), PLAIN("IQ4_XS"),
    PLAIN("MXFP4"), PLAIN("MXFP4_MLX"), PLAIN("NVFP4"), PLAIN("NVFP4_G"),
    PLAIN("Q2_0"), PLAIN("PQ2_0"),

    {.name = "Q2_K_R16", .repack = &q2_k_r16, .batch_bits = {4096, 37, 0xB17B17ull}},
    {.name = "Q3_K_R16", .repack = &q3_k_r16, .own = validate_refuses_nan_d,
     .own_name = "validate refuses a NaN d"},
    {.name = "Q4_K_R16", .repack = &q4_k_r16},
    {.name = "Q5_K_R16", .repack = &q5_k_r16},
    {.name = "Q6_K_R16", .repack = &q6_k_r16, .own = validate_refuses_nan_d,
     .own_name = "validate refuses a NaN d"},
    {.name = "IQ1_S_R16", .repack = &iq1_s_r16},
    {.name = "IQ1_M_R16", .repack = &iq1_m_r16},
    {.name = "IQ2_XXS_R16", .repack = &iq2_xxs_r16},
    {.name = "IQ2_XS_R16", .repack = &iq2_xs_r16},
    {.name = "IQ2_S_R16", .repack = &iq2_s_r16},
    {.name = "IQ3_XXS_R16", .repack = &iq3_xxs_r16},
    {.name = "IQ3_S_R16", .repack = &iq3_s_r16},
    {.name = "IQ4_XS_R16", .repack = &iq4_xs_r16},
    {.name = "Q4_0_R16", .repack = &q4_0_r16, .simd = SIMD_Q8_0_SHAPES},
    {.name = "Q5_0_R16", .repack = &q5_0_r16, .simd = SIMD_Q8_0_SHAPES,
     .batch_bits = {8224, 37, 0x51D0}},
    {.name = "IQ4_NL_R16", .repack = &iq4_nl_r16, .simd = SIMD_Q8_0_SHAPES},
    /* Q4_1 and Q5_1 repacks take the plain AVX2 row's float steps, at 65 and at 257 blocks
     * (scales of 9 or more rows on the heap). Q4_1's are those of ggml's vec_dot in quant/;
     * Q5_1's are ggml's generic block order, which the golden model logits were made with
     * (position 0 of the tiny Q5_1 model: 5e-7 off in that order, 0.030 in quant/'s 8-lane
     * order), so they do not give quant/'s vec_dot bits. */
    {.name = "Q4_1_R16", .repack = &q4_1_r16, .simd = SIMD_Q8_0_SHAPES, .ggml_dot_bits = 1,
     .plain_bits = {"avx2", {2080, 8224}, 0x41B175ull}, .batch_bits = {4128, 35, 0x41A1B16ull},
     .own = validate_refuses_nan_m_and_inf_d, .own_name = "validate refuses NaN m, Inf d"},
    {.name = "Q5_1_R16", .repack = &q5_1_r16, .simd = SIMD_Q8_0_SHAPES,
     .plain_bits = {"avx2", {2080, 8224}, 0x51B175ull}, .batch_bits = {4128, 35, 0x51A1B16ull},
     .own = validate_refuses_nan_m_and_inf_d, .own_name = "validate refuses NaN m, Inf d"},
    {.name = "MXFP4_R16", .repack = &mxfp4_r16, .simd = SIMD_Q8_0_SHAPES},
    /* 33 and 129 blocks: K chunks, prepared rows on the heap */
    {.name = "NVFP4_R16", .repack = &nvfp4_r16, .simd = {{2112, 53}, {8256, 21}},
     .batch_bits = {4160, 37, 0x4E5F5034ull}, .own = nvfp4_scale_bytes_read_as_gguf,
     .own_name = "scale bytes read as GGUF reads them"},
    {.name = "Q2_0_R16", .repack = &q2_0_r16, .simd = {{2048, 53}, {8256, 21}},
     .batch_bits = {8192, 37, 0xB17B175ull}},
    /* one group; two and a tail of 8; one and a tail of 3; 65 blocks (K chunks) */
    {.name = "PQ2_0_R16", .repack = &pq2_0_r16, .simd = {{1024, 16}, {1024, 40}, {1024, 19}, {8320, 21}},
     .batch_bits = {8320, 21, 0x10C0ull, {1, 2, 7, 8, 9, 16, 17, 33}}},
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

static int entry_matches(const struct entry *e, const char *name)
{
    const size_t n = strlen(e->name);
    if (n && e->name[n - 1] == '*')
        return !strncmp(e->name, name, n - 1);
    return !strcmp(e->name, name);
}

/* ---- plain types: SIMD rows against the scalar row ------------------------------ */

enum { PLAIN_N = 1024, PLAIN_W = 11, PLAIN_A = 9 };

/* Normal-ish values with one in 97 forty times larger (j varies where). */
static void random_values(uint64_t *rng, float *x, int64_t n, int j)
{
    for (int64_t k = 0; k < n; k++) {
        const float u = test_splitmix_uniform(rng) + test_splitmix_uniform(rng) +
                        test_splitmix_uniform(rng) - 1.5f;
        x[k] = k % 97 == (j * 7) % 97 ? 40.0f * u : u;
    }
}

/* A row of random valid blocks: each block's bytes redrawn until validate accepts them
 * (bit patterns a quantizer may never make). */
static void random_valid_row(const struct splash_format_type *f, uint64_t *rng, uint8_t *row,
                             size_t bytes)
{
    for (size_t b = 0; b < bytes; b += f->block_bytes) {
        struct splash_err err;
        int tries = 0;
        do {
            if (++tries > 10000)
                fail_msg("%s: no valid random block in 10000 draws (%s)", f->name, err.msg);
            for (size_t o = 0; o < f->block_bytes; o++)
                row[b + o] = (uint8_t)test_splitmix64(rng);
        } while (f->validate(row + b, f->block_bytes, f->block_elems, &err) != SPLASH_OK);
    }
}

struct plain_test {
    const struct splash_format_type *f;
    const struct entry *e;
};

/* PLAIN_W weight rows (quantized random values where the type has a quantizer, random valid
 * blocks otherwise and in the last row, floats and no_random_blocks excepted) against PLAIN_A activation rows:
 * every SIMD row this CPU runs within the entry's tolerance of the scalar row, its mul_rows
 * its vec_dot bit for bit for 1..PLAIN_A activation rows. */
static void check_plain_rows(void **state)
{
    const struct plain_test *t = *state;
    const struct splash_format_type *f = t->f, *a = test_format_find(f->act_type);
    assert_int_equal(PLAIN_N % f->block_elems, 0);
    assert_int_equal(PLAIN_N % a->block_elems, 0);
    assert_non_null(a->from_float);
    const size_t wrb = splash_format_row_bytes(f, PLAIN_N), arb = splash_format_row_bytes(a, PLAIN_N);
    uint8_t *w = malloc(wrb * PLAIN_W), *act = malloc(arb * PLAIN_A);
    float *x = malloc(PLAIN_N * sizeof(float)), *wf = malloc(PLAIN_W * PLAIN_N * sizeof(float));
    float *af = malloc(PLAIN_A * PLAIN_N * sizeof(float));
    float *want = malloc(PLAIN_W * PLAIN_A * sizeof(float));
    assert_true(w && act && x && wf && af && want);
    uint64_t rng = 0xF0A7F0A7ull;
    const int is_float = (f->flags & SPLASH_FORMAT_FLOAT) != 0;
    for (int i = 0; i < PLAIN_W; i++) {
        uint8_t *row = w + (size_t)i * wrb;
        if (f->from_float && (i + 1 < PLAIN_W || is_float || t->e->no_random_blocks)) {
            random_values(&rng, x, PLAIN_N, i);
            f->from_float(x, row, PLAIN_N, NULL);
        } else {
            random_valid_row(f, &rng, row, wrb);
        }
        f->to_float(row, wf + (size_t)i * PLAIN_N, PLAIN_N);
    }
    for (int j = 0; j < PLAIN_A; j++) {
        random_values(&rng, x, PLAIN_N, j + 1);
        a->from_float(x, act + (size_t)j * arb, PLAIN_N, NULL);
        a->to_float(act + (size_t)j * arb, af + (size_t)j * PLAIN_N, PLAIN_N);
    }
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    assert_string_equal(ref->isa, "scalar");
    assert_int_equal(ref->cpu_requires, 0);
    for (int j = 0; j < PLAIN_A; j++)
        for (int i = 0; i < PLAIN_W; i++)
            ref->vec_dot(PLAIN_N, &want[j * PLAIN_W + i], w + (size_t)i * wrb,
                         act + (size_t)j * arb);
    const struct test_rows rows = {.n = PLAIN_N, .w = w, .w_stride = wrb, .n_w = PLAIN_W,
                                   .act = act, .act_stride = arb, .n_act = PLAIN_A};
    test_simd_rows_near_scalar(f, &rows, wf, af, want, t->e->simd_tol, 1);
    free(want);
    free(af);
    free(wf);
    free(x);
    free(act);
    free(w);
}

/* ---- repacked types: the shared checks ------------------------------------------- */

static const struct entry *entry_now;

static int repack_setup(void **state)
{
    entry_now = *state;
    return test_repack_load(entry_now->repack);
}

static int repack_teardown(void **state)
{
    (void)state;
    test_repack_unload();
    return 0;
}

static void descriptor(void **state)
{
    (void)state;
    test_repack_check_descriptor();
}

static void to_float_bits(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void mul_rows_float64(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

static void simd_rows(void **state)
{
    (void)state;
    if (!entry_now->simd[0].n) {
        test_repack_check_simd(); /* 2048 x 53: 3 groups and a tail of 5 */
        return;
    }
    for (size_t k = 0; k < 4 && entry_now->simd[k].n; k++)
        test_repack_check_simd_rows(entry_now->simd[k].n, entry_now->simd[k].n_rows);
}

static void validate(void **state)
{
    (void)state;
    test_repack_check_validate();
}

static void ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void ggml_dot_bits(void **state)
{
    (void)state;
    test_repack_check_ggml_dot_bits();
}

static void plain_row_bits(void **state)
{
    (void)state;
    for (size_t k = 0; k < 2 && entry_now->plain_bits.n[k]; k++)
        test_repack_check_plain_row_bits(entry_now->plain_bits.n[k], entry_now->plain_bits.isa,
                                         entry_now->plain_bits.seed);
}

static void batch_bits(void **state)
{
    (void)state;
    test_repack_check_batch_bits(entry_now->batch_bits.n, entry_now->batch_bits.n_rows,
                                 entry_now->batch_bits.seed, entry_now->batch_bits.batches);
}

static void own_check(void **state)
{
    (void)state;
    entry_now->own(entry_now->repack);
}

/* ---- the registry's types --------------------------------------------------------- */

static void no_entry(void **state)
{
    const struct splash_format_type *f = *state;
    fail_msg("format %s is registered, but test-format-rows.c has no %s entry for it", f->name,
             f->flags & SPLASH_FORMAT_REPACKED ? "repacked (.repack)" : "plain");
}

static void stale_entry(void **state)
{
    fail_msg("test-format-rows.c has an entry %s, but no such format is registered",
             ((const struct entry *)*state)->name);
}

struct test_list {
    struct CMUnitTest *tests;
    size_t n, cap;
    struct plain_test *plain; /* one per plain type, for their tests' states */
    size_t n_plain;
};

static void add(struct test_list *l, const char *type, const char *what, CMUnitTestFunction fn,
                CMFixtureFunction setup, CMFixtureFunction teardown, void *state)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->tests = realloc(l->tests, l->cap * sizeof *l->tests);
        if (!l->tests)
            abort();
    }
    char *name = malloc(strlen(type) + strlen(what) + 3);
    if (!name)
        abort();
    sprintf(name, "%s: %s", type, what);
    l->tests[l->n++] = (struct CMUnitTest){name, fn, setup, teardown, state};
}

static void add_repacked(struct test_list *l, const struct entry *e)
{
    const char *t = e->name;
    void *s = (void *)e;
    add(l, t, "descriptor is a repack of its plain type", descriptor, repack_setup,
        repack_teardown, s);
    add(l, t, "to_float gives ggml's values bit for bit", to_float_bits, repack_setup,
        repack_teardown, s);
    add(l, t, "mul_rows match float64 dots", mul_rows_float64, repack_setup, repack_teardown, s);
    add(l, t, "SIMD rows match the scalar row", simd_rows, repack_setup, repack_teardown, s);
    if (e->repack->dotref)
        add(l, t, "mul_rows match ggml's dotref", ggml_dotref, repack_setup, repack_teardown, s);
    if (e->ggml_dot_bits)
        add(l, t, "mul_rows give ggml's vec_dot bits", ggml_dot_bits, repack_setup,
            repack_teardown, s);
    if (e->plain_bits.isa)
        add(l, t, "rows give the plain row's bits", plain_row_bits, repack_setup, repack_teardown,
            s);
    if (e->batch_bits.n)
        add(l, t, "batches give each row its own bits", batch_bits, repack_setup,
            repack_teardown, s);
    add(l, t, "validate refuses a truncated image", validate, repack_setup, repack_teardown, s);
    if (e->own)
        add(l, t, e->own_name, own_check, repack_setup, repack_teardown, s);
}

/* One test per check of every registered type with rows, in the registry's order. */
static void list_tests(struct splash_registry *r, struct test_list *l)
{
    int used[N_ENTRIES] = {0};
    size_t n_types = 0;
    for (size_t p = 0; p < splash_registry_n_formats(r); p++)
        n_types += splash_registry_format(r, p)->n_types;
    l->plain = calloc(n_types, sizeof *l->plain);
    if (!l->plain)
        abort();
    for (size_t p = 0; p < splash_registry_n_formats(r); p++) {
        const struct splash_format_plugin *fp = splash_registry_format(r, p);
        for (uint32_t ti = 0; ti < fp->n_types; ti++) {
            const struct splash_format_type *f = fp->types[ti];
            if (f->flags & SPLASH_FORMAT_ACTIVATION_ONLY)
                continue; /* no rows to check */
            const struct entry *e = NULL;
            for (size_t k = 0; k < N_ENTRIES && !e; k++)
                if (entry_matches(&entries[k], f->name)) {
                    e = &entries[k];
                    used[k] = 1;
                }
            const int repacked = (f->flags & SPLASH_FORMAT_REPACKED) != 0;
            if (!e || !e->repack != !repacked) {
                add(l, f->name, "has a table entry", no_entry, NULL, NULL, (void *)f);
            } else if (repacked) {
                add_repacked(l, e);
            } else {
                struct plain_test *pt = &l->plain[l->n_plain++];
                pt->f = f;
                pt->e = e;
                add(l, f->name, "SIMD rows match the scalar row", check_plain_rows, NULL, NULL,
                    pt);
            }
        }
    }
    for (size_t k = 0; k < N_ENTRIES; k++)
        if (!used[k])
            add(l, entries[k].name, "entry names a registered type", stale_entry, NULL, NULL,
                (void *)&entries[k]);
}

int main(void)
{
    if (test_formats_setup(NULL))
        return 1;
    struct test_list l = {0};
    list_tests(test_formats_registry(), &l);
    const int failed = _cmocka_run_group_tests("format rows", l.tests, l.n, NULL, NULL);
    for (size_t k = 0; k < l.n; k++)
        free((void *)l.tests[k].name);
    free(l.tests);
    free(l.plain);
    test_formats_teardown(NULL);
    return failed;
}
