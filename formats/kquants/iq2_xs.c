/* IQ2_XS (GGUF 17): IQ2_XXS with 9-bit grid indices and a 4-bit scale per 16 values. */
#include <stddef.h>

#include "formats/kquants/iq2xs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq2xs_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                         struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq2_xs_type, data, n_bytes, n_elems,
                            offsetof(struct iq2_xs_block, d), err);
}

static void iq2xs_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq2_xs_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                uint16_t q = x[i].qs[4 * ib + l];
                uint64_t g = kq_iq2xs_grid[q & 511];
                uint8_t signs = kq_iq_signs8(q >> 9);
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * (float)(uint8_t)(g >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                y += 8;
            }
        }
    }
}

static void iq2xs_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq2_xs_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            for (int h = 0; h < 2; h++) {
                int32_t ls = 2 * ((x[i].scales[ib] >> 4 * h) & 0xf) + 1;
                int32_t sumi = 0;
                for (int l = 2 * h; l < 2 * h + 2; l++) {
                    uint16_t q = x[i].qs[4 * ib + l];
                    uint64_t g = kq_iq2xs_grid[q & 511];
                    uint8_t signs = kq_iq_signs8(q >> 9);
                    for (int j = 0; j < 8; j++) {
                        int v = (uint8_t)(g >> 8 * j) * q8[j];
                        sumi += signs >> j & 1 ? -v : v;
                    }
                    q8 += 8;
                }
                bsum += sumi * ls;
            }
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static const struct splash_kernel_row iq2xs_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq2xs_dot_q8k_avx2, iq2xs_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq2xs_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq2_xs_type = {
    .name = "IQ2_XS",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 17,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq2_xs_block),
    .bits_per_weight = 2.3125f,
    .act_type = "Q8_K",
    .validate = iq2xs_validate,
    .to_float = iq2xs_to_float,
    .rows = iq2xs_rows,
    .n_rows = sizeof iq2xs_rows / sizeof iq2xs_rows[0],
    .repack_to = "IQ2_XS_R16",
    .repack = iq2xs_r16_repack,
};
