/* IQ2_XXS (GGUF 16): 256-value blocks of 8-value grid points with even-parity signs. */
#include <stddef.h>

#include "formats/kquants/iq2xxs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq2xxs_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                          struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq2_xxs_type, data, n_bytes, n_elems,
                            offsetof(struct iq2_xxs_block, d), err);
}

static void iq2xxs_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq2_xxs_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t idx = kq_load_u32(x[i].qs + 4 * ib);
            uint32_t aux = kq_load_u32(x[i].qs + 4 * ib + 2);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq2xxs_grid[(idx >> 8 * l) & 0xff];
                uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                for (int j = 0; j < 8; j++)
                    y[j] = db * (float)(uint8_t)(g >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                y += 8;
            }
        }
    }
}

static void iq2xxs_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq2_xxs_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t idx = kq_load_u32(x[i].qs + 4 * ib);
            uint32_t aux = kq_load_u32(x[i].qs + 4 * ib + 2);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq2xxs_grid[(idx >> 8 * l) & 0xff];
                uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                for (int j = 0; j < 8; j++) {
                    int v = (uint8_t)(g >> 8 * j) * q8[j];
                    sumi += signs >> j & 1 ? -v : v;
                }
                q8 += 8;
            }
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static const struct splash_kernel_row iq2xxs_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq2xxs_dot_q8k_avx2, iq2xxs_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq2xxs_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq2_xxs_type = {
    .name = "IQ2_XXS",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 16,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq2_xxs_block),
    .bits_per_weight = 2.0625f,
    .act_type = "Q8_K",
    .validate = iq2xxs_validate,
    .to_float = iq2xxs_to_float,
    .rows = iq2xxs_rows,
    .n_rows = sizeof iq2xxs_rows / sizeof iq2xxs_rows[0],
    .repack_to = "IQ2_XXS_R16",
    .repack = iq2xxs_r16_repack,
};
