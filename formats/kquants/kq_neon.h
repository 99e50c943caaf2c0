/* The kquants NEON rows, written once and compiled twice: kquants_neon.c (Armv8.0 Advanced
 * SIMD: widening multiplies) and kquants_dotprod_neon.c (Armv8.2 sdot), each defining
 * KQ_NEON_FN (the name suffix) and KQ_DOT16 (acc += four 4-byte dots of int8 vectors a, b)
 * before including this file.
 *
 * Every kernel sums each (sub-)block exactly in int32 lanes, then takes the scalar row's
 * own float steps per block in its order, so a row gives the scalar row's bits. */
#ifndef KQ_NEON_FN
#error "define KQ_NEON_FN and KQ_DOT16 before including kq_neon.h"
#endif

#include <arm_neon.h>

#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"

/* fp16 -> fp32 in one fcvt: exact for every finite value and Inf, like kq_h2f (a NaN scale,
 * which validate refuses, would come out quieted). */
static inline float kq_neon_h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* Every activation row for weight row i: out[j][i] = vec_dot(w row i, act row j). The
 * weight row (at most a few KB) stays in L1 across the activation rows. */
#define KQ_NEON_MUL_ROWS(mul_fn, dot_fn)                                                           \
    void mul_fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,          \
                size_t act_stride, int64_t n_act, float *out, size_t out_stride)                   \
    {                                                                                              \
        for (int64_t i = 0; i < n_w; i++)                                                          \
            for (int64_t j = 0; j < n_act; j++)                                                    \
                dot_fn(n, out + j * out_stride + i, (const char *)w + i * w_stride,                \
                       (const char *)act + j * act_stride);                                        \
    }

void KQ_NEON_FN(q8_0_dot_q8_0)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct splash_q8_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        KQ_DOT16(acc, vld1q_s8(x[i].qs), vld1q_s8(y[i].qs));
        KQ_DOT16(acc, vld1q_s8(x[i].qs + 16), vld1q_s8(y[i].qs + 16));
        const int sumi = vaddvq_s32(acc);
        sum += sumi * (kq_neon_h2f(x[i].d) * kq_neon_h2f(y[i].d));
    }
    *s = sum;
}

void KQ_NEON_FN(q4_0_dot_q8_0)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q4_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    const uint8x16_t low4 = vdupq_n_u8(0xF);
    const int8x16_t eight = vdupq_n_s8(8);
    float sum = 0;
    for (int64_t i = 0; i < n / KQ_QK4_0; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        int32x4_t acc = vdupq_n_s32(0);
        KQ_DOT16(acc, lo, vld1q_s8(y[i].qs));
        KQ_DOT16(acc, hi, vld1q_s8(y[i].qs + 16));
        const int sumi = vaddvq_s32(acc);
        sum += sumi * (kq_neon_h2f(x[i].d) * kq_neon_h2f(y[i].d));
    }
    *s = sum;
}

/* Q4_K: per 64 values, 32 bytes of nibbles (low: values 0..31, high: 32..63) under two
 * 6-bit scales and mins; isum = sum sc * sum q a is taken in lanes (sc times lane sums). */
void KQ_NEON_FN(q4k_dot_q8k)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q4_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    const uint8x16_t low4 = vdupq_n_u8(0xF);
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        int32x4_t isum_v = vdupq_n_s32(0);
        int msum = 0;
        for (int p = 0; p < 4; p++, q += 32, a += 64) {
            uint8_t sc1, m1, sc2, m2;
            kq_get_scale_min_k4(2 * p, x[i].scales, &sc1, &m1);
            kq_get_scale_min_k4(2 * p + 1, x[i].scales, &sc2, &m2);
            const uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);
            int32x4_t s1 = vdupq_n_s32(0), s2 = vdupq_n_s32(0);
            KQ_DOT16(s1, vreinterpretq_s8_u8(vandq_u8(q0, low4)), vld1q_s8(a));
            KQ_DOT16(s1, vreinterpretq_s8_u8(vandq_u8(q1, low4)), vld1q_s8(a + 16));
            KQ_DOT16(s2, vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(a + 32));
            KQ_DOT16(s2, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(a + 48));
            isum_v = vmlaq_n_s32(isum_v, s1, sc1);
            isum_v = vmlaq_n_s32(isum_v, s2, sc2);
            msum += m1 * (y[i].bsums[4 * p] + y[i].bsums[4 * p + 1]) +
                    m2 * (y[i].bsums[4 * p + 2] + y[i].bsums[4 * p + 3]);
        }
        const int isum = vaddvq_s32(isum_v);
        sum += y[i].d * kq_neon_h2f(x[i].d) * isum - y[i].d * kq_neon_h2f(x[i].dmin) * msum;
    }
    *s = sum;
}

