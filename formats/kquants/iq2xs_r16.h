/* IQ2_XS_R16: IQ2_XS rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 74 = 1184 bytes (the plain rows'
 * bytes exactly, so 2.3125 bits per weight). Per 32-value sub-block ib (< 8):
 *
 *   q[ib][16 l + r]  row r's values 32 ib + 8 l .. + 7 (l < 4): the 7 stored sign bits in
 *                    bits 0..6 and the 9-bit grid index in bits 7..15
 *   sc[ib][r]        row r's byte of scales[ib]: the 4-bit scales of values 32 ib .. + 15
 *                    (low nibble) and 32 ib + 16 .. + 31 (high nibble)
 *   d[r]             row r's fp16 d, as in IQ2_XS
 *
 * so that one widening load and a shift give the qword-gather indices of 16 rows, the low
 * bytes of a sub-block's 64 words are the 7-bit indices of one vpermi2b sign lookup (bit 7
 * is ignored by it), and one 16-byte load holds a sub-block's 32 scales of the 16 rows.
 * Rows after the last whole group keep the plain IQ2_XS layout; the repack only moves
 * bits. */
#ifndef SPLASH_KQUANTS_IQ2XS_R16_H
#define SPLASH_KQUANTS_IQ2XS_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ2XS_R16_ROWS 16

struct iq2xs_r16_block {
    uint16_t q[SPLASH_QK_K / 32][4 * IQ2XS_R16_ROWS];
    uint8_t sc[SPLASH_QK_K / 32][IQ2XS_R16_ROWS];
    uint16_t d[IQ2XS_R16_ROWS];
};
_Static_assert(sizeof(struct iq2xs_r16_block) == IQ2XS_R16_ROWS * sizeof(struct iq2_xs_block),
               "an IQ2_XS_R16 block takes exactly the bytes of 16 IQ2_XS blocks");

/* Row r's plain IQ2_XS block of an IQ2_XS_R16 block (the repack's inverse). */
static inline void iq2xs_r16_unpack_row(const struct iq2xs_r16_block *b, int r,
                                        struct iq2_xs_block *o)
{
    o->d = b->d[r];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        o->scales[ib] = b->sc[ib][r];
        for (int l = 0; l < 4; l++) {
            const unsigned v = b->q[ib][16 * l + r];
            o->qs[4 * ib + l] = (uint16_t)(v >> 7 | (v & 127u) << 9);
        }
    }
}

/* Writes n_rows IQ2_XS rows of n elements (contiguous at src) as an IQ2_XS_R16 image at
 * dst. */
void iq2xs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ2_XS_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ2_XS rows at the matrix's end. */
void iq2xs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq2xs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride);
#endif

#endif
