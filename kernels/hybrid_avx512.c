/* AVX-512 primitives of the hybrid trunk's kernels (scalar reference: hybrid_ref.c). */
#include <immintrin.h>

#include "kernels/hybrid.h"
#include "splash/fp.h"

static inline __m512 load_bf16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 load_i8(const int8_t *p)
{
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}

static inline __mmask16 tail_mask(int64_t left)
{
    return (__mmask16)((1u << left) - 1u);
}

static float avx512_dot(int64_t n, const float *a, const float *b)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void avx512_axpy(int64_t n, float alpha, const float *x, float *y)
{
    __m512 va = _mm512_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i,
                         _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(
            y + i, m,
            _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static void avx512_scale(int64_t n, float alpha, float *y)
{
    __m512 va = _mm512_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(va, _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static float avx512_sumsq(int64_t n, const float *x)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        __m512d hi =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        s0 = _mm512_fmadd_pd(lo, lo, s0);
        s1 = _mm512_fmadd_pd(hi, hi, s1);
    }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; i < n; i++)
        s += (double)x[i] * x[i];
    return (float)s;
}

static void avx512_scale_mul(int64_t n, const float *x, float s, const float *w, float *y)
{
    __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
        if (w)
            v = _mm512_mul_ps(v, _mm512_loadu_ps(w + i));
        _mm512_storeu_ps(y + i, v);
    }
    for (; i < n; i++)
        y[i] = x[i] * s * (w ? w[i] : 1.0f);
}

static float avx512_dot_bf16(int64_t n, const float *a, const uint16_t *b)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_bf16(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), load_bf16(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_bf16(b + i), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * splash_bf16_to_fp32(b[i]);
    return s;
}

static float avx512_dot_i8(int64_t n, const float *a, const int8_t *b)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_i8(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), load_i8(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_i8(b + i), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * (float)b[i];
    return s;
}

static void avx512_axpy_bf16(int64_t n, float alpha, const uint16_t *x, float *y)
{
    __m512 va = _mm512_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load_bf16(x + i), _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * splash_bf16_to_fp32(x[i]);
}

static void avx512_axpy_i8(int64_t n, float alpha, const int8_t *x, float *y)
{
    __m512 va = _mm512_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load_i8(x + i), _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += alpha * (float)x[i];
}

static float avx512_gdn_row(int64_t n, float *s, float a, const float *k, const float *q, float vj,
                            float beta)
{
    __m512 va = _mm512_set1_ps(a), acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + i), va);
        _mm512_storeu_ps(s + i, v);
        acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(k + i), acc);
    }
    float sk = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) {
        s[i] *= a;
        sk += s[i] * k[i];
    }
    float u = beta * (vj - sk);
    __m512 vu = _mm512_set1_ps(u);
    acc = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 v = _mm512_fmadd_ps(vu, _mm512_loadu_ps(k + i), _mm512_loadu_ps(s + i));
        _mm512_storeu_ps(s + i, v);
        acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(q + i), acc);
    }
    float o = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) {
        s[i] += u * k[i];
        o += s[i] * q[i];
    }
    return o;
}

/* A 4 x 4 block of dot products: 16 accumulators, each input vector loaded once. */
static void gemm_block4x4(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *c, int64_t ldc, int accumulate)
{
    __m512 acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 16 <= k; t += 16) {
        __m512 vb[4];
        for (int j = 0; j < 4; j++)
            vb[j] = _mm512_loadu_ps(b + j * ldb + t);
        for (int i = 0; i < 4; i++) {
            __m512 va = _mm512_loadu_ps(a + i * lda + t);
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_fmadd_ps(va, vb[j], acc[i][j]);
        }
    }
    if (t < k) {
        __mmask16 m = tail_mask(k - t);
        __m512 vb[4];
        for (int j = 0; j < 4; j++)
            vb[j] = _mm512_maskz_loadu_ps(m, b + j * ldb + t);
        for (int i = 0; i < 4; i++) {
            __m512 va = _mm512_maskz_loadu_ps(m, a + i * lda + t);
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_fmadd_ps(va, vb[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float s = _mm512_reduce_add_ps(acc[i][j]);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

static void avx512_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    int64_t m4 = m & ~(int64_t)3, n4 = n & ~(int64_t)3;
    for (int64_t i = 0; i < m4; i += 4)
        for (int64_t j = 0; j < n4; j += 4)
            gemm_block4x4(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, accumulate);
    /* the edges, one dot at a time */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i < m4 ? n4 : 0; j < n; j++) {
            float s = avx512_dot(k, a + i * lda, b + j * ldb);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

const struct hybrid_vec hybrid_vec_avx512 = {
    .isa = "avx512",
    .cpu_requires =
        SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512DQ,
    .dot = avx512_dot,
    .axpy = avx512_axpy,
    .scale = avx512_scale,
    .sumsq = avx512_sumsq,
    .scale_mul = avx512_scale_mul,
    .dot_bf16 = avx512_dot_bf16,
    .dot_i8 = avx512_dot_i8,
    .axpy_bf16 = avx512_axpy_bf16,
    .axpy_i8 = avx512_axpy_i8,
    .gdn_row = avx512_gdn_row,
    .gemm_nt = avx512_gemm_nt,
};