/* Q6_K: per 128 values, 64 bytes of low nibbles and 32 of 2-bit highs; level q - 32 under
 * one int8 scale per 16 values. */
void KQ_NEON_FN(q6k_dot_q8k)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q6_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    const uint8x16_t low4 = vdupq_n_u8(0xF), two = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales, *a = y[i].qs;
        int32x4_t isum_v = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, a += 128) {
            for (int c = 0; c < 2; c++) { /* values 16c..16c+15 of each quarter */
                const uint8x16_t l0 = vld1q_u8(ql + 16 * c), l1 = vld1q_u8(ql + 32 + 16 * c);
                const uint8x16_t hb = vld1q_u8(qh + 16 * c);
                const uint8x16_t u1 = vorrq_u8(vandq_u8(l0, low4), vshlq_n_u8(vandq_u8(hb, two), 4));
                const uint8x16_t u2 =
                    vorrq_u8(vandq_u8(l1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), two), 4));
                const uint8x16_t u3 =
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), two), 4));
                const uint8x16_t u4 = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
                int32x4_t s1 = vdupq_n_s32(0), s2 = vdupq_n_s32(0), s3 = vdupq_n_s32(0),
                          s4 = vdupq_n_s32(0);
                KQ_DOT16(s1, vsubq_s8(vreinterpretq_s8_u8(u1), off), vld1q_s8(a + 16 * c));
                KQ_DOT16(s2, vsubq_s8(vreinterpretq_s8_u8(u2), off), vld1q_s8(a + 32 + 16 * c));
                KQ_DOT16(s3, vsubq_s8(vreinterpretq_s8_u8(u3), off), vld1q_s8(a + 64 + 16 * c));
                KQ_DOT16(s4, vsubq_s8(vreinterpretq_s8_u8(u4), off), vld1q_s8(a + 96 + 16 * c));
                isum_v = vmlaq_n_s32(isum_v, s1, sc[0 + c]);
                isum_v = vmlaq_n_s32(isum_v, s2, sc[2 + c]);
                isum_v = vmlaq_n_s32(isum_v, s3, sc[4 + c]);
                isum_v = vmlaq_n_s32(isum_v, s4, sc[6 + c]);
            }
        }
        const int isum = vaddvq_s32(isum_v);
        sum += kq_neon_h2f(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

/* Q5_K: Q4_K's nibbles with a fifth bit per value from qh (bit 2p for the low nibbles of
 * pair p, bit 2p + 1 for the high ones). */
void KQ_NEON_FN(q5k_dot_q8k)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q5_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    const uint8x16_t low4 = vdupq_n_u8(0xF), sixteen = vdupq_n_u8(16);
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const uint8_t *ql = x[i].qs;
        const uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
        const int8_t *a = y[i].qs;
        int32x4_t isum_v = vdupq_n_s32(0);
        int msum = 0;
        for (int p = 0; p < 4; p++, ql += 32, a += 64) {
            uint8_t sc1, m1, sc2, m2;
            kq_get_scale_min_k4(2 * p, x[i].scales, &sc1, &m1);
            kq_get_scale_min_k4(2 * p + 1, x[i].scales, &sc2, &m2);
            const uint8x16_t bit1 = vdupq_n_u8((uint8_t)(1u << 2 * p)),
                             bit2 = vdupq_n_u8((uint8_t)(2u << 2 * p));
            const uint8x16_t q0 = vld1q_u8(ql), q1 = vld1q_u8(ql + 16);
            const uint8x16_t w0 = vorrq_u8(vandq_u8(q0, low4), vandq_u8(vtstq_u8(h0, bit1), sixteen));
            const uint8x16_t w1 = vorrq_u8(vandq_u8(q1, low4), vandq_u8(vtstq_u8(h1, bit1), sixteen));
            const uint8x16_t w2 = vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(vtstq_u8(h0, bit2), sixteen));
            const uint8x16_t w3 = vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vtstq_u8(h1, bit2), sixteen));
            int32x4_t s1 = vdupq_n_s32(0), s2 = vdupq_n_s32(0);
            KQ_DOT16(s1, vreinterpretq_s8_u8(w0), vld1q_s8(a));
            KQ_DOT16(s1, vreinterpretq_s8_u8(w1), vld1q_s8(a + 16));
            KQ_DOT16(s2, vreinterpretq_s8_u8(w2), vld1q_s8(a + 32));
            KQ_DOT16(s2, vreinterpretq_s8_u8(w3), vld1q_s8(a + 48));
            isum_v = vmlaq_n_s32(isum_v, s1, sc1);
            isum_v = vmlaq_n_s32(isum_v, s2, sc2);
            msum += m1 * (y[i].bsums[4 * p] + y[i].bsums[4 * p + 1]) +
                    m2 * (y[i].bsums[4 * p + 2] + y[i].bsums[4 * p + 3]);
        }
        const int isum = vaddvq_s32(isum_v);
        sum += y[i].d * kq_neon_h2f(x[i].d) * isum - y[i].d * kq_neon_h2f(x[i].dmin) * msum;
    }
    *s = sum;
}

