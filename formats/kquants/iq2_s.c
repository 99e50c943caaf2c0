/* IQ2_S (GGUF 22): 10-bit grid indices and explicit sign bytes, a 4-bit scale per 16. */
#include <stddef.h>

#include "formats/kquants/iq2s_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq2s_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq2_s_type, data, n_bytes, n_elems,
                            offsetof(struct iq2_s_block, d), err);
}

/* Grid index of group l (0..3) of sub-block ib. */
static inline uint32_t iq2s_index(const struct iq2_s_block *b, int ib, int l)
{
    return b->qs[4 * ib + l] | (((uint32_t)b->qh[ib] << (8 - 2 * l)) & 0x300);
}

static void iq2s_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq2_s_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        const uint8_t *signs = x[i].qs + SPLASH_QK_K / 8;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq2s_grid[iq2s_index(&x[i], ib, l)];
                uint8_t sg = signs[4 * ib + l];
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * (float)(uint8_t)(g >> 8 * j) * (sg >> j & 1 ? -1.f : 1.f);
                y += 8;
            }
        }
    }
}

static void iq2s_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq2_s_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const int8_t *q8 = y[i].qs;
        const uint8_t *signs = x[i].qs + SPLASH_QK_K / 8;
        int32_t bsum = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            int32_t sumi[2] = {0, 0};
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq2s_grid[iq2s_index(&x[i], ib, l)];
                uint8_t sg = signs[4 * ib + l];
                for (int j = 0; j < 8; j++) {
                    int v = (uint8_t)(g >> 8 * j) * q8[j];
                    sumi[l / 2] += sg >> j & 1 ? -v : v;
                }
                q8 += 8;
            }
            bsum += (1 + 2 * (x[i].scales[ib] & 0xf)) * sumi[0] +
                    (1 + 2 * (x[i].scales[ib] >> 4)) * sumi[1];
        }
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

static const struct splash_kernel_row iq2s_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq2s_dot_q8k_avx2, iq2s_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq2s_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq2_s_type = {
    .name = "IQ2_S",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 22,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq2_s_block),
    .bits_per_weight = 2.5625f,
    .act_type = "Q8_K",
    .validate = iq2s_validate,
    .to_float = iq2s_to_float,
    .rows = iq2s_rows,
    .n_rows = sizeof iq2s_rows / sizeof iq2s_rows[0],
    .repack_to = "IQ2_S_R16",
    .repack = iq2s_r16_repack,
};
