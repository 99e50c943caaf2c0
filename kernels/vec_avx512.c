/* AVX-512 vector primitives of the kernels (scalar reference: vec.c). */
#include <immintrin.h>
#include <math.h>

#include "kernels/ops.h"
#include "splash/fp.h"
#include "splash/vec_exp.h"

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

/* gdn_row through n_tok tokens with the row's nv vectors in registers: avx512_gdn_row's
 * steps per token (n a multiple of 16), without its stores and reloads in between. */
static inline __attribute__((always_inline)) void
gdn_row_tokens_regs(const int nv, float *s, int32_t n_tok, const float *a, const float *k,
                    const float *q, int64_t kq_stride, const float *v, int64_t v_stride,
                    const float *beta, int64_t nvh, float *out, int64_t out_stride)
{
    __m512 r[16];
    for (int i = 0; i < nv; i++)
        r[i] = _mm512_loadu_ps(s + 16 * i);
    for (int32_t t = 0; t < n_tok; t++) {
        const float *kt = k + t * kq_stride, *qt = q + t * kq_stride;
        __m512 va = _mm512_set1_ps(a[t]), acc = _mm512_setzero_ps();
        for (int i = 0; i < nv; i++) {
            r[i] = _mm512_mul_ps(r[i], va);
            acc = _mm512_fmadd_ps(r[i], _mm512_loadu_ps(kt + 16 * i), acc);
        }
        float sk = _mm512_reduce_add_ps(acc);
        float u = beta[t * nvh] * (v[t * v_stride] - sk);
        __m512 vu = _mm512_set1_ps(u);
        acc = _mm512_setzero_ps();
        for (int i = 0; i < nv; i++) {
            r[i] = _mm512_fmadd_ps(vu, _mm512_loadu_ps(kt + 16 * i), r[i]);
            acc = _mm512_fmadd_ps(r[i], _mm512_loadu_ps(qt + 16 * i), acc);
        }
        out[t * out_stride] = _mm512_reduce_add_ps(acc);
    }
    for (int i = 0; i < nv; i++)
        _mm512_storeu_ps(s + 16 * i, r[i]);
}

static void avx512_gdn_row_tokens(int64_t n, float *s, int32_t n_tok, const float *a,
                                  const float *k, const float *q, int64_t kq_stride,
                                  const float *v, int64_t v_stride, const float *beta, int64_t nvh,
                                  float *out, int64_t out_stride)
{
    if (n == 128)
        gdn_row_tokens_regs(8, s, n_tok, a, k, q, kq_stride, v, v_stride, beta, nvh, out,
                            out_stride);
    else if (n == 64)
        gdn_row_tokens_regs(4, s, n_tok, a, k, q, kq_stride, v, v_stride, beta, nvh, out,
                            out_stride);
    else if (n == 256)
        gdn_row_tokens_regs(16, s, n_tok, a, k, q, kq_stride, v, v_stride, beta, nvh, out,
                            out_stride);
    else
        for (int32_t t = 0; t < n_tok; t++)
            out[t * out_stride] = avx512_gdn_row(n, s, a[t], k + t * kq_stride, q + t * kq_stride,
                                                 v[t * v_stride], beta[t * nvh]);
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

/* ---- products without reductions, exp, SiLU ------------------------------------- */

/* An MR x (16 NV) tile of c = a b: each step broadcasts MR values of a and loads NV
 * vectors of b's row t; the MR * NV accumulators stay in registers. MR and NV are
 * constants at every call, so the loops unroll. */
static inline __attribute__((always_inline)) void nn_tile(int64_t k, const float *a, int64_t lda,
                                                          const float *b, int64_t ldb, float *c,
                                                          int64_t ldc, int accumulate, int mr,
                                                          int nv, __mmask16 last)
{
    __m512 acc[4][4];
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? last : 0xFFFF;
            acc[i][v] = accumulate ? _mm512_maskz_loadu_ps(m, c + i * ldc + 16 * v)
                                   : _mm512_setzero_ps();
        }
    for (int64_t t = 0; t < k; t++) {
        __m512 vb[4];
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? last : 0xFFFF;
            vb[v] = _mm512_maskz_loadu_ps(m, b + t * ldb + 16 * v);
        }
        #pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            __m512 va = _mm512_set1_ps(a[i * lda + t]);
            #pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[i][v] = _mm512_fmadd_ps(va, vb[v], acc[i][v]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? last : 0xFFFF;
            _mm512_mask_storeu_ps(c + i * ldc + 16 * v, m, acc[i][v]);
        }
}

static void nn_tile_any(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *c, int64_t ldc, int accumulate, int mr, int nv, __mmask16 last)
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

static void avx512_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    for (int64_t j = 0; j < n; j += 64) {
        int64_t w = n - j < 64 ? n - j : 64;
        int nv = (int)((w + 15) / 16);
        __mmask16 last = w % 16 ? tail_mask(w % 16) : 0xFFFF;
        int64_t i = 0;
        if (nv == 4 && last == 0xFFFF)
            for (; i + 4 <= m; i += 4)
                nn_tile(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, accumulate, 4, 4,
                        0xFFFF);
        for (; i < m; i += 4) {
            int mr = m - i < 4 ? (int)(m - i) : 4;
            nn_tile_any(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, accumulate, mr, nv,
                        last);
        }
    }
}

