/* Q4_K_R16: Q4_K rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A group's image is its rows' super-blocks in order; block i holds super-block i of
 * the 16 rows, each plain field transposed so that 32-bit word k of row r sits at
 * word lane r of a 64-byte vector:
 *   d[r], dmin[r]       the rows' fp16 scales, 16 of each (one vcvtph2ps each)
 *   scales[k][4r + c]   byte 4k + c of row r's 12 packed scale bytes (k < 3)
 *   qs[k][4r + c]       qs[4k + c] of row r (k < 32)
 * so one vpdpbusd of qs[k] (nibbles masked) against 4 activations broadcast gives the
 * 16 rows' partial sums of 4 inputs in 16 int32 lanes: qs[8p + g] holds inputs
 * 64p + 4g .. + 3 (sub-block 2p) in its low nibbles and 64p + 32 + 4g .. + 3 (sub-block
 * 2p + 1) in its high nibbles, as the plain qs[32p + 4g + c] does. Same 144 bytes per
 * row and super-block as Q4_K; the repack only moves 32-bit words. */
#ifndef SPLASH_KQUANTS_Q4K_R16_H
#define SPLASH_KQUANTS_Q4K_R16_H

#include <stddef.h>
#include <stdint.h>

#include "formats/kquants/kq_common.h"

#define Q4K_R16_ROWS 16

struct q4k_r16_block {
    uint16_t d[Q4K_R16_ROWS];
    uint16_t dmin[Q4K_R16_ROWS];
    uint8_t scales[KQ_K_SCALE_SIZE / 4][4 * Q4K_R16_ROWS];
    uint8_t qs[SPLASH_QK_K / 8][4 * Q4K_R16_ROWS];
};
_Static_assert(sizeof(struct q4k_r16_block) == Q4K_R16_ROWS * sizeof(struct q4_k_block),
               "a Q4_K_R16 block takes exactly the bytes of 16 Q4_K blocks");

/* Row r's plain Q4_K block of a Q4_K_R16 block (the repack's inverse). */
static inline void q4k_r16_unpack_row(const struct q4k_r16_block *b, int r, struct q4_k_block *o)
{
    o->d = b->d[r];
    o->dmin = b->dmin[r];
    for (int k = 0; k < KQ_K_SCALE_SIZE / 4; k++)
        memcpy(o->scales + 4 * k, &b->scales[k][4 * r], 4);
    for (int k = 0; k < SPLASH_QK_K / 8; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

/* Writes n_rows Q4_K rows of n elements (contiguous at src) as a Q4_K_R16 image at dst. */
void q4k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q4_K_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q4_K rows at the matrix's end. */
void q4k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q4k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#endif

#endif
