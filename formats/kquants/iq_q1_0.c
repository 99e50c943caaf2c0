/* Q1_0 (GGUF 41): 128-value blocks of sign bits times one fp16 magnitude (the mean |x|).
 * It lives among the i-quant files because it shares their helpers and owner. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status q1_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_iq_validate_d(&kq_q1_0_type, data, n_bytes, n_elems,
                            offsetof(struct q1_0_block, d), err);
}

static void q1_0_to_float(const void *blocks, float *y, int64_t n)
{
    const struct q1_0_block *x = blocks;
    for (int64_t i = 0; i < n / KQ_QK1_0; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int j = 0; j < KQ_QK1_0; j++)
            y[j] = x[i].qs[j / 8] >> (j % 8) & 1 ? d : -d;
        y += KQ_QK1_0;
    }
}

/* The scale is the mean magnitude; each bit is the sign (x >= 0 sets it). No imatrix. */
static void q1_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q1_0_block *y = blocks;
    for (int64_t i = 0; i < n / KQ_QK1_0; i++) {
        const float *xb = x + i * KQ_QK1_0;
        float sum_abs = 0.0f;
        for (int j = 0; j < KQ_QK1_0; j++)
            sum_abs += fabsf(xb[j]);
        y[i].d = splash_fp32_to_fp16(sum_abs / KQ_QK1_0);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int j = 0; j < KQ_QK1_0; j++)
            if (xb[j] >= 0.0f)
                y[i].qs[j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

/* Four Q8_0 activation blocks per weight block; each gets its own activation scale. */
static void q1_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q1_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sumf = 0;
    for (int64_t i = 0; i < n / KQ_QK1_0; i++) {
        float sumi = 0.0f;
        for (int k = 0; k < KQ_QK1_0 / SPLASH_QK8_0; k++) {
            const struct splash_q8_0_block *yb = &y[i * 4 + k];
            int32_t sumi_block = 0;
            for (int j = 0; j < SPLASH_QK8_0; j++)
                sumi_block += x[i].qs[4 * k + j / 8] >> (j % 8) & 1 ? yb->qs[j] : -yb->qs[j];
            sumi += splash_fp16_to_fp32(yb->d) * (float)sumi_block;
        }
        sumf += splash_fp16_to_fp32(x[i].d) * sumi;
    }
    *s = sumf;
}

static const struct splash_kernel_row q1_0_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX2, "avx2", q1_0_dot_q80_avx2, q1_0_mul_rows_q80_avx2},
#endif
    {0, "scalar", q1_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type kq_q1_0_type = {
    .name = "Q1_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 41,
    .block_elems = KQ_QK1_0,
    .block_bytes = sizeof(struct q1_0_block),
    .bits_per_weight = 1.125f,
    .act_type = "Q8_0",
    .validate = q1_0_validate,
    .to_float = q1_0_to_float,
    .from_float = q1_0_from_float,
    .rows = q1_0_rows,
    .n_rows = sizeof q1_0_rows / sizeof q1_0_rows[0],
};
