/* Q5_K_R16: Q5_K rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 176 = 2816 bytes (the plain
 * rows' bytes exactly, so 5.5 bits per weight):
 *
 *   d[r], dmin[r]          the rows' fp16 scales, 16 of each (one vcvtph2ps each)
 *   scales[k][4r + c]      byte 4k + c of row r's 12 packed scale bytes (k < 3), as Q4_K_R16
 *   qs[j][k][4r + c]       sub-block j (values 32j .. 32j + 31), vector k < 5
 *
 * Sub-block j of the 16 rows is five 64-byte vectors V0..V4 holding its eight quads
 * (quad t: values 32j + 4t .. + 3, one row per 32-bit lane). Byte 4r + c of V_k holds
 * row r's 5-bit level u of value 32j + 4k + c in bits 3..7 (8u, so V_k & 0xF8 is quad
 * k ready for vpdpbusd), and in bits 0..2 three bits of a 15-bit stream carrying the
 * levels of quads 5, 6, 7 of the same lane byte: stream bit 3k + b is V_k's bit b, and
 * the stream is u5 | u6 << 5 | u7 << 10. Quads 5..7 (also as 8u) come out of the spare
 * bits by a few vpermb lookups (which read only the index's low 6 bits). Rows after
 * the last whole group keep the plain Q5_K layout. */
#ifndef SPLASH_KQUANTS_Q5K_R16_H
#define SPLASH_KQUANTS_Q5K_R16_H

#include <stddef.h>
#include <stdint.h>

#include "formats/kquants/kq_common.h"

#define Q5K_R16_ROWS 16
#define Q5K_R16_VECS 5 /* 64-byte vectors per sub-block of 32 values */

struct q5k_r16_block {
    uint16_t d[Q5K_R16_ROWS];
    uint16_t dmin[Q5K_R16_ROWS];
    uint8_t scales[KQ_K_SCALE_SIZE / 4][4 * Q5K_R16_ROWS];
    uint8_t qs[SPLASH_QK_K / 32][Q5K_R16_VECS][4 * Q5K_R16_ROWS];
};
_Static_assert(sizeof(struct q5k_r16_block) == Q5K_R16_ROWS * sizeof(struct q5_k_block),
               "a Q5_K_R16 block takes exactly the bytes of 16 Q5_K blocks");

/* Level u (0..31) of value v (0..255) of row r of a Q5_K_R16 block. */
static inline int q5k_r16_level(const struct q5k_r16_block *b, int r, int v)
{
    const int j = v / 32, t = v % 32 / 4, c = v % 4;
    if (t < Q5K_R16_VECS)
        return b->qs[j][t][4 * r + c] >> 3;
    unsigned e = 0;
    for (int k = 0; k < Q5K_R16_VECS; k++)
        e |= (unsigned)(b->qs[j][k][4 * r + c] & 7) << (3 * k);
    return (int)(e >> (5 * (t - Q5K_R16_VECS)) & 31);
}

/* Writes n_rows Q5_K rows of n elements (contiguous at src) as a Q5_K_R16 image at dst. */
void q5k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q5_K_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q5_K rows at the matrix's end. */
void q5k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q5k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#endif

#endif
