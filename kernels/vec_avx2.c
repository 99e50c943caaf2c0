/* AVX2 + FMA vector primitives of the kernels (scalar reference: vec.c). */
#include <immintrin.h>
#include <math.h>

#include "kernels/ops.h"
#include "splash/fp.h"
#include "splash/vec_exp.h"

static inline float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline __m256 load_bf16(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m256 load_i8(const int8_t *p)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

static float avx2_dot(int64_t n, const float *a, const float *b)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void avx2_axpy(int64_t n, float alpha, const float *x, float *y)
{
    __m256 va = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

static void avx2_scale(int64_t n, float alpha, float *y)
{
    __m256 va = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] *= alpha;
}

static float avx2_sumsq(int64_t n, const float *x)
{
    /* double accumulation, as the reference (ggml's norms sum in double) */
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    s0 = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s0), _mm256_extractf128_pd(s0, 1));
    double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++)
        s += (double)x[i] * x[i];
    return (float)s;
}

static void avx2_scale_mul(int64_t n, const float *x, float s, const float *w, float *y)
{
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    if (w) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                                  _mm256_loadu_ps(w + i)));
        for (; i < n; i++)
            y[i] = x[i] * s * w[i];
    } else {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
        for (; i < n; i++)
            y[i] = x[i] * s;
    }
}

