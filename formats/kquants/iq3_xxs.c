/* IQ3_XXS (GGUF 18): 4-value grid points from 8 levels, even-parity signs, 4-bit scales. */
#include <stddef.h>

#include "formats/kquants/iq3xxs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq3xxs_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                          struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq3_xxs_type, data, n_bytes, n_elems,
                            offsetof(struct iq3_xxs_block, d), err);
}

static void iq3xxs_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq3_xxs_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t aux = kq_load_u32(x[i].qs + SPLASH_QK_K / 4 + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++) {
                uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                uint32_t g1 = kq_iq3xxs_grid[qs[2 * l]], g2 = kq_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)(uint8_t)(g1 >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                    y[j + 4] =
                        db * (float)(uint8_t)(g2 >> 8 * j) * (signs >> (j + 4) & 1 ? -1.f : 1.f);
                }
                y += 8;
            }
            qs += 8;
        }
    }
}

static void iq3xxs_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq3_xxs_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t aux = kq_load_u32(x[i].qs + SPLASH_QK_K / 4 + 4 * ib);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++) {
                uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                uint32_t g1 = kq_iq3xxs_grid[qs[2 * l]], g2 = kq_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    int v1 = (uint8_t)(g1 >> 8 * j) * q8[j];
                    int v2 = (uint8_t)(g2 >> 8 * j) * q8[j + 4];
                    sumi += signs >> j & 1 ? -v1 : v1;
                    sumi += signs >> (j + 4) & 1 ? -v2 : v2;
                }
                q8 += 8;
            }
            qs += 8;
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.25f * sumf;
}

static const struct splash_kernel_row iq3xxs_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq3xxs_dot_q8k_avx2, iq3xxs_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq3xxs_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq3_xxs_type = {
    .name = "IQ3_XXS",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 18,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq3_xxs_block),
    .bits_per_weight = 3.0625f,
    .act_type = "Q8_K",
    .validate = iq3xxs_validate,
    .to_float = iq3xxs_to_float,
    .rows = iq3xxs_rows,
    .n_rows = sizeof iq3xxs_rows / sizeof iq3xxs_rows[0],
    .repack_to = "IQ3_XXS_R16",
    .repack = iq3xxs_r16_repack,
};
