/* IQ2_XXS_R16: IQ2_XXS rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 66 = 1056 bytes (the plain rows'
 * bytes exactly, so 2.0625 bits per weight). Per 32-value sub-block ib (< 8):
 *
 *   idx[ib][16 l + r]  the 8-bit grid index of row r's values 32 ib + 8 l .. + 7 (l < 4)
 *   sg[ib][16 l + r]   the 7 stored sign bits of those values in bits 0..6, and bit l of
 *                      row r's 4-bit sub-block scale in bit 7
 *   d[r]               row r's fp16 d, as in IQ2_XXS
 *
 * so that eight consecutive index bytes widen to the indices of one 8-row qword gather
 * of grid points, a 7-bit lookup (vpermi2b) of a whole sg vector gives the 8 sign bits of
 * 64 (row, group) pairs, whose consecutive bytes are the byte masks of those gathers, and
 * the sign bytes' top bits (vpmovb2m) give the 16 rows' scales. Rows after the last whole
 * group keep the plain IQ2_XXS layout; the repack only moves bits. */
#ifndef SPLASH_KQUANTS_IQ2XXS_R16_H
#define SPLASH_KQUANTS_IQ2XXS_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ2XXS_R16_ROWS 16

struct iq2xxs_r16_block {
    uint8_t idx[SPLASH_QK_K / 32][4 * IQ2XXS_R16_ROWS];
    uint8_t sg[SPLASH_QK_K / 32][4 * IQ2XXS_R16_ROWS];
    uint16_t d[IQ2XXS_R16_ROWS];
};
_Static_assert(sizeof(struct iq2xxs_r16_block) == IQ2XXS_R16_ROWS * sizeof(struct iq2_xxs_block),
               "an IQ2_XXS_R16 block takes exactly the bytes of 16 IQ2_XXS blocks");

/* Row r's plain IQ2_XXS block of an IQ2_XXS_R16 block (the repack's inverse). */
static inline void iq2xxs_r16_unpack_row(const struct iq2xxs_r16_block *b, int r,
                                         struct iq2_xxs_block *o)
{
    o->d = b->d[r];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        uint32_t idx = 0, aux = 0;
        for (int l = 0; l < 4; l++) {
            const uint32_t s = b->sg[ib][16 * l + r];
            idx |= (uint32_t)b->idx[ib][16 * l + r] << 8 * l;
            aux |= (s & 127u) << 7 * l | (s >> 7) << (28 + l);
        }
        memcpy(o->qs + 4 * ib, &idx, 4);
        memcpy(o->qs + 4 * ib + 2, &aux, 4);
    }
}

/* Writes n_rows IQ2_XXS rows of n elements (contiguous at src) as an IQ2_XXS_R16 image at
 * dst. */
void iq2xxs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ2_XXS_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ2_XXS rows at the matrix's end. */
void iq2xxs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq2xxs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *act, size_t act_stride, int64_t n_act, float *out,
                               size_t out_stride);
#endif

#endif
