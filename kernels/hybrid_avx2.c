/* AVX2 + FMA primitives of the hybrid trunk's kernels (scalar reference: hybrid_ref.c). */
#include <immintrin.h>

#include "kernels/hybrid.h"
#include "splash/fp.h"

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

const struct hybrid_vec hybrid_vec_avx2 = {
    .isa = "avx2",
    .cpu_requires = SPLASH_CPU_AVX2 | SPLASH_CPU_FMA,
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
};
