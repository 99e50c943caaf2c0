/* Checkpoint planes into NVFP4_G and FP8_E4M3 blocks.
 *
 * NVFP4 (MLX nvfp4, Model Optimizer NVFP4, compressed-tensors nvfp4-pack-quantized):
 * value = g * e4m3(scale of its 16) * e2m1(code). Codes come two per byte, the
 * lower-indexed value in the low nibble (MLX's U32 words, least significant nibble
 * first, are the same bytes on a little-endian host); scales are E4M3 bytes, one
 * per 16 values, row-major [rows][cols / 16]; g arrives in global_scale already as
 * the multiplier (the loader inverts compressed-tensors' weight_global_scale).
 *
 * FP8 (Model Optimizer FP8, compressed-tensors float-quantized): value =
 * g * row_scale[r] * e4m3(code), one code byte per value. */
#include <math.h>

#include "formats/nvfp4/nvfp4.h"
#include "splash/format.h"

/* A checkpoint's E4M3 scale byte as a GGUF UE4M3 byte (the same bits when positive);
 * -1 for a negative or NaN scale, which NVFP4 cannot hold. */
static int nvfp4_scale_byte(uint8_t v)
{
    if ((v & 0x7f) == 0x7f)
        return -1;
    if (v & 0x80)
        return v == 0x80 ? 0 : -1;
    return v;
}

static int nvfp4_code(const uint8_t *row, int64_t k)
{
    return (row[k / 2] >> (4 * (k & 1))) & 0xf;
}

enum splash_status nvfp4_g_import_planes(const struct splash_planes *src, void *dst_blocks,
                                         struct splash_err *err)
{
    if (src->rows <= 0 || src->cols <= 0 || src->cols % NVFP4G_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "nvfp4: shape %lld x %lld, columns not a multiple of %d",
                              (long long)src->rows, (long long)src->cols, NVFP4G_QK);
    if (src->codes_dtype != SPLASH_DTYPE_ST_U8 && src->codes_dtype != SPLASH_DTYPE_ST_U32)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "nvfp4: codes of dtype %d, expected U8 or U32", src->codes_dtype);
    if (src->scales_dtype != SPLASH_DTYPE_ST_F8_E4M3 && src->scales_dtype != SPLASH_DTYPE_ST_U8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "nvfp4: scales of dtype %d, expected F8_E4M3 (or U8)",
                              src->scales_dtype);
    if (src->biases || src->row_scales)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "nvfp4: biases or row scales given, nvfp4 has neither");
    if (!src->codes || !src->scales)
        return splash_err_set(err, SPLASH_ERR_INVALID, "nvfp4: missing codes or scales");
    const float g = (float)src->global_scale;
    if (!isfinite(g) || !(g > 0.0f))
        return splash_err_set(err, SPLASH_ERR_INVALID, "nvfp4: tensor scale %g", src->global_scale);

    const uint8_t *codes = src->codes;
    const uint8_t *scales = src->scales;
    const int64_t n_sb = src->cols / NVFP4G_QK;
    const int64_t n_scales = src->cols / NVFP4_SUB;
    struct nvfp4g_block *y = dst_blocks;
    for (int64_t r = 0; r < src->rows; r++) {
        const uint8_t *crow = codes + (size_t)r * (size_t)(src->cols / 2);
        const uint8_t *srow = scales + (size_t)r * (size_t)n_scales;
        for (int64_t i = 0; i < n_sb; i++) {
            struct nvfp4g_block *sb = &y[r * n_sb + i];
            sb->g = g;
            for (int k = 0; k < 4; k++) {
                struct nvfp4_block *b = &sb->b[k];
                const int64_t base = i * NVFP4G_QK + k * NVFP4_QK; /* first column */
                for (int s = 0; s < 4; s++) {
                    const int64_t grp = base / NVFP4_SUB + s;
                    int d = nvfp4_scale_byte(srow[grp]);
                    if (d < 0)
                        return splash_err_set(err, SPLASH_ERR_INVALID,
                                              "nvfp4: row %lld group %lld: E4M3 scale 0x%02x is "
                                              "negative or NaN",
                                              (long long)r, (long long)grp, srow[grp]);
                    b->d[s] = (uint8_t)d;
                    const int64_t c0 = base + 16 * s;
                    for (int j = 0; j < 8; j++)
                        b->qs[8 * s + j] = (uint8_t)(nvfp4_code(crow, c0 + j) |
                                                     nvfp4_code(crow, c0 + j + 8) << 4);
                }
            }
        }
    }
    return SPLASH_OK;
}

enum splash_status nvfp4_fp8_import_planes(const struct splash_planes *src, void *dst_blocks,
                                           struct splash_err *err)
{
    if (src->rows <= 0 || src->cols <= 0 || src->cols % FP8_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "fp8: shape %lld x %lld, columns not a multiple of %d",
                              (long long)src->rows, (long long)src->cols, FP8_QK);
    if (src->codes_dtype != SPLASH_DTYPE_ST_F8_E4M3 && src->codes_dtype != SPLASH_DTYPE_ST_U8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "fp8: weight of dtype %d, expected F8_E4M3", src->codes_dtype);
    if (src->biases || src->scales)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "fp8: group scales or biases given, FP8 has a tensor or row scale");
    if (!src->codes)
        return splash_err_set(err, SPLASH_ERR_INVALID, "fp8: missing weight");

    const uint8_t *codes = src->codes;
    const int64_t nb = src->cols / FP8_QK;
    struct fp8_block *y = dst_blocks;
    for (int64_t r = 0; r < src->rows; r++) {
        const float g = (float)(src->global_scale * (src->row_scales ? src->row_scales[r] : 1.0));
        if (!isfinite(g))
            return splash_err_set(err, SPLASH_ERR_INVALID, "fp8: row %lld: scale %g", (long long)r,
                                  g);
        const uint8_t *crow = codes + (size_t)r * (size_t)src->cols;
        for (int64_t i = 0; i < nb; i++) {
            struct fp8_block *b = &y[r * nb + i];
            b->g = g;
            for (int j = 0; j < FP8_QK; j++) {
                const uint8_t v = crow[i * FP8_QK + j];
                if ((v & 0x7f) == 0x7f)
                    return splash_err_set(err, SPLASH_ERR_INVALID,
                                          "fp8: row %lld column %lld: 0x%02x is NaN",
                                          (long long)r, (long long)(i * FP8_QK + j), v);
                b->q[j] = v;
            }
        }
    }
    return SPLASH_OK;
}
