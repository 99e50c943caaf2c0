/* MXFP4_R16: MXFP4 rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 17 = 272 bytes (the plain rows' bytes
 * exactly, so 4.25 bits per weight):
 *
 *   x   [16 rows]            the rows' E8M0 scales e as the int8 x = e - 128 (2^x is
 *                            half the scale, MXFP4's doubled-value convention)
 *   qs  [4][4 x 16 rows]     qs[k][4r + c] = qs[4k + c] of row r
 *
 * so 32-bit lane r of the 64-byte vector qs[k] is row r's code bytes 4k .. 4k + 3: their
 * low nibbles are values 4k .. 4k + 3 and their high nibbles values 16 + 4k .. 16 + 4k + 3
 * (the plain nibble order). One byte lookup (vpermb) of the nibbles and one vpdpbusd
 * against 4 broadcast activations give the 16 rows' partial sums of 4 consecutive inputs
 * in 16 int32 lanes; the 16 scales decode with one sign-extending load and a convert.
 * Rows after the last whole group keep the plain MXFP4 layout.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * block, so they give the same bits: the block's exact integer dot isum, its scale
 * s = 2^(e - 128) * d_act (one rounding), then acc = fma(isum, s, acc). */
#ifndef SPLASH_FORMATS_MXFP4_R16_H
#define SPLASH_FORMATS_MXFP4_R16_H

#include <stddef.h>
#include <stdint.h>

#include "formats/mxfp4/mxfp4.h"
#include "splash/format.h"

#define MXFP4_R16_ROWS 16

struct mxfp4_r16_block {
    int8_t x[MXFP4_R16_ROWS];
    uint8_t qs[4][4 * MXFP4_R16_ROWS];
};
_Static_assert(sizeof(struct mxfp4_r16_block) == MXFP4_R16_ROWS * sizeof(struct mxfp4_block),
               "an MXFP4_R16 block takes exactly the bytes of 16 MXFP4 blocks");

/* Row r's plain MXFP4 block of an MXFP4_R16 block (the repack's inverse). */
static inline void mxfp4_r16_unpack_row(const struct mxfp4_r16_block *b, int r,
                                        struct mxfp4_block *o)
{
    o->e = (uint8_t)(b->x[r] + 128);
    for (int k = 0; k < 4; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

#define MXFP4_R16_X(e) ((int8_t)((e) ^ 0x80)) /* e - 128 for a stored E8M0 byte e */

/* The descriptor (plugin.c lists it) and the repack MXFP4's descriptor names. */
extern const struct splash_format_type mxfp4_r16_type;
void mxfp4_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of MXFP4_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain MXFP4 rows at the matrix's end. */
void mxfp4_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void mxfp4_r16_mul_q8_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
