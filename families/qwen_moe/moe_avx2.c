/* AVX2 + FMA rows of the MoE FFN's element-wise work (reference: moe_math.c). */
#include <immintrin.h>
#include <math.h>

#include "families/qwen_moe/moe.h"

void moe_swiglu_avx2(const float *g, const float *u, int64_t in_stride, float *h, int64_t rows,
                     int64_t n);
void moe_combine_avx2(float *out, const float *sh, float s, const float *y, const float *w,
                      int32_t k, int64_t n);

/* exp(x) to about 1 ulp over the float range: x = m ln2 + r with |r| <= ln2 / 2
 * (ln2 split in two for an exact product), e^r by its Taylor series to r^7 (the
 * next term is below 2^-24 relative there), times 2^m built in the exponent bits. */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 m = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(m, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(m, _mm256_set1_ps(1.4286068202862268e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(m), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void moe_swiglu_avx2(const float *g, const float *u, int64_t in_stride, float *h, int64_t rows,
                     int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * in_stride, *ur = u + r * in_stride;
        float *hr = h + r * n;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 gv = _mm256_loadu_ps(gr + i);
            __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
            __m256 silu = _mm256_div_ps(gv, _mm256_add_ps(one, e));
            _mm256_storeu_ps(hr + i, _mm256_mul_ps(silu, _mm256_loadu_ps(ur + i)));
        }
        for (; i < n; i++)
            hr[i] = gr[i] / (1.0f + expf(-gr[i])) * ur[i];
    }
}

void moe_combine_avx2(float *out, const float *sh, float s, const float *y, const float *w,
                      int32_t k, int64_t n)
{
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_mul_ps(_mm256_set1_ps(w[0]), _mm256_loadu_ps(y + i));
        for (int32_t j = 1; j < k; j++)
            acc =
                _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(y + (int64_t)j * n + i), acc);
        if (sh)
            acc = _mm256_fmadd_ps(vs, _mm256_loadu_ps(sh + i), acc);
        _mm256_storeu_ps(out + i, acc);
    }
    for (; i < n; i++) {
        float acc = w[0] * y[i];
        for (int32_t j = 1; j < k; j++)
            acc += w[j] * y[(int64_t)j * n + i];
        out[i] = sh ? acc + s * sh[i] : acc;
    }
}
