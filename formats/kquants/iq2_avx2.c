/* AVX2 rows of IQ2_XXS, IQ2_XS and IQ2_S against Q8_K activations. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_decode.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"

static inline void iq2_store32(struct kq_dec256 *dec, int ib, __m256i mag, uint32_t s4)
{
    _mm256_store_si256((__m256i *)(dec->mag + 32 * ib), mag);
    _mm256_store_si256((__m256i *)(dec->sgn + 32 * ib), kq_bits_to_sign(s4));
}

/* (x_d * y_d) * bsum per activation row, as the reference accumulates. */
static inline void iq2_accumulate(const struct kq_dec256 *dec, uint16_t d,
                                  const uint8_t *const ab[], int nr, float sumf[])
{
    const float xd = _cvtsh_ss(d);
    for (int r = 0; r < nr; r++) {
        const struct splash_q8_k_block *y = (const struct splash_q8_k_block *)ab[r];
        sumf[r] += xd * y->d * (float)kq_dec_dot_scaled(dec, y->qs);
    }
}

static inline void iq2xxs_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq2_xxs_block *x = wb;
    struct kq_dec256 dec;
    kq_iq2xxs_decode(x, &dec);
    iq2_accumulate(&dec, x->d, ab, nr, sumf);
}

static inline void iq2xs_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq2_xs_block *x = wb;
    struct kq_dec256 dec;
    for (int ib = 0; ib < 8; ib++) {
        const uint16_t *q = x->qs + 4 * ib;
        __m256i g = _mm256_set_epi64x(
            (long long)kq_iq2xs_grid[q[3] & 511], (long long)kq_iq2xs_grid[q[2] & 511],
            (long long)kq_iq2xs_grid[q[1] & 511], (long long)kq_iq2xs_grid[q[0] & 511]);
        uint32_t s4 = kq_iq_signs8(q[0] >> 9) | (uint32_t)kq_iq_signs8(q[1] >> 9) << 8 |
                      (uint32_t)kq_iq_signs8(q[2] >> 9) << 16 |
                      (uint32_t)kq_iq_signs8(q[3] >> 9) << 24;
        iq2_store32(&dec, ib, g, s4);
        dec.ls[2 * ib] = (int16_t)(2 * (x->scales[ib] & 0xf) + 1);
        dec.ls[2 * ib + 1] = (int16_t)(2 * (x->scales[ib] >> 4) + 1);
    }
    iq2_accumulate(&dec, x->d, ab, nr, sumf);
}

static inline void iq2s_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq2_s_block *x = wb;
    struct kq_dec256 dec;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = x->qs + 4 * ib;
        uint32_t qh = x->qh[ib];
        __m256i g = _mm256_set_epi64x((long long)kq_iq2s_grid[qs[3] | ((qh << 2) & 0x300)],
                                      (long long)kq_iq2s_grid[qs[2] | ((qh << 4) & 0x300)],
                                      (long long)kq_iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                                      (long long)kq_iq2s_grid[qs[0] | ((qh << 8) & 0x300)]);
        iq2_store32(&dec, ib, g, kq_load_u32(x->qs + SPLASH_QK_K / 8 + 4 * ib));
        dec.ls[2 * ib] = (int16_t)(2 * (x->scales[ib] & 0xf) + 1);
        dec.ls[2 * ib + 1] = (int16_t)(2 * (x->scales[ib] >> 4) + 1);
    }
    iq2_accumulate(&dec, x->d, ab, nr, sumf);
}

KQ_IQ_DEFINE_ROWS(iq2xxs, q8k, avx2, SPLASH_QK_K, sizeof(struct iq2_xxs_block),
                  sizeof(struct splash_q8_k_block), iq2xxs_block, kq_finish_eighth)
KQ_IQ_DEFINE_ROWS(iq2xs, q8k, avx2, SPLASH_QK_K, sizeof(struct iq2_xs_block),
                  sizeof(struct splash_q8_k_block), iq2xs_block, kq_finish_eighth)
KQ_IQ_DEFINE_ROWS(iq2s, q8k, avx2, SPLASH_QK_K, sizeof(struct iq2_s_block),
                  sizeof(struct splash_q8_k_block), iq2s_block, kq_finish_eighth)
