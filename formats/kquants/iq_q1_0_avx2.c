/* AVX2 row of Q1_0 against Q8_0 activations: the sign bits become a +-1 sign carrier,
 * four 32-value integer sums per block, then the reference's float steps in order. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_simd.h"

static inline void q1_0_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct q1_0_block *x = wb;
    __m256i sg[4];
    for (int k = 0; k < 4; k++) /* set bit = +1: a clear bit gives the -1 */
        sg[k] = _mm256_or_si256(
            _mm256_xor_si256(kq_bits_to_mask(kq_load_u32(x->qs + 4 * k)), _mm256_set1_epi8(-1)),
            _mm256_set1_epi8(1));
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const float xd = _cvtsh_ss(x->d);
    for (int r = 0; r < nr; r++) {
        const struct splash_q8_0_block *y = (const struct splash_q8_0_block *)ab[r];
        __m256i p[4];
        for (int k = 0; k < 4; k++) {
            __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[k].qs), sg[k]);
            p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16);
        }
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        int32_t sums[4];
        _mm_storeu_si128((__m128i *)sums,
                         _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
        float sumi = 0.0f;
        for (int k = 0; k < 4; k++)
            sumi += _cvtsh_ss(y[k].d) * (float)sums[k];
        sumf[r] += xd * sumi;
    }
}

KQ_IQ_DEFINE_ROWS(q1_0, q80, avx2, KQ_QK1_0, sizeof(struct q1_0_block),
                  4 * sizeof(struct splash_q8_0_block), q1_0_block, kq_finish_id)
