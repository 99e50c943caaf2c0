/* kquants mul_rows for Armv8.6 int8 matrix multiply (i8mm; the Makefile compiles this file
 * with +dotprod+i8mm): one smmla multiplies a 2x8 int8 tile of two weight rows by a 8x2
 * tile of two activation rows, four int32 sums at once, twice sdot's work per instruction.
 * Prefill and batched decode pass up to 8 activation rows: a pass decodes two weight rows'
 * block once for up to four activation-row pairs.
 *
 * The four sums of a tile are exact integers; each lane then takes the scalar row's float
 * steps for its (weight row, activation row) pair in the scalar order, so every output has
 * the scalar row's bits (and the dotprod vec_dot's, which leftover odd rows take). */
#include <arm_neon.h>

#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"

#define I8MM_INLINE static inline __attribute__((always_inline))
/* activation-row pairs one pass keeps in registers */
#define I8MM_MAX_PAIRS 4
#define I8MM_UNROLL _Pragma("GCC unroll 4")

I8MM_INLINE float h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* The tile operands for values 8k..8k+7 of a and b (16 values each): [a's 8, b's 8]. */
I8MM_INLINE int8x16_t lo_pair(int8x16_t a, int8x16_t b)
{
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

I8MM_INLINE int8x16_t hi_pair(int8x16_t a, int8x16_t b)
{
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* acc += the 2x2 dots of 32 values: weight rows (w0, w1), activation rows (a0, a1), each
 * given as two 16-value halves; lanes [w0.a0, w0.a1, w1.a0, w1.a1]. */
I8MM_INLINE int32x4_t mmla32(int32x4_t acc, int8x16_t w0l, int8x16_t w0h, int8x16_t w1l,
                             int8x16_t w1h, const int8_t *a0, const int8_t *a1)
{
    const int8x16_t a0l = vld1q_s8(a0), a0h = vld1q_s8(a0 + 16);
    const int8x16_t a1l = vld1q_s8(a1), a1h = vld1q_s8(a1 + 16);
    acc = vmmlaq_s32(acc, lo_pair(w0l, w1l), lo_pair(a0l, a1l));
    acc = vmmlaq_s32(acc, hi_pair(w0l, w1l), hi_pair(a0l, a1l));
    acc = vmmlaq_s32(acc, lo_pair(w0h, w1h), lo_pair(a0h, a1h));
    acc = vmmlaq_s32(acc, hi_pair(w0h, w1h), hi_pair(a0h, a1h));
    return acc;
}

/* Lanes [x0, x0, x1, x1] and [y0, y1, y0, y1], so lane k pairs weight row k / 2 with
 * activation row k % 2. */
I8MM_INLINE float32x4_t by_weight(float x0, float x1)
{
    return vcombine_f32(vdup_n_f32(x0), vdup_n_f32(x1));
}

I8MM_INLINE float32x4_t by_act(float y0, float y1)
{
    const float32x2_t v = vset_lane_f32(y1, vdup_n_f32(y0), 1);
    return vcombine_f32(v, v);
}

/* A pass's four lanes of pair p into out (weight rows i, i + 1; activation rows 2p, 2p + 1). */
I8MM_INLINE void store_tile(float *out, size_t out_stride, int p, float32x4_t acc)
{
    float *o0 = out + (size_t)(2 * p) * out_stride, *o1 = o0 + out_stride;
    o0[0] = vgetq_lane_f32(acc, 0);
    o1[0] = vgetq_lane_f32(acc, 1);
    o0[1] = vgetq_lane_f32(acc, 2);
    o1[1] = vgetq_lane_f32(acc, 3);
}

/* ---- Q8_0 and Q4_0 against Q8_0: a 32-value block under one fp16 scale ---------------- */

/* Block i of a Q8_0 weight row: its 32 values as two halves, and its scale. */
I8MM_INLINE void q8_0_values(const void *row, int64_t i, int8x16_t *l, int8x16_t *h, float *d)
{
    const struct splash_q8_0_block *x = (const struct splash_q8_0_block *)row + i;
    *l = vld1q_s8(x->qs);
    *h = vld1q_s8(x->qs + 16);
    *d = h2f(x->d);
}

/* Block i of a Q4_0 weight row: low nibbles are values 0..15, high ones 16..31, minus 8. */
I8MM_INLINE void q4_0_values(const void *row, int64_t i, int8x16_t *l, int8x16_t *h, float *d)
{
    const struct q4_0_block *x = (const struct q4_0_block *)row + i;
    const uint8x16_t q = vld1q_u8(x->qs);
    const int8x16_t eight = vdupq_n_s8(8);
    *l = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0xf))), eight);
    *h = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
    *d = h2f(x->d);
}

