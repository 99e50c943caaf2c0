/* MXFP4: GGUF type 39 and MLX's mxfp4 mode (E2M1 codes, an E8M0 scale per 32).
 *
 * Both load into the same 17-byte blocks: MLX's planes (codes in U32 words,
 * least significant nibble first, and a uint8 E8M0 scale per group of 32) are
 * regrouped into GGUF's nibble order by import_planes. Activations are Q8_0
 * (the kquants plugin quantizes them), one Q8_0 block per MXFP4 block. */
#include <math.h>

#include "formats/mxfp4/mxfp4.h"
#include "formats/mxfp4/mxfp4_r16.h"
#include "splash/format.h"
#include "splash/fp.h"

/* ---- conversions ----------------------------------------------------------- */

static void mxfp4_to_float(const void *blocks, float *out, int64_t n)
{
    const struct mxfp4_block *x = blocks;
    for (int64_t i = 0; i < n / MXFP4_QK; i++) {
        const float d = mxfp4_e8m0_half(x[i].e);
        for (int j = 0; j < 16; j++) {
            out[i * MXFP4_QK + j] = mxfp4_e2m1_x2[x[i].qs[j] & 0xf] * d;
            out[i * MXFP4_QK + j + 16] = mxfp4_e2m1_x2[x[i].qs[j] >> 4] * d;
        }
    }
}

/* The code whose value (times d) is nearest x; the first of equals wins. */
static uint8_t mxfp4_nearest(float x, float d)
{
    uint8_t best = 0;
    float best_err = fabsf(mxfp4_e2m1_x2[0] * d - x);
    for (uint8_t c = 1; c < 16; c++) {
        float err = fabsf(mxfp4_e2m1_x2[c] * d - x);
        if (err < best_err) {
            best = c;
            best_err = err;
        }
    }
    return best;
}

/* The GGUF reference quantizer: the scale puts the block's largest magnitude in
 * [4, 8) (the top E2M1 binade), each value takes its nearest code. */
static void mxfp4_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct mxfp4_block *y = blocks;
    for (int64_t i = 0; i < n / MXFP4_QK; i++) {
        const float *xb = x + i * MXFP4_QK;
        float amax = 0.0f;
        for (int j = 0; j < MXFP4_QK; j++)
            if (amax < fabsf(xb[j]))
                amax = fabsf(xb[j]);
        int e = 0;
        if (amax > 0.0f) {
            e = (int)floorf(log2f(amax)) - 2 + 127;
            e = e < 0 ? 0 : e > 254 ? 254 : e;
        }
        const float d = mxfp4_e8m0_half((uint8_t)e);
        y[i].e = (uint8_t)e;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] =
                (uint8_t)(mxfp4_nearest(xb[j], d) | (mxfp4_nearest(xb[j + 16], d) << 4));
    }
}

/* ---- validation ---------------------------------------------------------------- */

static enum splash_status mxfp4_check_size(const char *type, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % MXFP4_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld values, not a multiple of the %d-value block", type,
                              (long long)n_elems, MXFP4_QK);
    uint64_t want = (uint64_t)(n_elems / MXFP4_QK) * sizeof(struct mxfp4_block);
    if (n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %lld values, expected %llu", type, n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    return SPLASH_OK;
}

static enum splash_status mxfp4_validate_blocks(const char *type, const void *data,
                                                size_t n_bytes, int64_t n_elems,
                                                struct splash_err *err)
{
    enum splash_status st = mxfp4_check_size(type, n_bytes, n_elems, err);
    if (st != SPLASH_OK)
        return st;
    const struct mxfp4_block *x = data;
    for (int64_t i = 0; i < n_elems / MXFP4_QK; i++)
        if (x[i].e == 0xff)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s block %lld: E8M0 scale 0xff is NaN",
                                  type, (long long)i);
    return SPLASH_OK;
}

static enum splash_status mxfp4_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                         struct splash_err *err)
{
    return mxfp4_validate_blocks("MXFP4", data, n_bytes, n_elems, err);
}

static enum splash_status mxfp4_mlx_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    return mxfp4_validate_blocks("MXFP4_MLX", data, n_bytes, n_elems, err);
}

/* ---- MLX planes ------------------------------------------------------------------ */

/* MLX packs code k of a row at bits 4 * (k % 8) of word k / 8; on a little-endian
 * host those words are the bytes of a low-nibble-first U8 plane, so both read alike. */
