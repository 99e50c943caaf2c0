/* IQ1_S_R16: IQ1_S rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 50 = 800 bytes (the plain rows'
 * bytes exactly, so 1.5625 bits per weight). Per 32-value sub-block ib (< 8):
 *
 *   qs[ib][16 l + r]  the low 8 bits of row r's grid index for values 32 ib + 8 l .. + 7
 *                     (l < 4)
 *   qh[ib][r]         row r's plain qh word of sub-block ib: index bits 8..10 of group l in
 *                     bits 3l .. 3l + 2, the 3-bit scale in bits 12..14, the delta sign in
 *                     bit 15
 *   d[r]              row r's fp16 d, as in IQ1_S
 *
 * so that 16 consecutive index bytes and the 16 qh words widen (vpmovzx) to the 11-bit
 * indices of two 8-row qword gathers of grid points, and the qh words, one per int32
 * lane, give the 16 rows' scales and delta signs. Rows after the last whole group keep
 * the plain IQ1_S layout; the repack only moves bytes. */
#ifndef SPLASH_KQUANTS_IQ1S_R16_H
#define SPLASH_KQUANTS_IQ1S_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ1S_R16_ROWS 16

struct iq1s_r16_block {
    uint8_t qs[SPLASH_QK_K / 32][4 * IQ1S_R16_ROWS];
    uint16_t qh[SPLASH_QK_K / 32][IQ1S_R16_ROWS];
    uint16_t d[IQ1S_R16_ROWS];
};
_Static_assert(sizeof(struct iq1s_r16_block) == IQ1S_R16_ROWS * sizeof(struct iq1_s_block),
               "an IQ1_S_R16 block takes exactly the bytes of 16 IQ1_S blocks");

/* Row r's plain IQ1_S block of an IQ1_S_R16 block (the repack's inverse). */
static inline void iq1s_r16_unpack_row(const struct iq1s_r16_block *b, int r,
                                       struct iq1_s_block *o)
{
    o->d = b->d[r];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        o->qh[ib] = b->qh[ib][r];
        for (int l = 0; l < 4; l++)
            o->qs[4 * ib + l] = b->qs[ib][16 * l + r];
    }
}

/* Writes n_rows IQ1_S rows of n elements (contiguous at src) as an IQ1_S_R16 image at dst. */
void iq1s_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ1_S_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ1_S rows at the matrix's end. */
void iq1s_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq1s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