static float avx2_dot_bf16(int64_t n, const float *a, const uint16_t *b)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_bf16(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_bf16(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_bf16(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * splash_bf16_to_fp32(b[i]);
    return s;
}

static float avx2_dot_i8(int64_t n, const float *a, const int8_t *b)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_i8(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_i8(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_i8(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * (float)b[i];
    return s;
}

static void avx2_axpy_bf16(int64_t n, float alpha, const uint16_t *x, float *y)
{
    __m256 va = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_bf16(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * splash_bf16_to_fp32(x[i]);
}

static void avx2_axpy_i8(int64_t n, float alpha, const int8_t *x, float *y)
{
    __m256 va = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_i8(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * (float)x[i];
}

static float avx2_gdn_row(int64_t n, float *s, float a, const float *k, const float *q, float vj,
                          float beta)
{
    __m256 va = _mm256_set1_ps(a), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), va);
        _mm256_storeu_ps(s + i, v);
        acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(k + i), acc);
    }
    float sk = hsum256(acc);
    for (; i < n; i++) {
        s[i] *= a;
        sk += s[i] * k[i];
    }
    float u = beta * (vj - sk);
    __m256 vu = _mm256_set1_ps(u);
    acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_fmadd_ps(vu, _mm256_loadu_ps(k + i), _mm256_loadu_ps(s + i));
        _mm256_storeu_ps(s + i, v);
        acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(q + i), acc);
    }
    float o = hsum256(acc);
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
    __m256 acc[4][2];
    for (int i = 0; i < 4; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 8 <= k; t += 8) {
        __m256 b0 = _mm256_loadu_ps(b + t), b1 = _mm256_loadu_ps(b + ldb + t);
        for (int i = 0; i < 4; i++) {
            __m256 va = _mm256_loadu_ps(a + i * lda + t);
            acc[i][0] = _mm256_fmadd_ps(va, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(va, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            float s = hsum256(acc[i][j]);
            for (int64_t u = t; u < k; u++)
                s += a[i * lda + u] * b[j * ldb + u];
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

static void avx2_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    int64_t m4 = m & ~(int64_t)3, n2 = n & ~(int64_t)1;
    for (int64_t i = 0; i < m4; i += 4)
        for (int64_t j = 0; j < n2; j += 2)
            gemm_block4x2(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, accumulate);
    /* the edges, one dot at a time */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i < m4 ? n2 : 0; j < n; j++) {
            float s = avx2_dot(k, a + i * lda, b + j * ldb);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

/* ---- products without reductions, exp, SiLU ------------------------------------- */

static inline __m256i lane_mask(int64_t left)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)), idx);
}

/* An MR x (8 NV) tile of c = a b (see the AVX-512 version). */
static inline __attribute__((always_inline)) void nn_tile(int64_t k, const float *a, int64_t lda,
                                                          const float *b, int64_t ldb, float *c,
                                                          int64_t ldc, int accumulate, int mr,
                                                          int nv, __m256i last)
{
    const __m256i full = _mm256_set1_epi32(-1);
    __m256 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[i][v] = accumulate
                            ? _mm256_maskload_ps(c + i * ldc + 8 * v, v == nv - 1 ? last : full)
                            : _mm256_setzero_ps();
    for (int64_t t = 0; t < k; t++) {
        __m256 vb[4];
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            vb[v] = _mm256_maskload_ps(b + t * ldb + 8 * v, v == nv - 1 ? last : full);
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            __m256 va = _mm256_broadcast_ss(a + i * lda + t);
            #pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[i][v] = _mm256_fmadd_ps(va, vb[v], acc[i][v]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            _mm256_maskstore_ps(c + i * ldc + 8 * v, v == nv - 1 ? last : full, acc[i][v]);
}

static void nn_tile_any(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *c, int64_t ldc, int accumulate, int mr, int nv, __m256i last)
{
    switch (mr * 8 + nv) {
#define NN_CASE(R, V)                                                                              \
    case R * 8 + V:                                                                                \
        nn_tile(k, a, lda, b, ldb, c, ldc, accumulate, R, V, last);                                \
        break;
        NN_CASE(1, 1) NN_CASE(1, 2) NN_CASE(1, 3) NN_CASE(1, 4)
        NN_CASE(2, 1) NN_CASE(2, 2) NN_CASE(2, 3) NN_CASE(2, 4)
        NN_CASE(3, 1) NN_CASE(3, 2) NN_CASE(3, 3) NN_CASE(3, 4)
        NN_CASE(4, 1) NN_CASE(4, 2) NN_CASE(4, 3)
#undef NN_CASE
    default:
        nn_tile(k, a, lda, b, ldb, c, ldc, accumulate, 4, 4, last);
    }
}

static void avx2_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    for (int64_t j = 0; j < n; j += 32) {
        int64_t w = n - j < 32 ? n - j : 32;
        int nv = (int)((w + 7) / 8);
        __m256i last = lane_mask(w % 8 ? w % 8 : 8);
        for (int64_t i = 0; i < m; i += 4) {
            int mr = m - i < 4 ? (int)(m - i) : 4;
            nn_tile_any(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, accumulate, mr, nv,
                        last);
        }
    }
}

static inline __m256 silu256(__m256 x)
{
    __m256 e = splash_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static void avx2_silu(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, silu256(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void avx2_conv_silu(int64_t n, int64_t nc, const float *x, int64_t x_stride,
                           const float *state, int64_t st_stride, const float *wc, int32_t kw,
                           float *out, int64_t out_stride)
{
    /* tap j of 8 channels, gathered from their rows of kw taps */
    const __m256i lanes =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(kw));
    for (int64_t c = 0; c < nc; c += 8) {
        __m256i m = lane_mask(nc - c);
        __m256 w[16];
        for (int32_t j = 0; j < kw; j++)
            w[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), wc + c * kw + j, lanes,
                                            _mm256_castsi256_ps(m), 4);
        for (int64_t i = 0; i < n; i++) {
            __m256 s = _mm256_setzero_ps();
            for (int32_t j = 0; j < kw; j++) {
                int64_t r = i + j - (kw - 1);
                const float *row = r >= 0 ? x + r * x_stride : state + (kw - 1 + r) * st_stride;
                /* product then sum, as the reference (see the AVX-512 row) */
                s = _mm256_add_ps(s, _mm256_mul_ps(w[j], _mm256_maskload_ps(row + c, m)));
            }
            _mm256_maskstore_ps(out + i * out_stride + c, m, silu256(s));
        }
    }
}

static float avx2_exp_sum(int64_t n, const float *x, float m, float *y)
{
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        /* splash_exp256 clamps at -87: exactly 0 below, as expf underflows */
        __m256 e = _mm256_and_ps(splash_exp256(d),
                                 _mm256_cmp_ps(d, _mm256_set1_ps(-87.0f), _CMP_GE_OQ));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float s = hsum256(acc);
    for (; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    return s;
}

/* ---- the f16 cache's attention: the scalar's bits (F16C conversions round to nearest
 * even, as splash_fp32_to_fp16 does; the products are exact in float) ---- */

static void avx2_round_f16(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        y[i] = splash_fp16_to_fp32(splash_fp32_to_fp16(x[i]));
}

static double avx2_dot_f16(int64_t n, const float *a, const uint16_t *b)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 p = _mm256_mul_ps(_mm256_loadu_ps(a + i),
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    double l[4], h[4];
    _mm256_storeu_pd(l, lo);
    _mm256_storeu_pd(h, hi);
    double s = ((l[0] + h[0]) + (l[1] + h[1])) + ((l[2] + h[2]) + (l[3] + h[3]));
    for (; i < n; i++)
        s += (double)(a[i] * splash_fp16_to_fp32(b[i]));
    return s;
}

static void avx2_acc_f16(int64_t n, uint16_t *acc, const uint16_t *v, float ms, float vs)
{
    const __m256 m = _mm256_set1_ps(ms), w = _mm256_set1_ps(vs);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc + i)));
        if (ms != 1.0f)
            a = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(a, m), _MM_FROUND_TO_NEAREST_INT));
        a = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i))), w, a);
        _mm_storeu_si128((__m128i *)(acc + i), _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        float a = splash_fp16_to_fp32(acc[i]);
        if (ms != 1.0f)
            a = splash_fp16_to_fp32(splash_fp32_to_fp16(a * ms));
        acc[i] = splash_fp32_to_fp16(fmaf(splash_fp16_to_fp32(v[i]), vs, a));
    }
}

const struct kernel_vec kernel_vec_avx2 = {
    .isa = "avx2",
    .cpu_requires = SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C,
    .dot = avx2_dot,
    .axpy = avx2_axpy,
    .scale = avx2_scale,
    .sumsq = avx2_sumsq,
    .scale_mul = avx2_scale_mul,
    .dot_bf16 = avx2_dot_bf16,
    .dot_i8 = avx2_dot_i8,
    .axpy_bf16 = avx2_axpy_bf16,
    .axpy_i8 = avx2_axpy_i8,
    .gdn_row = avx2_gdn_row,
    .gemm_nt = avx2_gemm_nt,
    .gemm_nn = avx2_gemm_nn,
    .conv_silu = avx2_conv_silu,
    .silu = avx2_silu,
    .exp_sum = avx2_exp_sum,
    .round_f16 = avx2_round_f16,
    .dot_f16 = avx2_dot_f16,
    .acc_f16 = avx2_acc_f16,
};
