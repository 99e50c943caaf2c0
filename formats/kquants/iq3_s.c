/* IQ3_S (GGUF 21): 9-bit indices into a 512-point grid, explicit signs, 4-bit scales. */
#include <stddef.h>

#include "formats/kquants/iq3s_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq3s_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq3_s_type, data, n_bytes, n_elems,
                            offsetof(struct iq3_s_block, d), err);
}

/* The two 4-value grid points of group l (0..3) of sub-block ib. */
static inline void iq3s_points(const struct iq3_s_block *b, int ib, int l, uint32_t *g1,
                               uint32_t *g2)
{
    const uint8_t *qs = b->qs + 8 * ib;
    uint32_t qh = b->qh[ib];
    *g1 = kq_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
    *g2 = kq_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
}

static void iq3s_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq3_s_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const float db = d * (float)(1 + 2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf));
            for (int l = 0; l < 4; l++) {
                uint32_t g1, g2;
                iq3s_points(&x[i], ib, l, &g1, &g2);
                uint8_t signs = x[i].signs[4 * ib + l];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)(uint8_t)(g1 >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                    y[j + 4] =
                        db * (float)(uint8_t)(g2 >> 8 * j) * (signs >> (j + 4) & 1 ? -1.f : 1.f);
                }
                y += 8;
            }
        }
    }
}

static void iq3s_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq3_s_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++) {
                uint32_t g1, g2;
                iq3s_points(&x[i], ib, l, &g1, &g2);
                uint8_t signs = x[i].signs[4 * ib + l];
                for (int j = 0; j < 4; j++) {
                    int v1 = (uint8_t)(g1 >> 8 * j) * q8[j];
                    int v2 = (uint8_t)(g2 >> 8 * j) * q8[j + 4];
                    sumi += signs >> j & 1 ? -v1 : v1;
                    sumi += signs >> (j + 4) & 1 ? -v2 : v2;
                }
                q8 += 8;
            }
            bsum += sumi * (int32_t)(2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1);
        }
        sumf += d * (float)bsum;
    }
    *s = sumf;
}

static const struct splash_kernel_row iq3s_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq3s_dot_q8k_avx2, iq3s_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq3s_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq3_s_type = {
    .name = "IQ3_S",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 21,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq3_s_block),
    .bits_per_weight = 3.4375f,
    .act_type = "Q8_K",
    .validate = iq3s_validate,
    .to_float = iq3s_to_float,
    .rows = iq3s_rows,
    .n_rows = sizeof iq3s_rows / sizeof iq3s_rows[0],
    .repack_to = "IQ3_S_R16",
    .repack = iq3s_r16_repack,
};
