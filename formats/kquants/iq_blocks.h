/* Block layouts of the i-quant formats and Q1_0 (GGUF type ids in the comments).
 * Every multi-byte field is little-endian; the structs match the file bytes on the
 * little-endian hosts Splash runs on, which the _Static_asserts pin. */
#ifndef SPLASH_KQUANTS_IQ_BLOCKS_H
#define SPLASH_KQUANTS_IQ_BLOCKS_H

#include <stdint.h>

#include "splash/act.h"

#define KQ_QK4_NL 32
#define KQ_QK1_0 128

/* IQ2_XXS (16): per 32 values two u32: four 8-bit grid indices, then four 7-bit sign
 * groups and a 4-bit scale in the top bits. 2.0625 bpw. */
struct iq2_xxs_block {
    uint16_t d; /* fp16 */
    uint16_t qs[SPLASH_QK_K / 8];
};
_Static_assert(sizeof(struct iq2_xxs_block) == 66, "iq2_xxs block is 66 bytes");

/* IQ2_XS (17): per 8 values a u16: 9-bit grid index, 7 sign bits; a 4-bit scale per 16. */
struct iq2_xs_block {
    uint16_t d;
    uint16_t qs[SPLASH_QK_K / 8];
    uint8_t scales[SPLASH_QK_K / 32];
};
_Static_assert(sizeof(struct iq2_xs_block) == 74, "iq2_xs block is 74 bytes");

/* IQ2_S (22): qs holds 32 low index bytes then 32 sign bytes; qh the 2 high index bits. */
struct iq2_s_block {
    uint16_t d;
    uint8_t qs[SPLASH_QK_K / 4];
    uint8_t qh[SPLASH_QK_K / 32];
    uint8_t scales[SPLASH_QK_K / 32];
};
_Static_assert(sizeof(struct iq2_s_block) == 82, "iq2_s block is 82 bytes");

/* IQ3_XXS (18): 64 grid index bytes (4 values each), then per 32 values a u32 of four
 * 7-bit sign groups and a 4-bit scale. */
struct iq3_xxs_block {
    uint16_t d;
    uint8_t qs[3 * SPLASH_QK_K / 8];
};
_Static_assert(sizeof(struct iq3_xxs_block) == 98, "iq3_xxs block is 98 bytes");

/* IQ3_S (21): 9-bit indices (qs + one qh bit), explicit sign bits, a 4-bit scale per 32. */
struct iq3_s_block {
    uint16_t d;
    uint8_t qs[SPLASH_QK_K / 4];
    uint8_t qh[SPLASH_QK_K / 32];
    uint8_t signs[SPLASH_QK_K / 8];
    uint8_t scales[SPLASH_QK_K / 64];
};
_Static_assert(sizeof(struct iq3_s_block) == 110, "iq3_s block is 110 bytes");

/* IQ1_S (19): per 32 values a u16 qh: four 3-bit index highs, a 3-bit scale, delta sign. */
struct iq1_s_block {
    uint16_t d;
    uint8_t qs[SPLASH_QK_K / 8];
    uint16_t qh[SPLASH_QK_K / 32];
};
_Static_assert(sizeof(struct iq1_s_block) == 50, "iq1_s block is 50 bytes");

/* IQ1_M (29): no d field: the fp16 block scale is spread over the top nibbles of the
 * four u16 words of `scales`, whose other bits are 3-bit scales per 16 values. */
struct iq1_m_block {
    uint8_t qs[SPLASH_QK_K / 8];
    uint8_t qh[SPLASH_QK_K / 16];
    uint8_t scales[SPLASH_QK_K / 32];
};
_Static_assert(sizeof(struct iq1_m_block) == 56, "iq1_m block is 56 bytes");

/* IQ4_NL (20): Q4_0's layout with non-linear levels. */
struct iq4_nl_block {
    uint16_t d;
    uint8_t qs[KQ_QK4_NL / 2];
};
_Static_assert(sizeof(struct iq4_nl_block) == 18, "iq4_nl block is 18 bytes");

/* IQ4_XS (23): eight IQ4_NL sub-blocks sharing d, with 6-bit signed sub-scales (+32). */
struct iq4_xs_block {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[SPLASH_QK_K / 64];
    uint8_t qs[SPLASH_QK_K / 2];
};
_Static_assert(sizeof(struct iq4_xs_block) == 136, "iq4_xs block is 136 bytes");

/* Q1_0 (41): one sign bit per value (set = +d, clear = -d), LSB first. */
struct q1_0_block {
    uint16_t d;
    uint8_t qs[KQ_QK1_0 / 8];
};
_Static_assert(sizeof(struct q1_0_block) == 18, "q1_0 block is 18 bytes");

/* IQ1_M: the fp16 block scale bits gathered from the scale words. */
static inline uint16_t kq_iq1m_scale_bits(const struct iq1_m_block *b)
{
    uint16_t sc[4];
    for (int i = 0; i < 4; i++)
        sc[i] = (uint16_t)(b->scales[2 * i] | (b->scales[2 * i + 1] << 8));
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                      (sc[3] & 0xf000));
}

#endif
