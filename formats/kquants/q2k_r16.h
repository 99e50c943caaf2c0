/* Q2_K_R16: Q2_K rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A group's image is its rows' super-blocks in order; block i holds super-block i of
 * the 16 rows (16 x 84 = 1344 bytes, the plain rows' bytes exactly, 2.625 bits per
 * weight), each plain field transposed so that row r sits at 32-bit lane r of a
 * 64-byte vector:
 *   qs[t][4r + c]       qs[4t + c] of row r (t < 16)
 *   scales[q][4r + p]   scales[4q + Q2K_R16_SUB(p)] of row r (q < 4), the bytes of each
 *                       word in the order 0, 2, 1, 3
 *   d[r], dmin[r]       the rows' fp16 scales, 16 of each (one vcvtph2ps each)
 * Plain qs[32h + 4g + c] holds, in bits 2k..2k+1, value 128h + 32k + 4g + c (sub-block
 * 8h + 2k + g / 4), so vector qs[8h + g] masked to one bit pair is the 16 rows' levels of
 * 4 consecutive inputs: one vpdpbusd against 4 activations broadcast adds 16 rows'
 * partial sums. The scale bytes' order puts sub-blocks 4q, 4q + 1 in the low bytes and
 * 4q + 2, 4q + 3 in the high bytes of the two 16-bit halves of a lane, so the mins of
 * either byte of every half pair up with two adjacent Q8_K block sums (one vpdpwssd). */
#ifndef SPLASH_KQUANTS_Q2K_R16_H
#define SPLASH_KQUANTS_Q2K_R16_H

#include <stddef.h>
#include <stdint.h>

#include "formats/kquants/kq_common.h"

#define Q2K_R16_ROWS 16
/* The sub-block (of the 4 of a scale word) whose byte sits at position p of the word. */
#define Q2K_R16_SUB(p) ((p) == 1 ? 2 : (p) == 2 ? 1 : (p))

struct q2k_r16_block {
    uint8_t qs[SPLASH_QK_K / 16][4 * Q2K_R16_ROWS];
    uint8_t scales[SPLASH_QK_K / 64][4 * Q2K_R16_ROWS];
    uint16_t d[Q2K_R16_ROWS];
    uint16_t dmin[Q2K_R16_ROWS];
};
_Static_assert(sizeof(struct q2k_r16_block) == Q2K_R16_ROWS * sizeof(struct q2_k_block),
               "a Q2_K_R16 block takes exactly the bytes of 16 Q2_K blocks");

/* Row r's plain Q2_K block of a Q2_K_R16 block (the repack's inverse). */
static inline void q2k_r16_unpack_row(const struct q2k_r16_block *b, int r, struct q2_k_block *o)
{
    o->d = b->d[r];
    o->dmin = b->dmin[r];
    for (int q = 0; q < SPLASH_QK_K / 64; q++)
        for (int p = 0; p < 4; p++)
            o->scales[4 * q + Q2K_R16_SUB(p)] = b->scales[q][4 * r + p];
    for (int t = 0; t < SPLASH_QK_K / 16; t++)
        memcpy(o->qs + 4 * t, &b->qs[t][4 * r], 4);
}

/* Writes n_rows Q2_K rows of n elements (contiguous at src) as a Q2_K_R16 image at dst. */
void q2k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q2_K_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q2_K rows at the matrix's end. */
void q2k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q2k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#endif

#endif
