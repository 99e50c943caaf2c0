/* IQ1_M (GGUF 29): IQ1_S's grid with a delta sign per 8 values and 3-bit scales per 16;
 * the fp16 block scale hides in the top nibbles of the scale words. */
#include <stddef.h>

#include "formats/kquants/iq1m_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq1m_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    enum splash_status st = kq_iq_check_size(&kq_iq1_m_type, n_bytes, n_elems, err);
    if (st != SPLASH_OK)
        return st;
    const struct iq1_m_block *x = data;
    for (int64_t i = 0; i < n_elems / SPLASH_QK_K; i++) {
        st = kq_iq_check_fp16(&kq_iq1_m_type, kq_iq1m_scale_bits(&x[i]), i, err);
        if (st != SPLASH_OK)
            return st;
    }
    return SPLASH_OK;
}

/* 3-bit scale of half h (0, 1) of sub-block ib, as 2s + 1. */
static inline int32_t iq1m_ls(const struct iq1_m_block *b, int ib, int h)
{
    uint32_t sc = b->scales[2 * (ib / 2)] | (uint32_t)b->scales[2 * (ib / 2) + 1] << 8;
    return (int32_t)(2 * ((sc >> (6 * (ib % 2) + 3 * h)) & 7) + 1);
}

/* Grid index of group l (0..3) of sub-block ib; its delta is negative when *neg. */
static inline uint32_t iq1m_index(const struct iq1_m_block *b, int ib, int l, int *neg)
{
    uint32_t qh = b->qh[2 * ib + l / 2] >> 4 * (l % 2);
    *neg = (qh & 8) != 0;
    return b->qs[4 * ib + l] | ((qh & 7) << 8);
}

static void iq1m_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq1_m_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(kq_iq1m_scale_bits(&x[i]));
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            for (int l = 0; l < 4; l++) {
                const float dl = d * (float)iq1m_ls(&x[i], ib, l / 2);
                int neg;
                uint64_t g = kq_iq1s_grid[iq1m_index(&x[i], ib, l, &neg)];
                const float delta = neg ? -KQ_IQ1_DELTA : KQ_IQ1_DELTA;
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((float)(int8_t)(g >> 8 * j) + delta);
                y += 8;
            }
        }
    }
}

static void iq1m_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq1_m_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            int32_t sum1[2] = {0, 0}, sum2[2] = {0, 0};
            for (int l = 0; l < 4; l++) {
                int neg;
                uint64_t g = kq_iq1s_grid[iq1m_index(&x[i], ib, l, &neg)];
                int32_t lsum1 = 0, lsum2 = 0;
                for (int j = 0; j < 8; j++) {
                    lsum1 += q8[j] * (int8_t)(g >> 8 * j);
                    lsum2 += q8[j];
                }
                q8 += 8;
                sum1[l / 2] += lsum1;
                sum2[l / 2] += neg ? -lsum2 : lsum2;
            }
            int32_t ls1 = iq1m_ls(&x[i], ib, 0), ls2 = iq1m_ls(&x[i], ib, 1);
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += splash_fp16_to_fp32(kq_iq1m_scale_bits(&x[i])) * y[i].d *
                ((float)sumi1 + KQ_IQ1_DELTA * (float)sumi2);
    }
    *s = sumf;
}

static const struct splash_kernel_row iq1m_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq1m_dot_q8k_avx2, iq1m_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq1m_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq1_m_type = {
    .name = "IQ1_M",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 29,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq1_m_block),
    .bits_per_weight = 1.75f,
    .act_type = "Q8_K",
    .validate = iq1m_validate,
    .to_float = iq1m_to_float,
    .rows = iq1m_rows,
    .n_rows = sizeof iq1m_rows / sizeof iq1m_rows[0],
    .repack_to = "IQ1_M_R16",
    .repack = iq1m_r16_repack,
};
