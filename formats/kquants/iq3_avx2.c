/* AVX2 rows of IQ3_XXS and IQ3_S against Q8_K activations. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_decode.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"

static inline void iq3_accumulate(const struct kq_dec256 *dec, uint16_t d,
                                  const uint8_t *const ab[], int nr, float sumf[])
{
    const float xd = _cvtsh_ss(d);
    for (int r = 0; r < nr; r++) {
        const struct splash_q8_k_block *y = (const struct splash_q8_k_block *)ab[r];
        sumf[r] += xd * y->d * (float)kq_dec_dot_scaled(dec, y->qs);
    }
}

static inline void iq3xxs_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq3_xxs_block *x = wb;
    struct kq_dec256 dec;
    kq_iq3xxs_decode(x, &dec);
    iq3_accumulate(&dec, x->d, ab, nr, sumf);
}

static inline void iq3s_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq3_s_block *x = wb;
    struct kq_dec256 dec;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        uint32_t qh = x->qh[ib];
        int32_t g[8];
        for (int k = 0; k < 8; k++)
            g[k] = (int32_t)kq_iq3s_grid[q[k] | ((qh << (8 - k)) & 256)];
        _mm256_store_si256((__m256i *)(dec.mag + 32 * ib),
                           _mm256_loadu_si256((const __m256i *)g));
        _mm256_store_si256((__m256i *)(dec.sgn + 32 * ib),
                           kq_bits_to_sign(kq_load_u32(x->signs + 4 * ib)));
        dec.ls[2 * ib] = dec.ls[2 * ib + 1] =
            (int16_t)(2 * ((x->scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1);
    }
    iq3_accumulate(&dec, x->d, ab, nr, sumf);
}

KQ_IQ_DEFINE_ROWS(iq3xxs, q8k, avx2, SPLASH_QK_K, sizeof(struct iq3_xxs_block),
                  sizeof(struct splash_q8_k_block), iq3xxs_block, kq_finish_quarter)
KQ_IQ_DEFINE_ROWS(iq3s, q8k, avx2, SPLASH_QK_K, sizeof(struct iq3_s_block),
                  sizeof(struct splash_q8_k_block), iq3s_block, kq_finish_id)