/* IQ4_NL: 32 values per block, nibble codes looked up in the 16-entry non-linear table
 * (one tbl per 16 codes). */
void KQ_NEON_FN(iq4nl_dot_q80)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq4_nl_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    const int8x16_t table = vld1q_s8(kq_iq4nl_values);
    const uint8x16_t low4 = vdupq_n_u8(0xF);
    float sumf = 0;
    for (int64_t i = 0; i < n / KQ_QK4_NL; i++) {
        const float d = kq_neon_h2f(y[i].d) * kq_neon_h2f(x[i].d);
        const uint8x16_t q = vld1q_u8(x[i].qs);
        int32x4_t acc = vdupq_n_s32(0);
        KQ_DOT16(acc, vqtbl1q_s8(table, vandq_u8(q, low4)), vld1q_s8(y[i].qs));
        KQ_DOT16(acc, vqtbl1q_s8(table, vshrq_n_u8(q, 4)), vld1q_s8(y[i].qs + 16));
        sumf += d * (float)vaddvq_s32(acc);
    }
    *s = sumf;
}

/* IQ4_XS: eight IQ4_NL sub-blocks of 32 under 6-bit sub-scales (minus 32) and one d. */
void KQ_NEON_FN(iq4xs_dot_q8k)(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq4_xs_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    const int8x16_t table = vld1q_s8(kq_iq4nl_values);
    const uint8x16_t low4 = vdupq_n_u8(0xF);
    float sumf = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d4d8 = kq_neon_h2f(x[i].d) * y[i].d;
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++, qs += 16, q8 += 32) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d4d8 * (float)(ls - 32);
            const uint8x16_t q = vld1q_u8(qs);
            int32x4_t acc = vdupq_n_s32(0);
            KQ_DOT16(acc, vqtbl1q_s8(table, vandq_u8(q, low4)), vld1q_s8(q8));
            KQ_DOT16(acc, vqtbl1q_s8(table, vshrq_n_u8(q, 4)), vld1q_s8(q8 + 16));
            sumf += dl * (float)vaddvq_s32(acc);
        }
    }
    *s = sumf;
}

KQ_NEON_MUL_ROWS(KQ_NEON_FN(q8_0_mul_q8_0), KQ_NEON_FN(q8_0_dot_q8_0))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(q4_0_mul_q8_0), KQ_NEON_FN(q4_0_dot_q8_0))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(q4k_mul_q8k), KQ_NEON_FN(q4k_dot_q8k))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(q6k_mul_q8k), KQ_NEON_FN(q6k_dot_q8k))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(q5k_mul_q8k), KQ_NEON_FN(q5k_dot_q8k))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(iq4nl_mul_rows_q80), KQ_NEON_FN(iq4nl_dot_q80))
KQ_NEON_MUL_ROWS(KQ_NEON_FN(iq4xs_mul_rows_q8k), KQ_NEON_FN(iq4xs_dot_q8k))
