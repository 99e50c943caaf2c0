/* NEON (Armv8.0 Advanced SIMD, FMA) vector primitives of the kernels: the AVX2 table's
 * algorithms at four lanes (scalar reference: vec.c). test-kernels holds each to the
 * reference within the bounds it documents; make test-arm64 runs it under qemu. */
#include <arm_neon.h>
#include <math.h>

#include "kernels/ops.h"
#include "splash/fp.h"
#include "splash/vec_exp.h"

#define NEON_INLINE static inline __attribute__((always_inline))

/* e^x as splash_exp256 (splash/vec_exp.h) computes it: x clamped to [-87, 88], x = n ln2 + r,
 * the degree-7 Taylor polynomial of e^r, times 2^n built in the exponent bits. */
NEON_INLINE float32x4_t exp4(float32x4_t x)
{
    x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.0f)), vdupq_n_f32(-87.0f));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, SPLASH_EXP_LOG2E));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(SPLASH_EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(SPLASH_EXP_LN2_LO));
    float32x4_t p;
#define NEON_FMADD(a, b, c) vfmaq_f32((c), (a), (b))
    SPLASH_EXP_TAYLOR(NEON_FMADD, vdupq_n_f32, p, r);
#undef NEON_FMADD
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

NEON_INLINE float32x4_t load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* 8 int8 values as two float vectors */
NEON_INLINE void load_i8x8(const int8_t *p, float32x4_t *lo, float32x4_t *hi)
{
    const int16x8_t h = vmovl_s8(vld1_s8(p));
    *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
    *hi = vcvtq_f32_s32(vmovl_high_s16(h));
}

static float neon_dot(int64_t n, const float *a, const float *b)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void neon_axpy(int64_t n, float alpha, const float *x, float *y)
{
    const float32x4_t va = vdupq_n_f32(alpha);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

static void neon_scale(int64_t n, float alpha, float *y)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), alpha));
    for (; i < n; i++)
        y[i] *= alpha;
}

static float neon_sumsq(int64_t n, const float *x)
{
    /* double accumulation, as the reference (ggml's norms sum in double) */
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        s0 = vfmaq_f64(s0, lo, lo);
        s1 = vfmaq_f64(s1, hi, hi);
    }
    double s = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++)
        s += (double)x[i] * x[i];
    return (float)s;
}

static void neon_scale_mul(int64_t n, const float *x, float s, const float *w, float *y)
{
    int64_t i = 0;
    if (w) {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), s), vld1q_f32(w + i)));
        for (; i < n; i++)
            y[i] = x[i] * s * w[i];
    } else {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), s));
        for (; i < n; i++)
            y[i] = x[i] * s;
    }
}

static float neon_dot_bf16(int64_t n, const float *a, const uint16_t *b)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), load_bf16(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), load_bf16(b + i + 4));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), load_bf16(b + i));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++)
        s += a[i] * splash_bf16_to_fp32(b[i]);
    return s;
}

static float neon_dot_i8(int64_t n, const float *a, const int8_t *b)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t lo, hi;
        load_i8x8(b + i, &lo, &hi);
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), lo);
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), hi);
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++)
        s += a[i] * (float)b[i];
    return s;
}

static void neon_axpy_bf16(int64_t n, float alpha, const uint16_t *x, float *y)
{
    const float32x4_t va = vdupq_n_f32(alpha);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, load_bf16(x + i)));
    for (; i < n; i++)
        y[i] += alpha * splash_bf16_to_fp32(x[i]);
}

static void neon_axpy_i8(int64_t n, float alpha, const int8_t *x, float *y)
{
    const float32x4_t va = vdupq_n_f32(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t lo, hi;
        load_i8x8(x + i, &lo, &hi);
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, lo));
        vst1q_f32(y + i + 4, vfmaq_f32(vld1q_f32(y + i + 4), va, hi));
    }
    for (; i < n; i++)
        y[i] += alpha * (float)x[i];
}

