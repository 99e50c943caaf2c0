/* IQ3_S_R16: IQ3_S rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 110 = 1760 bytes (the plain rows'
 * bytes exactly, so 3.4375 bits per weight):
 *
 *   qs[h][4r + c]  low 8 bits of grid index k = 4h + c (values 4k .. 4k + 3) of row r,
 *               h < 16: the 4 indices of row r's values 16h .. 16h + 15 in int32 lane r
 *   qh[h]       the 9th bits of qs[h] as a 64-bit mask: bit 4r + c is index 4h + c's of row r
 *   sg[h][t]    sign masks: bit 4r + c is the sign of row r's value 16h + 4c + t
 *   sc[r]       row r's 4 plain scale bytes (4-bit scale of values 32 ib .. 32 ib + 31 at
 *               bits 4 ib .. 4 ib + 3), one row per int32 lane
 *   d[r]        row r's fp16 d, as in IQ3_S
 *
 * Rows after the last whole group keep the plain IQ3_S layout; the repack only moves
 * bits. */
#ifndef SPLASH_KQUANTS_IQ3S_R16_H
#define SPLASH_KQUANTS_IQ3S_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ3S_R16_ROWS 16

struct iq3s_r16_block {
    uint8_t qs[SPLASH_QK_K / 16][4 * IQ3S_R16_ROWS];
    uint64_t qh[SPLASH_QK_K / 16];
    uint64_t sg[SPLASH_QK_K / 16][4];
    uint32_t sc[IQ3S_R16_ROWS];
    uint16_t d[IQ3S_R16_ROWS];
};
_Static_assert(sizeof(struct iq3s_r16_block) == IQ3S_R16_ROWS * sizeof(struct iq3_s_block),
               "an IQ3_S_R16 block takes exactly the bytes of 16 IQ3_S blocks");

/* Row r's plain IQ3_S block of an IQ3_S_R16 block (the repack's inverse). */
static inline void iq3s_r16_unpack_row(const struct iq3s_r16_block *b, int r, struct iq3_s_block *o)
{
    o->d = b->d[r];
    memcpy(o->scales, &b->sc[r], 4);
    memset(o->qh, 0, sizeof o->qh);
    memset(o->signs, 0, sizeof o->signs);
    for (int k = 0; k < SPLASH_QK_K / 4; k++) {
        const int h = k / 4, c = k % 4;
        o->qs[k] = b->qs[h][4 * r + c];
        o->qh[k / 8] |= (uint8_t)((b->qh[h] >> (4 * r + c) & 1) << (k % 8));
        for (int t = 0; t < 4; t++) {
            const int v = 4 * k + t; /* value index 16h + 4c + t */
            o->signs[v / 8] |= (uint8_t)((b->sg[h][t] >> (4 * r + c) & 1) << (v % 8));
        }
    }
}

/* Writes n_rows IQ3_S rows of n elements (contiguous at src) as an IQ3_S_R16 image at dst. */
void iq3s_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ3_S_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ3_S rows at the matrix's end. */
void iq3s_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq3s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
