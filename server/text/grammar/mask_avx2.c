/* Applying a token mask to logits, eight at a time (AVX2). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "server/text/grammar/mask_impl.h"

/* logits[0 .. 32 * n_words): -inf where the mask's bit is clear */
void gram_mask_apply_avx2(const uint32_t *mask, float *logits, size_t n_words)
{
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (size_t w = 0; w < n_words; w++) {
        uint32_t bits = mask[w];
        if (bits == UINT32_MAX)
            continue;
        float *p = logits + 32 * w;
        for (int k = 0; k < 4; k++) {
            __m256i b = _mm256_set1_epi32((int)((bits >> (8 * k)) & 0xffu));
            __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(b, lane_bit), lane_bit);
            __m256 x = _mm256_loadu_ps(p + 8 * k);
            _mm256_storeu_ps(p + 8 * k, _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(on)));
        }
    }
}
