/* AVX-512 rows of the trunk's element-wise gates (reference: hybrid_act.c). */
#include <immintrin.h>

#include "families/common/hybrid.h"

/* e^x: x = m ln2 + r with |r| <= ln2 / 2 (ln2 split in two), e^r by its Taylor series
 * to r^7 (the next term is below 2^-24 relative), times 2^m by scalef. */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(89.0f)), _mm512_set1_ps(-104.0f));
    __m512 m = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(m, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(m, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, m);
}

/* 1 / (1 + e^-g) */
static inline __m512 sigmoid512(__m512 g)
{
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static void avx512_silu_mul(int64_t n, const float *x, const float *g, float *out)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_loadu_ps(g + i);
        _mm512_storeu_ps(out + i,
                         _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_mul_ps(gv, sigmoid512(gv))));
    }
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
        __m512 silu = _mm512_mul_ps(gv, sigmoid512(gv));
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), silu));
    }
}

static void avx512_sigmoid_mul(int64_t n, const float *x, const float *g, float *out)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(x + i),
                                                sigmoid512(_mm512_loadu_ps(g + i))));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(out + i, k,
                              _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i),
                                            sigmoid512(_mm512_maskz_loadu_ps(k, g + i))));
    }
}

const struct hybrid_act hybrid_act_avx512 = {
    .isa = "avx512",
    .silu_mul = avx512_silu_mul,
    .sigmoid_mul = avx512_sigmoid_mul,
};
