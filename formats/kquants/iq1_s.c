/* IQ1_S (GGUF 19): 8-value points of a {-1, 0, 1} grid shifted by +-1/8, 3-bit scales. */
#include <stddef.h>

#include "formats/kquants/iq1s_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq1s_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq1_s_type, data, n_bytes, n_elems,
                            offsetof(struct iq1_s_block, d), err);
}

static void iq1s_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq1_s_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t qh = x[i].qh[ib];
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -KQ_IQ1_DELTA : KQ_IQ1_DELTA;
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> 3 * l) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((float)(int8_t)(g >> 8 * j) + delta);
                y += 8;
            }
        }
    }
}

static void iq1s_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq1_s_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            uint32_t qh = x[i].qh[ib];
            int32_t ls = 2 * ((qh >> 12) & 7) + 1;
            int32_t delta = qh & 0x8000 ? -1 : 1;
            int32_t lsum = 0;
            for (int l = 0; l < 4; l++) {
                uint64_t g = kq_iq1s_grid[x[i].qs[4 * ib + l] | (((qh >> 3 * l) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    lsum += q8[j] * (int8_t)(g >> 8 * j);
                q8 += 8;
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        sumf += splash_fp16_to_fp32(x[i].d) * y[i].d *
                ((float)sumi + KQ_IQ1_DELTA * (float)sumi1);
    }
    *s = sumf;
}

static const struct splash_kernel_row iq1s_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", iq1s_dot_q8k_avx2, iq1s_mul_rows_q8k_avx2},
#endif
    {0, "scalar", iq1s_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq1_s_type = {
    .name = "IQ1_S",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 19,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq1_s_block),
    .bits_per_weight = 1.5625f,
    .act_type = "Q8_K",
    .validate = iq1s_validate,
    .to_float = iq1s_to_float,
    .rows = iq1s_rows,
    .n_rows = sizeof iq1s_rows / sizeof iq1s_rows[0],
    .repack_to = "IQ1_S_R16",
    .repack = iq1s_r16_repack,
};
