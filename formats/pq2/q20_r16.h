/* Q2_0_R16: Q2_0 rows (pq2.h) repacked at load in groups of 16 for the AVX-512 VNNI
 * kernels, and PQ2_0 rows as PQ2_0_R16 the same way: the layout is written for a plain
 * block of qk values (2 + qk / 4 bytes: fp16 d, then the codes), Q2_0's 64 or PQ2_0's 128.
 *
 * A block is block i of 16 consecutive rows, 16 x (2 + qk / 4) bytes (the plain rows'
 * bytes exactly, so the plain bits per weight):
 *
 *   d   [16 rows]           the rows' fp16 scales (one vcvtph2ps decodes all 16)
 *   qs  [qk / 16][64]       code vector t: inputs 16t .. 16t + 15 of the 16 rows, row l
 *                           in 32-bit lane l: byte 4l + c, bits 2k, 2k + 1 hold the code
 *                           of input 16t + 4k + c of row l
 *
 * Picking bit pair k of every byte of vector t gives the 16 rows' codes of the 4
 * consecutive inputs 16t + 4k .. 16t + 4k + 3: one vpdpbusd against those 4 activations
 * broadcast adds the 16 rows' partial sums. Vectors 2h, 2h + 1 cover activation (Q8_0)
 * block h of the plain block. Rows after the last whole group keep the plain layout.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * plain block: each Q8_0 block h's exact integer dot isum_h = sum (q - 1) a converted to
 * float, u = isum_0 d_0 then u = fma(isum_h, d_h, u) over the block's other Q8_0 blocks
 * (d_h their scales), and acc = fma(u, d_w, acc), block after block. */
#ifndef SPLASH_PQ2_Q20_R16_H
#define SPLASH_PQ2_Q20_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/pq2/pq2.h"
#include "splash/format.h"

#define Q20_R16_ROWS 16

/* Bytes of a plain block of qk values, and of a repacked block. */
#define Q20_R16_PLAIN(qk) (2 + (qk) / 4)
#define Q20_R16_BLOCK(qk) (Q20_R16_ROWS * Q20_R16_PLAIN(qk))

/* The byte of a repacked block holding input e of row l (bits 2 (e % 16 / 4) and up). */
static inline size_t q20_r16_code_at(int e, int l)
{
    return 2 * Q20_R16_ROWS + (size_t)(64 * (e / 16) + 4 * l + e % 4);
}

/* Writes row l's plain block (fp16 d, qk / 4 code bytes, input e at bits 2 (e % 4) of
 * byte e / 4) into repacked block b, whose code bytes of row l start out zero. */
static inline void q20_r16_pack_row(int qk, const uint8_t *plain, int l, uint8_t *b)
{
    memcpy(b + 2 * l, plain, 2);
    for (int e = 0; e < qk; e++) {
        const int q = (plain[2 + e / 4] >> (2 * (e % 4))) & 3;
        b[q20_r16_code_at(e, l)] |= (uint8_t)(q << (2 * (e % 16 / 4)));
    }
}

/* Row l's plain block of repacked block b (the repack's inverse). */
static inline void q20_r16_unpack_row(int qk, const uint8_t *b, int l, uint8_t *plain)
{
    memcpy(plain, b + 2 * l, 2);
    memset(plain + 2, 0, (size_t)qk / 4);
    for (int e = 0; e < qk; e++) {
        const int q = (b[q20_r16_code_at(e, l)] >> (2 * (e % 16 / 4))) & 3;
        plain[2 + e / 4] |= (uint8_t)(q << (2 * (e % 4)));
    }
}

/* The layout's routines for plain blocks of qk values (q20_r16.c), which a repacked
 * format's descriptor wraps; n and the byte counts are as the descriptor members'. */
void q20_r16_repack_qk(int qk, int64_t n, const void *src, int64_t n_rows, void *dst);
enum splash_status q20_r16_validate_qk(const char *name, int qk, const void *data, size_t n_bytes,
                                       int64_t n_elems, struct splash_err *err);
void q20_r16_to_float_qk(int qk, const void *blocks, float *out, int64_t n);
/* The scalar reference mul_rows: the layout's float steps on the group rows, plain_dot
 * (the plain type's scalar vec_dot) on the tail rows. */
void q20_r16_mul_ref_qk(int qk, PQ2_DECL_DOT((*plain_dot)), int64_t n, const void *w,
                        size_t w_stride, int64_t n_w, const void *act, size_t act_stride,
                        int64_t n_act, float *out, size_t out_stride);

/* The descriptor (plugin.c lists it) and the repack Q2_0's descriptor names. */
extern const struct splash_format_type pq2_q2_0_r16_type;
void q20_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of Q2_0_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain Q2_0 rows at the matrix's end (the plain Q2_0 kernels). */
PQ2_DECL_MUL(q20_r16_mul_q8_0_ref);
#if defined(__x86_64__)
PQ2_DECL_MUL(q20_r16_mul_q8_0_avx512);
#endif

/* PQ2_0_R16, the same layout of PQ2_0 (qk 128; pq20_r16.c), as for Q2_0 above. */
extern const struct splash_format_type pq2_pq2_0_r16_type;
void pq20_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);
PQ2_DECL_MUL(pq20_r16_mul_q8_0_ref);
#if defined(__x86_64__)
PQ2_DECL_MUL(pq20_r16_mul_q8_0_avx512);
#endif

#endif
