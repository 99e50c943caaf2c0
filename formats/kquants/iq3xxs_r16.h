/* IQ3_XXS_R16: IQ3_XXS rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 98 = 1568 bytes (the plain rows'
 * bytes exactly, so 3.0625 bits per weight):
 *
 *   qs[h][4r + c]  grid index k = 4h + c (values 4k .. 4k + 3) of row r, h < 16: the 4
 *               indices of row r's values 16h .. 16h + 15 in int32 lane r, so one
 *               64-byte vector of indices looks up 4 grid bytes for each of 16 rows
 *   aux[ib][r]  row r's plain signs-and-scale word of sub-block ib (values 32 ib ..
 *               32 ib + 31): four 7-bit sign groups (the 8th sign is their parity) and
 *               the 4-bit scale in bits 28..31, one row per int32 lane
 *   d[r]        row r's fp16 d, as in IQ3_XXS
 *
 * Rows after the last whole group keep the plain IQ3_XXS layout; the repack only moves
 * bytes. */
#ifndef SPLASH_KQUANTS_IQ3XXS_R16_H
#define SPLASH_KQUANTS_IQ3XXS_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ3XXS_R16_ROWS 16

struct iq3xxs_r16_block {
    uint8_t qs[SPLASH_QK_K / 16][4 * IQ3XXS_R16_ROWS];
    uint32_t aux[SPLASH_QK_K / 32][IQ3XXS_R16_ROWS];
    uint16_t d[IQ3XXS_R16_ROWS];
};
_Static_assert(sizeof(struct iq3xxs_r16_block) == IQ3XXS_R16_ROWS * sizeof(struct iq3_xxs_block),
               "an IQ3_XXS_R16 block takes exactly the bytes of 16 IQ3_XXS blocks");

/* Row r's plain IQ3_XXS block of an IQ3_XXS_R16 block (the repack's inverse). */
static inline void iq3xxs_r16_unpack_row(const struct iq3xxs_r16_block *b, int r,
                                         struct iq3_xxs_block *o)
{
    o->d = b->d[r];
    for (int k = 0; k < SPLASH_QK_K / 4; k++)
        o->qs[k] = b->qs[k / 4][4 * r + k % 4];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++)
        memcpy(o->qs + SPLASH_QK_K / 4 + 4 * ib, &b->aux[ib][r], 4);
}

/* Writes n_rows IQ3_XXS rows of n elements (contiguous at src) as an IQ3_XXS_R16 image at dst. */
void iq3xxs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ3_XXS_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ3_XXS rows at the matrix's end. */
void iq3xxs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq3xxs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *act, size_t act_stride, int64_t n_act, float *out,
                               size_t out_stride);
#endif

#endif
