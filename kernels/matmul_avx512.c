/* AVX-512 activation quantizers for the matrix products (kernels/matmul.c): the same
 * bytes as the activation format's reference from_float, faster. */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_act.h"

/* Q8_K (GGUF type 15): per 256 values, d = max / -127 where max is the first value of
 * largest magnitude, qs = min(127, round_even(x * (-127 / max))), bsums = sums of 16 qs. */
void splash_act_q8k_avx512(const float *x, void *blocks, int64_t n)
{
    unsigned char *b = blocks;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256, b += MATMUL_Q8K_BYTES) {
        __m512 v[16], amax = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) {
            v[k] = _mm512_loadu_ps(x + 16 * k);
            amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, v[k]));
        }
        float am = _mm512_reduce_max_ps(amax);
        if (!(am > 0.0f)) {
            memset(b, 0, MATMUL_Q8K_BYTES);
            continue;
        }
        /* the first value whose magnitude is the largest, with its sign */
        float max = 0.0f;
        const __m512 vam = _mm512_set1_ps(am);
        for (int k = 0; k < 16; k++) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, v[k]), vam, _CMP_EQ_OQ);
            if (hit) {
                max = x[16 * k + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        const __m512i top = _mm512_set1_epi32(127);
        int16_t bsums[16];
        for (int k = 0; k < 16; k++) {
            __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[k], vs)), top);
            _mm_storeu_si128((__m128i *)(b + 4 + 16 * k), _mm512_cvtsepi32_epi8(q));
            bsums[k] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        float d = 1.0f / iscale;
        memcpy(b, &d, sizeof d);
        memcpy(b + 4 + 256, bsums, sizeof bsums);
    }
}
