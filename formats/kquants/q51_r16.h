/* Q5_1_R16: Q5_1 rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 24 = 384 bytes (the plain rows' bytes
 * exactly, so 6 bits per weight):
 *
 *   d   [16 rows]            the rows' fp16 scales   } one 64-byte line: two vcvtph2ps
 *   m   [16 rows]            the rows' fp16 minimums } decode all 16 rows' d and m
 *   qh  [8][8]               8 little-endian 64-bit masks of fifth bits (below)
 *   qs  [4][4 x 16 rows]     qs[k][4r + c] = qs[4k + c] of row r
 *
 * so 32-bit lane r of the 64-byte vector qs[k] is row r's code bytes 4k .. 4k + 3: their
 * low nibbles are the low 4 bits of values 4k .. 4k + 3 and their high nibbles those of
 * values 16 + 4k .. 16 + 4k + 3 (the plain nibble order). Bit 4r + c of mask qh[2k] is
 * the fifth bit of row r's value 4k + c, and of qh[2k + 1] that of value 16 + 4k + c: byte
 * by byte the fifth bits of the code vectors the kernel takes out of qs[k] (its low, then
 * its high nibbles), ready for a masked byte add of 16. The codes (0..31) are the unsigned
 * operand of vpdpbusd; one vpdpbusd against 4 broadcast activations gives the 16 rows'
 * partial sums of 4 consecutive inputs in 16 int32 lanes. Rows after the last whole group
 * keep the plain Q5_1 layout.
 *
 * A Q8_1 activation block carries d_a and s_a = fp16(d_a * sum(a)), and a weight value is
 * q d_w + m, so a block's dot is d_w d_a sum(q a) + m s_a, as Q5_1's own kernels (and
 * ggml's) take it. Every kernel row takes the float steps of ggml's generic Q5_1 dot,
 * block by block (the golden logits were made with it: position 0 of the tiny Q5_1 model
 * agrees to 5e-7 in that order and only to 0.03 in the 8-lane AVX2 order), so a repacked
 * matrix gives the plain one's results bit for bit: per block, the exact integer sum of
 * q a, then sum + ((d_w * d_a) * sumi + m * s_a), each product and sum rounded on its own
 * (m s_a, a product of two fp16 values, is exact). */
#ifndef SPLASH_KQUANTS_Q51_R16_H
#define SPLASH_KQUANTS_Q51_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/kq_common.h"
#include "splash/format.h"

#define Q51_R16_ROWS 16

struct q51_r16_block {
    uint16_t d[Q51_R16_ROWS];
    uint16_t m[Q51_R16_ROWS];
    uint8_t qh[8][8];
    uint8_t qs[4][4 * Q51_R16_ROWS];
};
_Static_assert(sizeof(struct q51_r16_block) == Q51_R16_ROWS * sizeof(struct q5_1_block),
               "a Q5_1_R16 block takes exactly the bytes of 16 Q5_1 blocks");

/* Mask t of a block as an integer (little-endian bytes). */
static inline uint64_t q51_r16_mask(const struct q51_r16_block *b, int t)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b->qh[t][i] << (8 * i);
    return v;
}

/* Row r's plain Q5_1 block of a Q5_1_R16 block (the repack's inverse). */
static inline void q51_r16_unpack_row(const struct q51_r16_block *b, int r, struct q5_1_block *o)
{
    o->d = b->d[r];
    o->m = b->m[r];
    uint32_t qh = 0;
    for (int k = 0; k < 4; k++) {
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
        const uint64_t lo = q51_r16_mask(b, 2 * k), hi = q51_r16_mask(b, 2 * k + 1);
        for (int c = 0; c < 4; c++) {
            qh |= (uint32_t)(lo >> (4 * r + c) & 1) << (4 * k + c);
            qh |= (uint32_t)(hi >> (4 * r + c) & 1) << (16 + 4 * k + c);
        }
    }
    for (int i = 0; i < 4; i++)
        o->qh[i] = (uint8_t)(qh >> (8 * i));
}

/* The descriptor (plugin.c lists it) and the repack Q5_1's descriptor names. */
extern const struct splash_format_type kq_q5_1_r16_type;
void q51_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q5_1_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q5_1 rows at the matrix's end (Q5_1's own kernels). */
void q51_r16_mul_q8_1_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q51_r16_mul_q8_1_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
