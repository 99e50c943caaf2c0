/* af<B>g<G>_R16: MLX affine 4-bit and 8-bit rows repacked at load in groups of 16 for the
 * AVX-512 VNNI kernels (B = 4, 8; G = 32, 64, 128: the widths mlx-lm writes most).
 *
 * A block is group i of 16 consecutive rows, 16 x (B G / 8 + 4) bytes (the plain rows'
 * bytes exactly, so B + 32 / G bits per weight):
 *
 *   s   [16 rows]                  the rows' bf16 scales  } one 64-byte line: two zero
 *   z   [16 rows]                  the rows' bf16 biases  } extends and shifts decode both
 *   qs  [G / 32][B][4 x 16 rows]   piece p's code bytes, 4 of each row per 64-byte line
 *
 * A piece is 32 values, one Q8_0 activation block. 8-bit: qs[p][k][4r + c] is code 4k + c
 * of row r's piece p. 4-bit: MLX packs codes two to a byte, value 2j in the low nibble of
 * byte j; the repack stores a piece as Q4_0 does instead, byte c holding value c in its low
 * nibble and value 16 + c in its high one, and qs[p][k][4r + c] is byte 4k + c of row r's
 * piece. Either way the 32-bit lane r of a 64-byte line holds row r's codes of 4
 * consecutive values (4-bit: of two runs of 4, values 4k.. and 16 + 4k..), and one
 * vpdpbusd of the codes (unsigned) against 4 broadcast activations gives the 16 rows'
 * partial sums of 4 inputs.
 *
 * Float steps, per (weight row, activation row), the same in both kernel rows (so they
 * give the same bits): with the pieces' exact integer sums isum_p = Σ q a and their Q8_0
 * scales d_p, per group
 *   acc = fma(isum_p, s d_p, acc)  over the pieces (s d_p rounded once, as Q4_0_R16's d d_a)
 *   acc = fma(z, A, acc)           A = fma(Σa_p, d_p, A) over the pieces, from A = +0
 * from acc = +0: w = s q + z, so a group's dot is s Σ_p d_p isum_p + z Σ_p d_p Σa_p.
 * Rows after the last whole group of 16 keep the plain layout and its kernels. */
#ifndef SPLASH_AFFINE_R16_H
#define SPLASH_AFFINE_R16_H

#include <stddef.h>
#include <stdint.h>

#include "formats/affine/affine.h"
#include "splash/act.h"
#include "splash/format.h"

#define AFFINE_R16_ROWS 16

/* Every (bits, group) with a repacked layout, as X(bits, group). */
#define AFFINE_R16_FOR_EACH(X) X(4, 32) X(4, 64) X(4, 128) X(8, 32) X(8, 64) X(8, 128)
#define AFFINE_R16_N_TYPES 6

/* Bytes of one repacked block (16 rows' group i) and where its parts start. */
#define AFFINE_R16_BLOCK_BYTES(bits, group) (AFFINE_R16_ROWS * AFFINE_BLOCK_BYTES(bits, group))
#define AFFINE_R16_S 0                      /* uint16_t s[16] */
#define AFFINE_R16_Z (2 * AFFINE_R16_ROWS)  /* uint16_t z[16] */
#define AFFINE_R16_QS (4 * AFFINE_R16_ROWS) /* uint8_t qs[G / 32][bits][64] */
#define AFFINE_R16_PIECE_BYTES(bits) (4 * (bits) * AFFINE_R16_ROWS) /* one piece's qs */
_Static_assert(AFFINE_R16_QS + 2 * AFFINE_R16_PIECE_BYTES(4) == AFFINE_R16_BLOCK_BYTES(4, 64),
               "an af4g64_R16 block takes exactly the bytes of 16 af4g64 blocks");
_Static_assert(AFFINE_R16_QS + 4 * AFFINE_R16_PIECE_BYTES(8) == AFFINE_R16_BLOCK_BYTES(8, 128),
               "an af8g128_R16 block takes exactly the bytes of 16 af8g128 blocks");

/* One Q8_0 activation block as the kernels meet it: its scale d, and the bias's factor
 * A of the group the block belongs to (the same in each of the group's blocks). */
struct affine_r16_act {
    float d;
    float a;
};

/* Prepares n Q8_0 blocks (whole groups of group / 32) in both kernel rows' steps. */
void affine_r16_prepare(int group, const struct splash_q8_0_block *y, int64_t n,
                        struct affine_r16_act *p);

/* The repacked descriptors (plugin.c lists them) and the repacks the plain descriptors
 * name. */
#define AFFINE_R16_DECL(bits, group)                                                               \
    extern const struct splash_format_type affine_b##bits##g##group##_r16_type;                    \
    void affine_b##bits##g##group##_repack(int64_t n, const void *src, int64_t n_rows,             \
                                           void *dst);                                             \
    void affine_b##bits##g##group##_r16_mul_ref(int64_t n, const void *w, size_t w_stride,         \
                                                int64_t n_w, const void *act, size_t act_stride,   \
                                                int64_t n_act, float *out, size_t out_stride);
AFFINE_R16_FOR_EACH(AFFINE_R16_DECL)
#undef AFFINE_R16_DECL

#if defined(__x86_64__)
#define AFFINE_R16_DECL_SIMD(bits, group)                                                          \
    void affine_b##bits##g##group##_r16_mul_avx512(int64_t n, const void *w, size_t w_stride,      \
                                                   int64_t n_w, const void *act,                   \
                                                   size_t act_stride, int64_t n_act, float *out,   \
                                                   size_t out_stride);
AFFINE_R16_FOR_EACH(AFFINE_R16_DECL_SIMD)
#undef AFFINE_R16_DECL_SIMD
#endif

#endif