static inline __m512 silu512(__m512 x)
{
    __m512 e = splash_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static void avx512_silu(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, silu512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, silu512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

static void avx512_conv_silu(int64_t n, int64_t nc, const float *x, int64_t x_stride,
                             const float *state, int64_t st_stride, const float *wc, int32_t kw,
                             float *out, int64_t out_stride)
{
    /* tap j of 16 channels, gathered from their rows of kw taps */
    const __m512i lanes = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(kw));
    __m512 w[16][4];
    /* groups of 64 channels, token-outer: a token's rows are read as whole lines, not
     * one line per row of a channel-outer walk (rows are often 4 KiB multiples apart) */
    for (int64_t c0 = 0; c0 < nc; c0 += 64) {
        int nv = (int)((nc - c0 < 64 ? nc - c0 : 64) + 15) / 16;
        __mmask16 m[4];
        for (int v = 0; v < nv; v++) {
            int64_t left = nc - c0 - 16 * v;
            m[v] = left >= 16 ? 0xFFFF : tail_mask(left);
            for (int32_t j = 0; j < kw; j++)
                w[j][v] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[v], lanes,
                                                   wc + (c0 + 16 * v) * kw + j, 4);
        }
        for (int64_t i = 0; i < n; i++) {
            __m512 s[4];
            for (int v = 0; v < nv; v++)
                s[v] = _mm512_setzero_ps();
            for (int32_t j = 0; j < kw; j++) {
                int64_t r = i + j - (kw - 1);
                const float *row =
                    (r >= 0 ? x + r * x_stride : state + (kw - 1 + r) * st_stride) + c0;
                /* a rounded product, then the sum, as the reference: the taps often
                 * cancel, and an FMA's single rounding moves the golden logits */
                for (int v = 0; v < nv; v++)
                    s[v] = _mm512_add_ps(
                        s[v], _mm512_mul_ps(w[j][v], _mm512_maskz_loadu_ps(m[v], row + 16 * v)));
            }
            for (int v = 0; v < nv; v++)
                _mm512_mask_storeu_ps(out + i * out_stride + c0 + 16 * v, m[v], silu512(s[v]));
        }
    }
}

static float avx512_exp_sum(int64_t n, const float *x, float m, float *y)
{
    __m512 vm = _mm512_set1_ps(m), acc = _mm512_setzero_ps();
    int64_t i = 0;
    const __m512 lo = _mm512_set1_ps(-87.0f);
    /* below e^-87 (and for -inf) exactly 0 */
    for (; i + 16 <= n; i += 16) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
        __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, lo, _CMP_GE_OQ), splash_exp512(d));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm);
        __m512 e = _mm512_maskz_mov_ps(k & _mm512_cmp_ps_mask(d, lo, _CMP_GE_OQ), splash_exp512(d));
        _mm512_mask_storeu_ps(y + i, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

/* ---- the f16 cache's attention: the scalar's bits (conversions round to nearest even,
 * as splash_fp32_to_fp16 does; the products are exact in float) ---- */

static void avx512_round_f16(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        y[i] = splash_fp16_to_fp32(splash_fp32_to_fp16(x[i]));
}

static double avx512_dot_f16(int64_t n, const float *a, const uint16_t *b)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 p = _mm512_mul_ps(_mm512_loadu_ps(a + i),
                                 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
    }
    double l[8], h[8];
    _mm512_storeu_pd(l, lo);
    _mm512_storeu_pd(h, hi);
    double s = (((l[0] + h[0]) + (l[1] + h[1])) + ((l[2] + h[2]) + (l[3] + h[3]))) +
               (((l[4] + h[4]) + (l[5] + h[5])) + ((l[6] + h[6]) + (l[7] + h[7])));
    for (; i < n; i++)
        s += (double)(a[i] * splash_fp16_to_fp32(b[i]));
    return s;
}

static void avx512_acc_f16(int64_t n, uint16_t *acc, const uint16_t *v, float ms, float vs)
{
    const __m512 m = _mm512_set1_ps(ms), w = _mm512_set1_ps(vs);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(acc + i)));
        if (ms != 1.0f)
            a = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(a, m), _MM_FROUND_TO_NEAREST_INT));
        a = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + i))), w, a);
        _mm256_storeu_si256((__m256i *)(acc + i), _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        float a = splash_fp16_to_fp32(acc[i]);
        if (ms != 1.0f)
            a = splash_fp16_to_fp32(splash_fp32_to_fp16(a * ms));
        acc[i] = splash_fp32_to_fp16(fmaf(splash_fp16_to_fp32(v[i]), vs, a));
    }
}

const struct kernel_vec kernel_vec_avx512 = {
    .isa = "avx512",
    .cpu_requires =
        SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512DQ |
        SPLASH_CPU_F16C,
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
    .gdn_row_tokens = avx512_gdn_row_tokens,
    .gemm_nt = avx512_gemm_nt,
    .gemm_nn = avx512_gemm_nn,
    .conv_silu = avx512_conv_silu,
    .silu = avx512_silu,
    .exp_sum = avx512_exp_sum,
    .round_f16 = avx512_round_f16,
    .dot_f16 = avx512_dot_f16,
    .acc_f16 = avx512_acc_f16,
};
