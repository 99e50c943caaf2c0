/* Q4_0_R16: Q4_0 rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 18 = 288 bytes (the plain rows' bytes
 * exactly, so 4.5 bits per weight):
 *
 *   d   [16 rows]            the rows' fp16 scales (one vcvtph2ps decodes all 16)
 *   qs  [4][4 x 16 rows]     qs[k][4r + c] = qs[4k + c] of row r
 *
 * so 32-bit lane r of the 64-byte vector qs[k] is row r's code bytes 4k .. 4k + 3: their
 * low nibbles are values 4k .. 4k + 3 and their high nibbles values 16 + 4k .. 16 + 4k + 3
 * (the plain nibble order). The nibbles q (0..15) are the unsigned operand of vpdpbusd
 * as they are; one vpdpbusd against 4 broadcast activations gives the 16 rows' partial
 * sums of 4 consecutive inputs in 16 int32 lanes, and -8 * sum(a) takes the offset back.
 * Rows after the last whole group keep the plain Q4_0 layout.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * block, so they give the same bits: the block's exact integer dot isum = sum (q - 8) a,
 * its scale s = d_w * d_act (one rounding), then acc = fma(isum, s, acc). */
#ifndef SPLASH_KQUANTS_Q40_R16_H
#define SPLASH_KQUANTS_Q40_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/kq_common.h"
#include "splash/format.h"

#define Q40_R16_ROWS 16

struct q40_r16_block {
    uint16_t d[Q40_R16_ROWS];
    uint8_t qs[4][4 * Q40_R16_ROWS];
};
_Static_assert(sizeof(struct q40_r16_block) == Q40_R16_ROWS * sizeof(struct q4_0_block),
               "a Q4_0_R16 block takes exactly the bytes of 16 Q4_0 blocks");

/* Row r's plain Q4_0 block of a Q4_0_R16 block (the repack's inverse). */
static inline void q40_r16_unpack_row(const struct q40_r16_block *b, int r, struct q4_0_block *o)
{
    o->d = b->d[r];
    for (int k = 0; k < 4; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

/* The descriptor (plugin.c lists it) and the repack Q4_0's descriptor names. */
extern const struct splash_format_type kq_q4_0_r16_type;
void q40_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q4_0_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q4_0 rows at the matrix's end. */
void q40_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                        size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q40_r16_mul_q8_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#endif

#endif
