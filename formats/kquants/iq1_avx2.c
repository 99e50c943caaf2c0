/* AVX2 rows of IQ1_S and IQ1_M against Q8_K activations. A weight is decoded as the
 * integer 8 * grid + delta_sign, so one integer sum I per block carries both terms of
 * the reference (sumi + sumi1 / 8 == I / 8, exact in float for these magnitudes). */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"

/* 8 * g + delta for 32 grid values g in {-1, 0, 1}. */
static inline void iq1_store32(struct kq_dec256 *dec, int ib, __m256i g, __m256i delta)
{
    __m256i q = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
    _mm256_store_si256((__m256i *)(dec->mag + 32 * ib), _mm256_abs_epi8(q));
    _mm256_store_si256((__m256i *)(dec->sgn + 32 * ib), q);
}

static inline void iq1_accumulate(const struct kq_dec256 *dec, uint16_t d,
                                  const uint8_t *const ab[], int nr, float sumf[])
{
    const float xd = _cvtsh_ss(d);
    for (int r = 0; r < nr; r++) {
        const struct splash_q8_k_block *y = (const struct splash_q8_k_block *)ab[r];
        sumf[r] += xd * y->d * (KQ_IQ1_DELTA * (float)kq_dec_dot_scaled(dec, y->qs));
    }
}

static inline void iq1s_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq1_s_block *x = wb;
    struct kq_dec256 dec;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = x->qs + 4 * ib;
        uint32_t qh = x->qh[ib];
        __m256i g = _mm256_set_epi64x((long long)kq_iq1s_grid[qs[3] | ((qh >> 9) & 7) << 8],
                                      (long long)kq_iq1s_grid[qs[2] | ((qh >> 6) & 7) << 8],
                                      (long long)kq_iq1s_grid[qs[1] | ((qh >> 3) & 7) << 8],
                                      (long long)kq_iq1s_grid[qs[0] | (qh & 7) << 8]);
        iq1_store32(&dec, ib, g, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1));
        dec.ls[2 * ib] = dec.ls[2 * ib + 1] = (int16_t)(2 * ((qh >> 12) & 7) + 1);
    }
    iq1_accumulate(&dec, x->d, ab, nr, sumf);
}

static inline void iq1m_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq1_m_block *x = wb;
    struct kq_dec256 dec;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = x->qs + 4 * ib;
        uint32_t h0 = x->qh[2 * ib], h1 = x->qh[2 * ib + 1];
        __m256i g = _mm256_set_epi64x((long long)kq_iq1s_grid[qs[3] | (h1 & 0x70) << 4],
                                      (long long)kq_iq1s_grid[qs[2] | (h1 & 0x07) << 8],
                                      (long long)kq_iq1s_grid[qs[1] | (h0 & 0x70) << 4],
                                      (long long)kq_iq1s_grid[qs[0] | (h0 & 0x07) << 8]);
        __m256i delta = _mm256_set_epi64x(h1 & 0x80 ? -1 : 0x0101010101010101ll,
                                          h1 & 0x08 ? -1 : 0x0101010101010101ll,
                                          h0 & 0x80 ? -1 : 0x0101010101010101ll,
                                          h0 & 0x08 ? -1 : 0x0101010101010101ll);
        iq1_store32(&dec, ib, g, delta);
        uint32_t sc = x->scales[2 * (ib / 2)] | (uint32_t)x->scales[2 * (ib / 2) + 1] << 8;
        sc >>= 6 * (ib % 2);
        dec.ls[2 * ib] = (int16_t)(2 * (sc & 7) + 1);
        dec.ls[2 * ib + 1] = (int16_t)(2 * ((sc >> 3) & 7) + 1);
    }
    iq1_accumulate(&dec, kq_iq1m_scale_bits(x), ab, nr, sumf);
}

KQ_IQ_DEFINE_ROWS(iq1s, q8k, avx2, SPLASH_QK_K, sizeof(struct iq1_s_block),
                  sizeof(struct splash_q8_k_block), iq1s_block, kq_finish_id)
KQ_IQ_DEFINE_ROWS(iq1m, q8k, avx2, SPLASH_QK_K, sizeof(struct iq1_m_block),
                  sizeof(struct splash_q8_k_block), iq1m_block, kq_finish_id)