/* Weight rows w0, w1 against np activation-row pairs: the scalar row's
 * sum += sumi * (d_w * d_a) per block, in lanes. */
#define Q80_TILE(name, values)                                                                     \
    I8MM_INLINE void name(int64_t nb, const void *w0, const void *w1, const char *act,            \
                          size_t act_stride, float *out, size_t out_stride, const int np)          \
    {                                                                                              \
        float32x4_t acc[I8MM_MAX_PAIRS];                                                           \
        I8MM_UNROLL                                                                                \
        for (int p = 0; p < np; p++)                                                               \
            acc[p] = vdupq_n_f32(0.0f);                                                            \
        for (int64_t i = 0; i < nb; i++) {                                                         \
            int8x16_t w0l, w0h, w1l, w1h;                                                          \
            float d0, d1;                                                                          \
            values(w0, i, &w0l, &w0h, &d0);                                                        \
            values(w1, i, &w1l, &w1h, &d1);                                                        \
            const float32x4_t dw = by_weight(d0, d1);                                              \
            I8MM_UNROLL                                                                            \
            for (int p = 0; p < np; p++) {                                                         \
                const struct splash_q8_0_block *y0 =                                               \
                    (const struct splash_q8_0_block *)(act + (size_t)(2 * p) * act_stride) + i;    \
                const struct splash_q8_0_block *y1 =                                               \
                    (const struct splash_q8_0_block *)((const char *)y0 + act_stride);             \
                const int32x4_t s = mmla32(vdupq_n_s32(0), w0l, w0h, w1l, w1h, y0->qs, y1->qs);    \
                const float32x4_t d = vmulq_f32(dw, by_act(h2f(y0->d), h2f(y1->d)));               \
                acc[p] = vaddq_f32(acc[p], vmulq_f32(vcvtq_f32_s32(s), d));                        \
            }                                                                                      \
        }                                                                                          \
        I8MM_UNROLL                                                                                \
        for (int p = 0; p < np; p++)                                                               \
            store_tile(out, out_stride, p, acc[p]);                                                \
    }

Q80_TILE(q8_0_tile, q8_0_values)
Q80_TILE(q4_0_tile, q4_0_values)

/* ---- Q4_K against Q8_K ----------------------------------------------------------------- */

/* The scalar row per 256-value block: isum = sum of sc * (sum q a) over the eight
 * sub-blocks of 32, msum = sum of m * (the activation's sums of those 32), then
 * sum += d_a * d_w * isum - d_a * dmin_w * msum; isum and msum as exact int32 lanes. */
