/* The MXFP4 x Q8_0 NEON rows, written once and compiled twice: mxfp4_neon.c (Armv8.0
 * Advanced SIMD: widening multiplies) and mxfp4_dotprod_neon.c (Armv8.2 sdot), each
 * defining MXFP4_NEON_FN (the name suffix) and MXFP4_DOT16 (acc += four 4-byte dots of
 * int8 vectors a, b) before including this file.
 *
 * One tbl per 16 codes maps them to the doubled E2M1 integers; the block's integer dot is
 * exact in int32 lanes, then each activation row takes the scalar row's float steps in
 * its order (d = d_act * d_w, sum += d * sumi), so every row gives the scalar row's bits
 * and mul_rows decodes a weight block once for up to 8 activation rows. */
#ifndef MXFP4_NEON_FN
#error "define MXFP4_NEON_FN and MXFP4_DOT16 before including mxfp4_neon.h"
#endif

#include <arm_neon.h>

#include "formats/mxfp4/mxfp4.h"

#define MXFP4_INLINE static inline __attribute__((always_inline))

/* fp16 -> fp32 in one fcvt: exact for every finite value, like splash_fp16_to_fp32 */
MXFP4_INLINE float mxfp4_neon_h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

MXFP4_INLINE void mxfp4_neon_rows(int64_t nb, const void *w, const char *act, size_t act_stride,
                                  float *out, size_t out_stride, const int nr)
{
    const struct mxfp4_block *x = w;
    const int8x16_t table = vld1q_s8(mxfp4_e2m1_x2);
    const uint8x16_t low4 = vdupq_n_u8(0xf);
    float acc[MXFP4_MAX_ACT_ROWS];
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t lo = vqtbl1q_s8(table, vandq_u8(q, low4)); /* elements 0..15 */
        const int8x16_t hi = vqtbl1q_s8(table, vshrq_n_u8(q, 4));  /* elements 16..31 */
        const float dw = mxfp4_e8m0_half(x[i].e);
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)(act + (size_t)r * act_stride) + i;
            int32x4_t s = vdupq_n_s32(0);
            MXFP4_DOT16(s, lo, vld1q_s8(y->qs));
            MXFP4_DOT16(s, hi, vld1q_s8(y->qs + 16));
            const float d = mxfp4_neon_h2f(y->d) * dw;
            acc[r] += d * (float)vaddvq_s32(s);
        }
    }
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = acc[r];
}

void MXFP4_NEON_FN(dot)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    mxfp4_neon_rows(n / MXFP4_QK, w_row, act_row, 0, s, 0, 1);
}

void MXFP4_NEON_FN(mul_rows)(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    MXFP4_MUL_ROWS_DRIVER(mxfp4_neon_rows, n / MXFP4_QK, w, w_stride, n_w, act, act_stride, n_act,
                          out, out_stride);
}
