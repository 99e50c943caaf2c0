/* AVX-512 rows of the trunk's element-wise gates (reference: hybrid_act.c). */
#include <immintrin.h>

#include "families/common/hybrid.h"
#include "splash/vec_exp.h"

/* 1 / (1 + e^-g) */
static inline __m512 sigmoid512(__m512 g)
{
    __m512 e = splash_exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
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
