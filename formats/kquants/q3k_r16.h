/* Q3_K_R16: Q3_K rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 110 = 1760 bytes (the plain
 * rows' bytes exactly, so 3.4375 bits per weight):
 *
 *   qs      [8 pairs][3][64]  1536 bytes, the levels u = q + 4 (0..7)
 *   lo      [2][64]           low 4 bits of the 6-bit scale fields t (scale t - 32)
 *   hi      [64]              their top 2 bits
 *   d       [16 rows] fp16, as in Q3_K
 *
 * Pair p covers sub-blocks A = 2p and B = 2p + 1 (values 32p .. 32p + 31 of every row).
 * Byte 4r + c of vector S_k (k < 3) holds row r's level of value 32p + 4k + c in bits
 * 2..4 and of value 32p + 16 + 4k + c in bits 5..7, so S_k & 0x1C is 4u of quad k of A
 * and S_k & 0xE0 is 32u of quad k of B for all 16 rows: one vpdpbusd against 4
 * broadcast activations gives 16 rows' partial sums of 4 inputs. Bits 0..1 of S_0, S_1,
 * S_2 hold the fourth quads' levels, read as the 6-bit number S_0 | S_1 << 2 | S_2 << 4
 * (bits 0..1 of each): its bits 0..2 are u of value 32p + 12 + c, bits 3..5 u of value
 * 32p + 28 + c.
 *
 * Scale field t of sub-block s of row r: byte 16 (s % 4) + r of lo[s / 8] has its low 4
 * bits in the low (s % 8 < 4) or high nibble, and bits 2 (s / 4), 2 (s / 4) + 1 of
 * hi[16 (s % 4) + r] its top 2 bits. Rows after the last whole group keep the plain
 * Q3_K layout. */
#ifndef SPLASH_KQUANTS_Q3K_R16_H
#define SPLASH_KQUANTS_Q3K_R16_H

#include <stdint.h>

#include "formats/kquants/kq_common.h"

#define Q3K_R16_ROWS 16
#define Q3K_R16_QS 0                       /* offset of qs */
#define Q3K_R16_LO (8 * 192)               /* offset of the scales' low nibbles */
#define Q3K_R16_HI (Q3K_R16_LO + 128)      /* offset of their top bits */
#define Q3K_R16_D (Q3K_R16_HI + 64)        /* offset of the d's */
#define Q3K_R16_BYTES (Q3K_R16_D + 16 * 2)

_Static_assert(Q3K_R16_BYTES == Q3K_R16_ROWS * sizeof(struct q3_k_block),
               "a Q3_K_R16 block takes exactly the bytes of 16 Q3_K blocks");

/* Level u = q + 4 (0..7) of value j of row r of a Q3_K_R16 block. */
static inline int q3k_r16_level(const uint8_t *blk, int r, int j)
{
    const uint8_t *q = blk + Q3K_R16_QS + 192 * (j / 32) + 4 * r + j % 4;
    const int k = j % 16 / 4, b = j % 32 / 16;
    if (k < 3)
        return (q[64 * k] >> (2 + 3 * b)) & 7;
    const int x = (q[0] & 3) | (q[64] & 3) << 2 | (q[128] & 3) << 4;
    return (x >> (3 * b)) & 7;
}

/* Scale field t (0..63, the scale is t - 32) of sub-block s of row r. */
static inline int q3k_r16_field(const uint8_t *blk, int r, int s)
{
    const int at = 16 * (s % 4) + r;
    const int lo = (blk[Q3K_R16_LO + 64 * (s / 8) + at] >> (4 * (s % 8 / 4))) & 0xF;
    const int hi = (blk[Q3K_R16_HI + at] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

/* Writes n_rows Q3_K rows of n elements (contiguous at src) as a Q3_K_R16 image at dst. */
void q3k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

#endif