static float neon_gdn_row(int64_t n, float *s, float a, const float *k, const float *q, float vj,
                          float beta)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vmulq_n_f32(vld1q_f32(s + i), a);
        vst1q_f32(s + i, v);
        acc = vfmaq_f32(acc, v, vld1q_f32(k + i));
    }
    float sk = vaddvq_f32(acc);
    for (; i < n; i++) {
        s[i] *= a;
        sk += s[i] * k[i];
    }
    const float u = beta * (vj - sk);
    const float32x4_t vu = vdupq_n_f32(u);
    acc = vdupq_n_f32(0.0f);
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t v = vfmaq_f32(vld1q_f32(s + i), vu, vld1q_f32(k + i));
        vst1q_f32(s + i, v);
        acc = vfmaq_f32(acc, v, vld1q_f32(q + i));
    }
    float o = vaddvq_f32(acc);
    for (; i < n; i++) {
        s[i] += u * k[i];
        o += s[i] * q[i];
    }
    return o;
}

/* A 4 x 2 block of dot products: 8 accumulators, each input vector loaded once. */
static void gemm_block4x2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *c, int64_t ldc, int accumulate)
{
    float32x4_t acc[4][2];
    for (int i = 0; i < 4; i++)
        acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
    int64_t t = 0;
    for (; t + 4 <= k; t += 4) {
        const float32x4_t b0 = vld1q_f32(b + t), b1 = vld1q_f32(b + ldb + t);
        for (int i = 0; i < 4; i++) {
            const float32x4_t va = vld1q_f32(a + i * lda + t);
            acc[i][0] = vfmaq_f32(acc[i][0], va, b0);
            acc[i][1] = vfmaq_f32(acc[i][1], va, b1);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            float s = vaddvq_f32(acc[i][j]);
            for (int64_t u = t; u < k; u++)
                s += a[i * lda + u] * b[j * ldb + u];
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

static void neon_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    const int64_t m4 = m & ~(int64_t)3, n2 = n & ~(int64_t)1;
    for (int64_t i = 0; i < m4; i += 4)
        for (int64_t j = 0; j < n2; j += 2)
            gemm_block4x2(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, accumulate);
    /* the edges, one dot at a time */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i < m4 ? n2 : 0; j < n; j++) {
            const float s = neon_dot(k, a + i * lda, b + j * ldb);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

/* ---- products without reductions, exp, SiLU ------------------------------------- */

/* An MR x (4 NV) tile of c = a b: c's tile stays in registers over k, each row of b's
 * columns is loaded once for the MR rows of a. */
NEON_INLINE void nn_tile(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int accumulate, int mr, int nv)
{
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[i][v] = accumulate ? vld1q_f32(c + i * ldc + 4 * v) : vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < k; t++) {
        float32x4_t vb[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            vb[v] = vld1q_f32(b + t * ldb + 4 * v);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            const float32x4_t va = vdupq_n_f32(a[i * lda + t]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[i][v] = vfmaq_f32(acc[i][v], va, vb[v]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            vst1q_f32(c + i * ldc + 4 * v, acc[i][v]);
}

static void nn_tile_any(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *c, int64_t ldc, int accumulate, int mr, int nv)
{
    switch (mr * 8 + nv) {
#define NN_CASE(R, V)                                                                              \
    case R * 8 + V:                                                                                \
        nn_tile(k, a, lda, b, ldb, c, ldc, accumulate, R, V);                                      \
        break;
        NN_CASE(1, 1) NN_CASE(1, 2) NN_CASE(1, 3) NN_CASE(1, 4)
        NN_CASE(2, 1) NN_CASE(2, 2) NN_CASE(2, 3) NN_CASE(2, 4)
        NN_CASE(3, 1) NN_CASE(3, 2) NN_CASE(3, 3) NN_CASE(3, 4)
        NN_CASE(4, 1) NN_CASE(4, 2) NN_CASE(4, 3)
#undef NN_CASE
    default:
        nn_tile(k, a, lda, b, ldb, c, ldc, accumulate, 4, 4);
    }
}

static void neon_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    const int64_t n4 = n & ~(int64_t)3;
    for (int64_t j = 0; j < n4; j += 16) {
        const int nv = (int)((n4 - j < 16 ? n4 - j : 16) / 4);
        for (int64_t i = 0; i < m; i += 4) {
            const int mr = m - i < 4 ? (int)(m - i) : 4;
            nn_tile_any(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, accumulate, mr, nv);
        }
    }
    /* the last n % 4 columns, one output at a time in the tile's order */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n4; j < n; j++) {
            float s = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t t = 0; t < k; t++)
                s = fmaf(a[i * lda + t], b[t * ldb + j], s);
            c[i * ldc + j] = s;
        }
}

NEON_INLINE float32x4_t silu4(float32x4_t x)
{
    const float32x4_t e = exp4(vnegq_f32(x));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}

static void neon_silu(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void neon_conv_silu(int64_t n, int64_t nc, const float *x, int64_t x_stride,
                           const float *state, int64_t st_stride, const float *wc, int32_t kw,
                           float *out, int64_t out_stride)
{
    const int64_t nc4 = nc & ~(int64_t)3;
    for (int64_t c = 0; c < nc4; c += 4) {
        /* tap j of 4 channels, gathered from their rows of kw taps */
        float32x4_t w[16];
        for (int32_t j = 0; j < kw; j++) {
            const float t[4] = {wc[c * kw + j], wc[(c + 1) * kw + j], wc[(c + 2) * kw + j],
                                wc[(c + 3) * kw + j]};
            w[j] = vld1q_f32(t);
        }
        for (int64_t i = 0; i < n; i++) {
            float32x4_t s = vdupq_n_f32(0.0f);
            for (int32_t j = 0; j < kw; j++) {
                const int64_t r = i + j - (kw - 1);
                const float *row = r >= 0 ? x + r * x_stride : state + (kw - 1 + r) * st_stride;
                /* product then sum, as the reference */
                s = vaddq_f32(s, vmulq_f32(w[j], vld1q_f32(row + c)));
            }
            vst1q_f32(out + i * out_stride + c, silu4(s));
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = nc4; c < nc; c++) {
            float s = 0.0f;
            for (int32_t j = 0; j < kw; j++) {
                const int64_t r = i + j - (kw - 1);
                const float xv =
                    r >= 0 ? x[r * x_stride + c] : state[(kw - 1 + r) * st_stride + c];
                s += wc[c * kw + j] * xv;
            }
            out[i * out_stride + c] = s / (1.0f + expf(-s));
        }
}

static float neon_exp_sum(int64_t n, const float *x, float m, float *y)
{
    const float32x4_t vm = vdupq_n_f32(m), lowest = vdupq_n_f32(-87.0f);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t d = vsubq_f32(vld1q_f32(x + i), vm);
        /* exp4 clamps at -87: exactly 0 below, as expf underflows */
        const float32x4_t e = vreinterpretq_f32_u32(
            vandq_u32(vreinterpretq_u32_f32(exp4(d)), vcgeq_f32(d, lowest)));
        vst1q_f32(y + i, e);
        acc = vaddq_f32(acc, e);
    }
    float s = vaddvq_f32(acc);
    for (; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    return s;
}

/* Four pairs at a time, cos and sin deinterleaved by ld2; each product rounded before the
 * sum (no FMA), so the reference's bits. */
static void neon_rope_pairs(int32_t n, float *x, float *y, const float *cs)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4x2_t t = vld2q_f32(cs + 2 * i);
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(y + i);
        vst1q_f32(x + i, vsubq_f32(vmulq_f32(a, t.val[0]), vmulq_f32(b, t.val[1])));
        vst1q_f32(y + i, vaddq_f32(vmulq_f32(a, t.val[1]), vmulq_f32(b, t.val[0])));
    }
    for (; i < n; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float a = x[i], b = y[i];
        x[i] = a * c - b * s;
        y[i] = a * s + b * c;
    }
}

const struct kernel_vec kernel_vec_neon = {
    .isa = "neon",
    .cpu_requires = SPLASH_CPU_NEON,
    .dot = neon_dot,
    .axpy = neon_axpy,
    .scale = neon_scale,
    .sumsq = neon_sumsq,
    .scale_mul = neon_scale_mul,
    .dot_bf16 = neon_dot_bf16,
    .dot_i8 = neon_dot_i8,
    .axpy_bf16 = neon_axpy_bf16,
    .axpy_i8 = neon_axpy_i8,
    .gdn_row = neon_gdn_row,
    .gemm_nt = neon_gemm_nt,
    .gemm_nn = neon_gemm_nn,
    .conv_silu = neon_conv_silu,
    .silu = neon_silu,
    .exp_sum = neon_exp_sum,
    .rope_pairs = neon_rope_pairs,
};
