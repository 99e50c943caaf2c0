/* AVX2 + FMA rows of the MoE FFN's element-wise work (reference: moe_math.c). */
#include <immintrin.h>
#include <math.h>

#include "families/qwen_moe/moe.h"
#include "splash/vec_exp.h"

void moe_swiglu_avx2(const float *g, const float *u, int64_t in_stride, float *h, int64_t rows,
                     int64_t n);
void moe_combine_avx2(float *out, const float *sh, float s, const float *y, const float *w,
                      int32_t k, int64_t n);

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
            __m256 e = splash_exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
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
