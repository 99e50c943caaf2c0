/* IQ1_M_R16: IQ1_M rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 56 = 896 bytes (the plain rows'
 * bytes exactly, so 1.75 bits per weight). Per 32-value sub-block ib (< 8):
 *
 *   qs[ib][16 l + r]  the low 8 bits of row r's grid index for values 32 ib + 8 l .. + 7
 *                     (l < 4)
 *   qh[ib][r]         row r's plain qh bytes 2 ib and 2 ib + 1 as one word: group l's index
 *                     bits 8..10 in bits 4l .. 4l + 2 and its delta sign in bit 4l + 3
 *   sc[k][r]          row r's plain scale word k (k < 4): the 3-bit scales of sub-blocks
 *                     2k and 2k + 1 (3 bits per 16 values) and in bits 12..15 one nibble
 *                     of the fp16 d
 *
 * so that 16 consecutive index bytes and the 16 qh words widen (vpmovzx) to the 12-bit
 * (index, sign) keys of two 8-row qword gathers, and the qh and scale words, one per
 * int32 lane, give the 16 rows' scales and d. Rows after the last whole group keep the
 * plain IQ1_M layout; the repack only moves bytes. */
#ifndef SPLASH_KQUANTS_IQ1M_R16_H
#define SPLASH_KQUANTS_IQ1M_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ1M_R16_ROWS 16

struct iq1m_r16_block {
    uint8_t qs[SPLASH_QK_K / 32][4 * IQ1M_R16_ROWS];
    uint16_t qh[SPLASH_QK_K / 32][IQ1M_R16_ROWS];
    uint16_t sc[4][IQ1M_R16_ROWS];
};
_Static_assert(sizeof(struct iq1m_r16_block) == IQ1M_R16_ROWS * sizeof(struct iq1_m_block),
               "an IQ1_M_R16 block takes exactly the bytes of 16 IQ1_M blocks");

/* Row r's plain IQ1_M block of an IQ1_M_R16 block (the repack's inverse). */
static inline void iq1m_r16_unpack_row(const struct iq1m_r16_block *b, int r, struct iq1_m_block *o)
{
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        o->qh[2 * ib] = (uint8_t)b->qh[ib][r];
        o->qh[2 * ib + 1] = (uint8_t)(b->qh[ib][r] >> 8);
        for (int l = 0; l < 4; l++)
            o->qs[4 * ib + l] = b->qs[ib][16 * l + r];
    }
    for (int k = 0; k < 4; k++) {
        o->scales[2 * k] = (uint8_t)b->sc[k][r];
        o->scales[2 * k + 1] = (uint8_t)(b->sc[k][r] >> 8);
    }
}

/* Writes n_rows IQ1_M rows of n elements (contiguous at src) as an IQ1_M_R16 image at dst. */
void iq1m_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ1_M_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ1_M rows at the matrix's end. */
void iq1m_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq1m_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
