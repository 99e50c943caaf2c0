/* IQ2_S_R16: IQ2_S rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 82 = 1312 bytes (the plain rows'
 * bytes exactly, so 2.5625 bits per weight). Per 32-value sub-block ib (< 8):
 *
 *   idx[ib][16 l + r]  the low 8 bits of the 10-bit grid index of row r's values
 *                      32 ib + 8 l .. + 7 (l < 4)
 *   sg[ib][16 l + r]   the 8 explicit sign bits of those values
 *   qh[ib][r]          row r's qh byte of the sub-block (bits 2 l, 2 l + 1: index bits 8, 9)
 *   sc[ib][r]          row r's scale byte of the sub-block (low nibble: l < 2, high: l >= 2)
 *   d[r]               row r's fp16 d, as in IQ2_S
 *
 * so that eight consecutive index bytes widen (with their qh bits) to the indices of one
 * 8-row qword gather of grid points, and the eight sign bytes beside them are, as one
 * 64-bit mask, the byte mask that negates that gather's values. Rows after the last whole
 * group keep the plain IQ2_S layout; the repack only moves bytes. */
#ifndef SPLASH_KQUANTS_IQ2S_R16_H
#define SPLASH_KQUANTS_IQ2S_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ2S_R16_ROWS 16

struct iq2s_r16_block {
    uint8_t idx[SPLASH_QK_K / 32][4 * IQ2S_R16_ROWS];
    uint8_t sg[SPLASH_QK_K / 32][4 * IQ2S_R16_ROWS];
    uint8_t qh[SPLASH_QK_K / 32][IQ2S_R16_ROWS];
    uint8_t sc[SPLASH_QK_K / 32][IQ2S_R16_ROWS];
    uint16_t d[IQ2S_R16_ROWS];
};
_Static_assert(sizeof(struct iq2s_r16_block) == IQ2S_R16_ROWS * sizeof(struct iq2_s_block),
               "an IQ2_S_R16 block takes exactly the bytes of 16 IQ2_S blocks");

/* Row r's plain IQ2_S block of an IQ2_S_R16 block (the repack's inverse). */
static inline void iq2s_r16_unpack_row(const struct iq2s_r16_block *b, int r, struct iq2_s_block *o)
{
    o->d = b->d[r];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        for (int l = 0; l < 4; l++) {
            o->qs[4 * ib + l] = b->idx[ib][16 * l + r];
            o->qs[SPLASH_QK_K / 8 + 4 * ib + l] = b->sg[ib][16 * l + r];
        }
        o->qh[ib] = b->qh[ib][r];
        o->scales[ib] = b->sc[ib][r];
    }
}

/* Writes n_rows IQ2_S rows of n elements (contiguous at src) as an IQ2_S_R16 image at
 * dst. */
void iq2s_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ2_S_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ2_S rows at the matrix's end. */
void iq2s_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq2s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
