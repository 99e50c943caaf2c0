/* IQ4_NL_R16: IQ4_NL rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 18 = 288 bytes (the plain rows' bytes
 * exactly, so 4.5 bits per weight):
 *
 *   d   [16 rows]            the rows' fp16 d, as in IQ4_NL
 *   qs  [4][4 x 16 rows]     qs[k][4r + c] = qs[4k + c] of row r
 *
 * so 32-bit lane r of the 64-byte vector qs[k] is row r's code bytes 4k .. 4k + 3: their
 * low nibbles index the levels of values 4k .. 4k + 3 and their high nibbles those of
 * values 16 + 4k .. 16 + 4k + 3 (the plain nibble order). One byte lookup of the nibbles
 * and one vpdpbusd against 4 broadcast activations give the 16 rows' partial sums of 4
 * consecutive inputs in 16 int32 lanes; the 16 d decode with one vcvtph2ps. Rows after
 * the last whole group keep the plain IQ4_NL layout; the repack only moves bytes.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * block, so they give the same bits: the block's exact integer dot isum, its scale
 * s = d * d_act (one rounding), then acc = fma(isum, s, acc). */
#ifndef SPLASH_KQUANTS_IQ4NL_R16_H
#define SPLASH_KQUANTS_IQ4NL_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ4NL_R16_ROWS 16

struct iq4nl_r16_block {
    uint16_t d[IQ4NL_R16_ROWS];
    uint8_t qs[4][4 * IQ4NL_R16_ROWS];
};
_Static_assert(sizeof(struct iq4nl_r16_block) == IQ4NL_R16_ROWS * sizeof(struct iq4_nl_block),
               "an IQ4_NL_R16 block takes exactly the bytes of 16 IQ4_NL blocks");

/* Row r's plain IQ4_NL block of an IQ4_NL_R16 block (the repack's inverse). */
static inline void iq4nl_r16_unpack_row(const struct iq4nl_r16_block *b, int r,
                                        struct iq4_nl_block *o)
{
    o->d = b->d[r];
    for (int k = 0; k < 4; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

/* Writes n_rows IQ4_NL rows of n elements (contiguous at src) as an IQ4_NL_R16 image at dst. */
void iq4nl_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ4_NL_R16 weights (struct splash_kernel_row) against Q8_0 activations:
 * whole groups of 16 rows, then fewer than 16 plain IQ4_NL rows at the matrix's end. */
void iq4nl_r16_mul_q80_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq4nl_r16_mul_q80_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride);
#endif

#endif