static enum splash_status mxfp4_import_planes(const struct splash_planes *src, void *dst_blocks,
                                              struct splash_err *err)
{
    if (src->rows <= 0 || src->cols <= 0 || src->cols % MXFP4_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "mxfp4: shape %lld x %lld, columns not a multiple of %d",
                              (long long)src->rows, (long long)src->cols, MXFP4_QK);
    if (src->codes_dtype != SPLASH_DTYPE_ST_U32 && src->codes_dtype != SPLASH_DTYPE_ST_U8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "mxfp4: codes of dtype %d, expected U32 (or U8)", src->codes_dtype);
    if (src->scales_dtype != SPLASH_DTYPE_ST_U8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "mxfp4: scales of dtype %d, expected U8 (E8M0)", src->scales_dtype);
    if (src->biases)
        return splash_err_set(err, SPLASH_ERR_INVALID, "mxfp4: has biases, mxfp4 has none");
    if (src->global_scale != 1.0 || src->row_scales)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "mxfp4: a tensor or row scale (%g) is not part of MXFP4",
                              src->global_scale);
    if (!src->codes || !src->scales)
        return splash_err_set(err, SPLASH_ERR_INVALID, "mxfp4: missing codes or scales");

    const uint8_t *codes = src->codes;
    const uint8_t *scales = src->scales;
    const int64_t groups = src->cols / MXFP4_QK;
    struct mxfp4_block *y = dst_blocks;
    for (int64_t r = 0; r < src->rows; r++) {
        for (int64_t g = 0; g < groups; g++) {
            const uint8_t e = scales[r * groups + g];
            if (e == 0xff)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "mxfp4: row %lld group %lld: E8M0 scale 0xff is NaN",
                                      (long long)r, (long long)g);
            /* 16 bytes: byte b holds elements 2b (low) and 2b + 1 (high) */
            const uint8_t *p = codes + (size_t)r * (size_t)(src->cols / 2) + (size_t)g * 16;
            struct mxfp4_block *b = &y[r * groups + g];
            b->e = e;
            for (int j = 0; j < 16; j++) {
                uint8_t lo = (uint8_t)((p[j / 2] >> (4 * (j & 1))) & 0xf);
                uint8_t hi = (uint8_t)((p[8 + j / 2] >> (4 * (j & 1))) & 0xf);
                b->qs[j] = (uint8_t)(lo | hi << 4);
            }
        }
    }
    return SPLASH_OK;
}

/* ---- scalar reference row ---------------------------------------------------------- */

static void mxfp4_q8_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct mxfp4_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / MXFP4_QK; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += mxfp4_e2m1_x2[x[i].qs[j] & 0xf] * y[i].qs[j];
            sumi += mxfp4_e2m1_x2[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        const float d = splash_fp16_to_fp32(y[i].d) * mxfp4_e8m0_half(x[i].e);
        sum += d * (float)sumi;
    }
    *s = sum;
}

/* ---- tables ------------------------------------------------------------------------ */

#define AVX2_BITS (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)
#define AVX512VNNI_BITS                                                                            \
    (AVX2_BITS | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |                  \
     SPLASH_CPU_AVX512DQ | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI)
#define NEON_DOTPROD_BITS (SPLASH_CPU_NEON | SPLASH_CPU_NEON_DOTPROD)

static const struct splash_kernel_row mxfp4_rows[] = {
#if defined(__x86_64__)
    {AVX512VNNI_BITS, "avx512vnni", mxfp4_q8_avx512vnni_dot, mxfp4_q8_avx512vnni_mul_rows},
    {AVX2_BITS, "avx2", mxfp4_q8_avx2_dot, mxfp4_q8_avx2_mul_rows},
#endif
#if defined(__aarch64__)
    {NEON_DOTPROD_BITS, "neon-dotprod", mxfp4_q8_neon_dotprod_dot, mxfp4_q8_neon_dotprod_mul_rows},
    {SPLASH_CPU_NEON, "neon", mxfp4_q8_neon_dot, mxfp4_q8_neon_mul_rows},
#endif
    {0, "scalar", mxfp4_q8_dot_ref, NULL},
};

#define N_OF(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const struct splash_format_type mxfp4_type = {
    .name = "MXFP4",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 39,
    .block_elems = MXFP4_QK,
    .block_bytes = sizeof(struct mxfp4_block),
    .bits_per_weight = 4.25f,
    .act_type = "Q8_0",
    .validate = mxfp4_validate,
    .to_float = mxfp4_to_float,
    .from_float = mxfp4_from_float,
    .rows = mxfp4_rows,
    .n_rows = N_OF(mxfp4_rows),
    .repack_to = "MXFP4_R16",
    .repack = mxfp4_r16_repack,
};

/* MLX's mxfp4 mode: the same blocks, built from a checkpoint's planes. */
static const struct splash_format_type mxfp4_mlx_type = {
    .name = "MXFP4_MLX",
    .gguf_type = -1,
    .flags = SPLASH_FORMAT_LINEAR,
    .block_elems = MXFP4_QK,
    .block_bytes = sizeof(struct mxfp4_block),
    .bits_per_weight = 4.25f,
    .act_type = "Q8_0",
    .validate = mxfp4_mlx_validate,
    .to_float = mxfp4_to_float,
    .from_float = mxfp4_from_float,
    .rows = mxfp4_rows,
    .n_rows = N_OF(mxfp4_rows),
    .mlx_mode = "mxfp4",
    .mlx_bits = 4,
    .mlx_group_size = MXFP4_QK,
    .import_planes = mxfp4_import_planes,
    /* the same blocks as MXFP4's: the same load-time layout */
    .repack_to = "MXFP4_R16",
    .repack = mxfp4_r16_repack,
};

static const struct splash_format_type *const mxfp4_types[] = {
    &mxfp4_type,
    &mxfp4_mlx_type,
    &mxfp4_r16_type,
};

static const struct splash_format_plugin mxfp4_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "mxfp4", "0.1.0",
                                        struct splash_format_plugin),
    .types = mxfp4_types,
    .n_types = N_OF(mxfp4_types),
    .checkpoint_formats = NULL,
};

static const struct splash_plugin_header *mxfp4_entry(const struct splash_host *host)
{
    (void)host;
    return &mxfp4_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_mxfp4, mxfp4_entry)
