/* Q5_0_R16: Q5_0 rows repacked at load in groups of 16 for the AVX-512 VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 22 = 352 bytes (the plain rows' bytes
 * exactly, so 5.5 bits per weight):
 *
 *   d   [16 rows]            the rows' fp16 scales (one vcvtph2ps decodes all 16)
 *   qs  [5][4 x 16 rows]     five 64-byte vectors V0..V4, one row per 32-bit lane
 *
 * A row's 32 values are eight quads (quad t: values 4t .. 4t + 3; value j has the level
 * u = code | fifth bit << 4 in 0..31 and weighs (u - 16) d). Byte 4r + c of V_k holds
 * row r's level of value 4k + c (quad k < 5) in bits 3..7, as 8u, so V_k & 0xF8 is quad
 * k ready as the unsigned operand of vpdpbusd; its bits 0..2 are bits 3k .. 3k + 2 of a
 * 15-bit stream of the same lane byte, u(20 + c) | u(24 + c) << 5 | u(28 + c) << 10,
 * carrying quads 5, 6, 7, which come out of the spare bits by vpermb lookups (vpermb
 * reads only an index's low 6 bits). Rows after the last whole group keep the plain Q5_0
 * layout.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * block, so they give the same bits: the block's exact integer dot isum = sum (u - 16) a,
 * its scale s = d_w * d_act (one rounding), then acc = fma(isum, s, acc). */
#ifndef SPLASH_KQUANTS_Q50_R16_H
#define SPLASH_KQUANTS_Q50_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/kq_common.h"
#include "splash/format.h"

#define Q50_R16_ROWS 16
#define Q50_R16_VECS 5 /* 64-byte vectors of a block: 16 rows x 32 values x 5 bits */

struct q50_r16_block {
    uint16_t d[Q50_R16_ROWS];
    uint8_t qs[Q50_R16_VECS][4 * Q50_R16_ROWS];
};
_Static_assert(sizeof(struct q50_r16_block) == Q50_R16_ROWS * sizeof(struct q5_0_block),
               "a Q5_0_R16 block takes exactly the bytes of 16 Q5_0 blocks");

/* Level (0..31) of value j (0..31) of a plain Q5_0 block. */
static inline int q50_r16_plain_level(const struct q5_0_block *x, int j)
{
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    const int code = j < 16 ? x->qs[j] & 0xF : x->qs[j - 16] >> 4;
    return code | (int)(qh >> j & 1) << 4;
}

/* Level (0..31) of value j (0..31) of row r of a Q5_0_R16 block. */
static inline int q50_r16_level(const struct q50_r16_block *b, int r, int j)
{
    const int t = j / 4, c = j % 4;
    if (t < Q50_R16_VECS)
        return b->qs[t][4 * r + c] >> 3;
    unsigned e = 0;
    for (int k = 0; k < Q50_R16_VECS; k++)
        e |= (unsigned)(b->qs[k][4 * r + c] & 7) << (3 * k);
    return (int)(e >> (5 * (t - Q50_R16_VECS)) & 31);
}

/* Row r's plain Q5_0 block of a Q5_0_R16 block (the repack's inverse). */
static inline void q50_r16_unpack_row(const struct q50_r16_block *b, int r, struct q5_0_block *o)
{
    uint32_t qh = 0;
    o->d = b->d[r];
    for (int j = 0; j < 16; j++) {
        const int lo = q50_r16_level(b, r, j), hi = q50_r16_level(b, r, j + 16);
        o->qs[j] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
        qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
    }
    memcpy(o->qh, &qh, 4);
}

/* The descriptor (plugin.c lists it) and the repack Q5_0's descriptor names. */
extern const struct splash_format_type kq_q5_0_r16_type;
void q50_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q5_0_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q5_0 rows at the matrix's end. */
void q50_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                        size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void q50_r16_mul_q8_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#endif

#endif
