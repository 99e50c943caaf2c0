/* Q6_K_R16: Q6_K rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 210 = 3360 bytes (the plain
 * rows' bytes exactly, so 6.5625 bits per weight):
 *
 *   qs      [16 sub-blocks][3][64]  3072 bytes
 *   scales  [16 sub-blocks][16 rows] int8, as in Q6_K
 *   d       [16 rows] fp16, as in Q6_K
 *
 * Sub-block s (values 16s .. 16s + 15 of every row) is three 64-byte vectors S0, S1, S2.
 * Byte 4r + t of S_k (k < 3) holds row r's level u = q + 32 (0..63) of value 16s + 4k + t
 * in bits 2..7 and, in bits 0..1, bits 2k, 2k + 1 of the level of value 16s + 12 + t. So
 * S_k & 0xFC is 4u of quad k for all 16 rows, and the fourth quad's 4u gathers the three
 * low bit pairs: one vpdpbusd of such a vector against 4 broadcast activations gives the
 * 16 rows' partial sums of 4 consecutive inputs, times 4. Rows after the last whole group
 * keep the plain Q6_K layout. */
#ifndef SPLASH_KQUANTS_Q6K_R16_H
#define SPLASH_KQUANTS_Q6K_R16_H

#include <stdint.h>

#include "formats/kquants/kq_common.h"

#define Q6K_R16_ROWS 16
#define Q6K_R16_QS 0                          /* offset of qs */
#define Q6K_R16_SCALES (16 * 192)             /* offset of the scales */
#define Q6K_R16_D (Q6K_R16_SCALES + 16 * 16)  /* offset of the d's */
#define Q6K_R16_BYTES (Q6K_R16_D + 16 * 2)

_Static_assert(Q6K_R16_BYTES == Q6K_R16_ROWS * sizeof(struct q6_k_block),
               "a Q6_K_R16 block takes exactly the bytes of 16 Q6_K blocks");

/* Level u (0..63) of value j of row r of a Q6_K_R16 block. */
static inline int q6k_r16_level(const uint8_t *blk, int r, int j)
{
    const uint8_t *q = blk + Q6K_R16_QS + 192 * (j / 16) + 4 * r + j % 4;
    const int k = j % 16 / 4;
    if (k < 3)
        return q[64 * k] >> 2;
    return (q[0] & 3) | (q[64] & 3) << 2 | (q[128] & 3) << 4;
}

#endif
