/* AVX2 + FMA rows of the trunk's element-wise gates (reference: hybrid_act.c). */
#include <immintrin.h>
#include <math.h>

#include "families/common/hybrid.h"

/* e^x as in the AVX-512 row, 2^m built in the exponent bits. */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 m = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(m, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(m, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(m), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 sigmoid256(__m256 g)
{
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static void avx2_silu_mul(int64_t n, const float *x, const float *g, float *out)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        _mm256_storeu_ps(out + i,
                         _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_mul_ps(gv, sigmoid256(gv))));
    }
    for (; i < n; i++)
        out[i] = x[i] * (g[i] / (1.0f + expf(-g[i])));
}

static void avx2_sigmoid_mul(int64_t n, const float *x, const float *g, float *out)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i),
                                                sigmoid256(_mm256_loadu_ps(g + i))));
    for (; i < n; i++)
        out[i] = x[i] * (1.0f / (1.0f + expf(-g[i])));
}

const struct hybrid_act hybrid_act_avx2 = {
    .isa = "avx2",
    .silu_mul = avx2_silu_mul,
    .sigmoid_mul = avx2_sigmoid_mul,
};
