/* The block attention's inner loops with AVX2 and FMA: a KV head's queries against one
 * key, and one value into their accumulators. */
#if defined(__x86_64__)
#include <immintrin.h>

#include "families/drafts/dflash2/dflash2.h"

static void dots_avx2(const float *q, int n, const float *k, float *out)
{
    for (int g = 0; g < n; g++) {
        const float *qg = q + g * DFLASH2_HEAD_DIM;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int d = 0; d < DFLASH2_HEAD_DIM; d += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d), _mm256_loadu_ps(k + d), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d + 8), _mm256_loadu_ps(k + d + 8), a1);
        }
        __m256 a = _mm256_add_ps(a0, a1);
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        out[g] = _mm_cvtss_f32(s);
    }
}

static void axpy_avx2(const float *p, int n, const float *v, float *acc)
{
    for (int d = 0; d < DFLASH2_HEAD_DIM; d += 8) {
        const __m256 vv = _mm256_loadu_ps(v + d);
        for (int g = 0; g < n; g++) {
            float *a = acc + g * DFLASH2_HEAD_DIM + d;
            _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_set1_ps(p[g]), vv, _mm256_loadu_ps(a)));
        }
    }
}

const struct dflash2_attn_ops dflash2_attn_avx2 = {
    .isa = "avx2", .dots = dots_avx2, .axpy = axpy_avx2};
#endif
