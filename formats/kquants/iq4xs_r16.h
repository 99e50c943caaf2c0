/* IQ4_XS_R16: IQ4_XS rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is super-block i of 16 consecutive rows, 16 x 136 = 2176 bytes (the plain rows'
 * bytes exactly, so 4.25 bits per weight), 64-byte vectors first:
 *
 *   qs[k][4r + c]  qs[4k + c] of row r (k < 32): 32-bit word k of row r at word lane r
 *   sc[r]          row r's sub-scale fields f0 .. f4 at bits 26, 20, 14, 8, 2 and the
 *                  top two bits of f7 at bits 0..1
 *   sh[r]          f5 at bits 10..15, f6 at bits 4..9, the low four bits of f7 at 0..3
 *   d[r]           row r's fp16 d, as in IQ4_XS
 *
 * f_j is sub-block j's 6-bit sub-scale ls_j (0..63) with bit 5 flipped, i.e. ls_j - 32
 * in 6-bit two's complement: an arithmetic shift of the field from the top of a 32-bit
 * lane gives the signed scale of 16 rows at once. Word k covers sub-block k / 4: inputs
 * 32 (k / 4) + 4 (k % 4) .. + 3 in its low nibbles and the inputs 16 after those in its
 * high nibbles, as the plain qs[4k ..] does. Rows after the last whole group keep
 * the plain IQ4_XS layout; the repack only moves bits. */
#ifndef SPLASH_KQUANTS_IQ4XS_R16_H
#define SPLASH_KQUANTS_IQ4XS_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/iq_blocks.h"

#define IQ4XS_R16_ROWS 16

struct iq4xs_r16_block {
    uint8_t qs[SPLASH_QK_K / 8][4 * IQ4XS_R16_ROWS];
    uint32_t sc[IQ4XS_R16_ROWS];
    uint16_t sh[IQ4XS_R16_ROWS];
    uint16_t d[IQ4XS_R16_ROWS];
};
_Static_assert(sizeof(struct iq4xs_r16_block) == IQ4XS_R16_ROWS * sizeof(struct iq4_xs_block),
               "an IQ4_XS_R16 block takes exactly the bytes of 16 IQ4_XS blocks");

/* Sub-scale ls_j (0..63) of plain block b. */
static inline int iq4xs_r16_plain_ls(const struct iq4_xs_block *b, int j)
{
    return ((b->scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | (((b->scales_h >> 2 * j) & 3) << 4);
}

/* Row r's plain IQ4_XS block of an IQ4_XS_R16 block (the repack's inverse). */
static inline void iq4xs_r16_unpack_row(const struct iq4xs_r16_block *b, int r,
                                        struct iq4_xs_block *o)
{
    const uint32_t sc = b->sc[r], sh = b->sh[r];
    int f[8];
    for (int j = 0; j < 5; j++)
        f[j] = (int)(sc >> (26 - 6 * j)) & 63;
    f[5] = (int)(sh >> 10) & 63;
    f[6] = (int)(sh >> 4) & 63;
    f[7] = (int)(sh & 15) | (int)(sc & 3) << 4;
    o->d = b->d[r];
    o->scales_h = 0;
    memset(o->scales_l, 0, sizeof o->scales_l);
    for (int j = 0; j < 8; j++) {
        const int ls = f[j] ^ 32;
        o->scales_l[j / 2] |= (uint8_t)((ls & 15) << 4 * (j % 2));
        o->scales_h |= (uint16_t)((ls >> 4) << 2 * j);
    }
    for (int k = 0; k < SPLASH_QK_K / 8; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

/* Writes n_rows IQ4_XS rows of n elements (contiguous at src) as an IQ4_XS_R16 image at dst. */
void iq4xs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of IQ4_XS_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain IQ4_XS rows at the matrix's end. */
void iq4xs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void iq4xs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride);
#endif

#endif
