/* AVX2 + FMA rows of the trunk's element-wise gates (reference: hybrid_act.c). */
#include <immintrin.h>
#include <math.h>

#include "families/common/hybrid.h"
#include "splash/vec_exp.h"

static inline __m256 sigmoid256(__m256 g)
{
    __m256 e = splash_exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
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