I8MM_INLINE void q4k_tile(int64_t nb, const void *w0, const void *w1, const char *act,
                          size_t act_stride, float *out, size_t out_stride, const int np)
{
    const struct q4_k_block *x0 = w0, *x1 = w1;
    const uint8x16_t low4 = vdupq_n_u8(0xf);
    float32x4_t acc[I8MM_MAX_PAIRS];
    I8MM_UNROLL
    for (int p = 0; p < np; p++)
        acc[p] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        int32x4_t isum[I8MM_MAX_PAIRS], msum[I8MM_MAX_PAIRS];
        I8MM_UNROLL
        for (int p = 0; p < np; p++)
            isum[p] = msum[p] = vdupq_n_s32(0);
        for (int s = 0; s < 4; s++) {
            uint8_t sc[2][2], m[2][2]; /* [weight row][sub-block 2s, 2s + 1] */
            kq_get_scale_min_k4(2 * s, x0[i].scales, &sc[0][0], &m[0][0]);
            kq_get_scale_min_k4(2 * s + 1, x0[i].scales, &sc[0][1], &m[0][1]);
            kq_get_scale_min_k4(2 * s, x1[i].scales, &sc[1][0], &m[1][0]);
            kq_get_scale_min_k4(2 * s + 1, x1[i].scales, &sc[1][1], &m[1][1]);
            const int32x4_t sc1 = vcombine_s32(vdup_n_s32(sc[0][0]), vdup_n_s32(sc[1][0]));
            const int32x4_t sc2 = vcombine_s32(vdup_n_s32(sc[0][1]), vdup_n_s32(sc[1][1]));
            const int32x4_t m1 = vcombine_s32(vdup_n_s32(m[0][0]), vdup_n_s32(m[1][0]));
            const int32x4_t m2 = vcombine_s32(vdup_n_s32(m[0][1]), vdup_n_s32(m[1][1]));
            const uint8x16_t a0 = vld1q_u8(x0[i].qs + 32 * s), b0 = vld1q_u8(x0[i].qs + 32 * s + 16);
            const uint8x16_t a1 = vld1q_u8(x1[i].qs + 32 * s), b1 = vld1q_u8(x1[i].qs + 32 * s + 16);
            /* sub-block 2s: the low nibbles; 2s + 1: the high ones */
            const int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(a0, low4)),
                            l0h = vreinterpretq_s8_u8(vandq_u8(b0, low4));
            const int8x16_t l1 = vreinterpretq_s8_u8(vandq_u8(a1, low4)),
                            l1h = vreinterpretq_s8_u8(vandq_u8(b1, low4));
            const int8x16_t u0 = vreinterpretq_s8_u8(vshrq_n_u8(a0, 4)),
                            u0h = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4));
            const int8x16_t u1 = vreinterpretq_s8_u8(vshrq_n_u8(a1, 4)),
                            u1h = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
            I8MM_UNROLL
            for (int p = 0; p < np; p++) {
                const struct splash_q8_k_block *y0 =
                    (const struct splash_q8_k_block *)(act + (size_t)(2 * p) * act_stride) + i;
                const struct splash_q8_k_block *y1 =
                    (const struct splash_q8_k_block *)((const char *)y0 + act_stride);
                const int8_t *q0 = y0->qs + 64 * s, *q1 = y1->qs + 64 * s;
                const int32x4_t s1 = mmla32(vdupq_n_s32(0), l0, l0h, l1, l1h, q0, q1);
                const int32x4_t s2 = mmla32(vdupq_n_s32(0), u0, u0h, u1, u1h, q0 + 32, q1 + 32);
                isum[p] = vmlaq_s32(vmlaq_s32(isum[p], s1, sc1), s2, sc2);
                const int16_t *bs0 = y0->bsums + 4 * s, *bs1 = y1->bsums + 4 * s;
                const int32x2_t e1 = {bs0[0] + bs0[1], bs1[0] + bs1[1]};
                const int32x2_t e2 = {bs0[2] + bs0[3], bs1[2] + bs1[3]};
                msum[p] = vmlaq_s32(vmlaq_s32(msum[p], m1, vcombine_s32(e1, e1)), m2,
                                    vcombine_s32(e2, e2));
            }
        }
        const float32x4_t dw = by_weight(h2f(x0[i].d), h2f(x1[i].d));
        const float32x4_t dmin = by_weight(h2f(x0[i].dmin), h2f(x1[i].dmin));
        I8MM_UNROLL
        for (int p = 0; p < np; p++) {
            const struct splash_q8_k_block *y0 =
                (const struct splash_q8_k_block *)(act + (size_t)(2 * p) * act_stride) + i;
            const struct splash_q8_k_block *y1 =
                (const struct splash_q8_k_block *)((const char *)y0 + act_stride);
            const float32x4_t da = by_act(y0->d, y1->d);
            const float32x4_t t1 = vmulq_f32(vmulq_f32(da, dw), vcvtq_f32_s32(isum[p]));
            const float32x4_t t2 = vmulq_f32(vmulq_f32(da, dmin), vcvtq_f32_s32(msum[p]));
            acc[p] = vaddq_f32(acc[p], vsubq_f32(t1, t2));
        }
    }
    I8MM_UNROLL
    for (int p = 0; p < np; p++)
        store_tile(out, out_stride, p, acc[p]);
}

