/* Decoders of IQ2_XXS and IQ3_XXS blocks into struct kq_dec256 (an AVX-512 row with
 * vpdpbusd on top of them measured no faster: decoding dominates). Included only by
 * *_avx2.c and *_avx512.c files. */
#ifndef SPLASH_KQUANTS_IQ_DECODE_H
#define SPLASH_KQUANTS_IQ_DECODE_H

#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Four 7-bit sign groups (with their parity bits) as 32 sign bits. */
static inline uint32_t kq_iq_parity_signs(uint32_t aux)
{
    return kq_iq_signs8(aux) | (uint32_t)kq_iq_signs8(aux >> 7) << 8 |
           (uint32_t)kq_iq_signs8(aux >> 14) << 16 | (uint32_t)kq_iq_signs8(aux >> 21) << 24;
}

static inline void kq_iq2xxs_decode(const struct iq2_xxs_block *x, struct kq_dec256 *dec)
{
    for (int ib = 0; ib < 8; ib++) {
        uint32_t idx = kq_load_u32(x->qs + 4 * ib), aux = kq_load_u32(x->qs + 4 * ib + 2);
        __m256i g = _mm256_set_epi64x(
            (long long)kq_iq2xxs_grid[idx >> 24], (long long)kq_iq2xxs_grid[(idx >> 16) & 0xff],
            (long long)kq_iq2xxs_grid[(idx >> 8) & 0xff], (long long)kq_iq2xxs_grid[idx & 0xff]);
        _mm256_store_si256((__m256i *)(dec->mag + 32 * ib), g);
        _mm256_store_si256((__m256i *)(dec->sgn + 32 * ib),
                           kq_bits_to_sign(kq_iq_parity_signs(aux)));
        dec->ls[2 * ib] = dec->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
    }
}

static inline void kq_iq3xxs_decode(const struct iq3_xxs_block *x, struct kq_dec256 *dec)
{
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = x->qs + 8 * ib;
        uint32_t aux = kq_load_u32(x->qs + SPLASH_QK_K / 4 + 4 * ib);
        __m256i g = _mm256_setr_epi32(
            (int)kq_iq3xxs_grid[q[0]], (int)kq_iq3xxs_grid[q[1]], (int)kq_iq3xxs_grid[q[2]],
            (int)kq_iq3xxs_grid[q[3]], (int)kq_iq3xxs_grid[q[4]], (int)kq_iq3xxs_grid[q[5]],
            (int)kq_iq3xxs_grid[q[6]], (int)kq_iq3xxs_grid[q[7]]);
        _mm256_store_si256((__m256i *)(dec->mag + 32 * ib), g);
        _mm256_store_si256((__m256i *)(dec->sgn + 32 * ib),
                           kq_bits_to_sign(kq_iq_parity_signs(aux)));
        dec->ls[2 * ib] = dec->ls[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
    }
}

#endif
