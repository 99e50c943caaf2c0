/* Codebooks of the i-quant formats (format data, see iq_grids.c) and the small
 * tables every i-quant file shares. */
#ifndef SPLASH_KQUANTS_IQ_GRIDS_H
#define SPLASH_KQUANTS_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t kq_iq2xxs_grid[256];
extern const uint64_t kq_iq2xs_grid[512];
extern const uint64_t kq_iq2s_grid[1024];
extern const uint32_t kq_iq3xxs_grid[256];
extern const uint32_t kq_iq3s_grid[512];
extern const uint64_t kq_iq1s_grid[2048];

/* IQ4_NL / IQ4_XS: the 16 non-linear levels a nibble selects (format data). */
static const int8_t kq_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                           1,    13,   25,  38,  53,  69,  89,  113};

/* IQ1_S / IQ1_M: the grid is shifted by +-1/8 of a step (format constant). */
#define KQ_IQ1_DELTA 0.125f

/* IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per 8 values; the 8th sign makes the
 * count of negative values even. Returns the 8 signs, bit j set = value j negative. */
static inline uint8_t kq_iq_signs8(uint32_t seven)
{
    seven &= 127u;
    return (uint8_t)(seven | (uint32_t)(__builtin_parity(seven) << 7));
}

#endif