/* ---- the mul_rows loop ----------------------------------------------------------------- */

/* Weight rows two at a time against activation rows two at a time, up to I8MM_MAX_PAIRS
 * pairs per pass (np a compile-time constant so the accumulators stay in registers); an
 * odd last weight or activation row takes the dotprod vec_dot. */
#define I8MM_MUL_ROWS(name, tile, dot, block_elems)                                                \
    void name(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,            \
              size_t act_stride, int64_t n_act, float *out, size_t out_stride)                     \
    {                                                                                              \
        const int64_t nb = n / (block_elems), pairs = n_act / 2;                                   \
        const char *wc = w, *ac = act;                                                             \
        int64_t i = 0;                                                                             \
        for (; i + 1 < n_w; i += 2) {                                                              \
            const char *w0 = wc + (size_t)i * w_stride, *w1 = w0 + w_stride;                       \
            for (int64_t p = 0; p < pairs; p += I8MM_MAX_PAIRS) {                                  \
                const char *a = ac + (size_t)(2 * p) * act_stride;                                 \
                float *o = out + (size_t)(2 * p) * out_stride + (size_t)i;                         \
                switch (pairs - p < I8MM_MAX_PAIRS ? (int)(pairs - p) : I8MM_MAX_PAIRS) {          \
                case 1: tile(nb, w0, w1, a, act_stride, o, out_stride, 1); break;                  \
                case 2: tile(nb, w0, w1, a, act_stride, o, out_stride, 2); break;                  \
                case 3: tile(nb, w0, w1, a, act_stride, o, out_stride, 3); break;                  \
                default: tile(nb, w0, w1, a, act_stride, o, out_stride, 4); break;                 \
                }                                                                                  \
            }                                                                                      \
            if (n_act % 2) {                                                                       \
                const char *a = ac + (size_t)(n_act - 1) * act_stride;                             \
                float *o = out + (size_t)(n_act - 1) * out_stride + (size_t)i;                     \
                dot(n, o, w0, a);                                                                  \
                dot(n, o + 1, w1, a);                                                              \
            }                                                                                      \
        }                                                                                          \
        if (i < n_w)                                                                               \
            for (int64_t j = 0; j < n_act; j++)                                                    \
                dot(n, out + (size_t)j * out_stride + (size_t)i, wc + (size_t)i * w_stride,        \
                    ac + (size_t)j * act_stride);                                                  \
    }

I8MM_MUL_ROWS(q8_0_mul_q8_0_neon_i8mm, q8_0_tile, q8_0_dot_q8_0_neon_dotprod, SPLASH_QK8_0)
I8MM_MUL_ROWS(q4_0_mul_q8_0_neon_i8mm, q4_0_tile, q4_0_dot_q8_0_neon_dotprod, KQ_QK4_0)
I8MM_MUL_ROWS(q4k_mul_q8k_neon_i8mm, q4k_tile, q4k_dot_q8k_neon_dotprod, SPLASH_QK_K)
