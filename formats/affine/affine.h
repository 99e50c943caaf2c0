/* MLX affine quantization as formats af<bits>g<group>: w = s q + z per group, for
 * bits 2, 3, 4, 5, 6, 8 and groups of 32, 64, 128.
 *
 * One block is one group: the group's codes as MLX packs them (a little-endian,
 * LSB-first bit stream: code j at bits j*bits .. j*bits + bits - 1, 3/5/6-bit codes
 * crossing byte and 32-bit word boundaries), then the scale s and the bias z as
 * bfloat16 (little-endian). bits * group / 8 + 4 bytes, so bits + 32 / group bits per
 * weight: exactly the checkpoint's with its bf16 .scales and .biases (models.md,
 * "MLX targets" states bf16 for both). The code bytes are a whole number of 32-bit
 * words, so the scale is 2-byte and the block 4-byte aligned.
 *
 * Activations are Q8_0 (every group is a whole number of Q8_0 blocks): a group's dot
 * product is Σ over its Q8_0 blocks of d_a (s Σ q a + z Σ a), both sums exact in
 * integers. */
#ifndef SPLASH_AFFINE_H
#define SPLASH_AFFINE_H

#include <stddef.h>
#include <stdint.h>

#include "splash/act.h"

/* Every (bits, group) the plugin defines, as X(bits, group). */
#define AFFINE_FOR_EACH(X)                                                                         \
    X(2, 32) X(2, 64) X(2, 128) X(3, 32) X(3, 64) X(3, 128) X(4, 32) X(4, 64) X(4, 128)          \
    X(5, 32) X(5, 64) X(5, 128) X(6, 32) X(6, 64) X(6, 128) X(8, 32) X(8, 64) X(8, 128)

#define AFFINE_COUNT_ONE(bits, group) +1
#define AFFINE_N_TYPES (0 AFFINE_FOR_EACH(AFFINE_COUNT_ONE))

#define AFFINE_CODE_BYTES(bits, group) ((bits) * (group) / 8)
#define AFFINE_BLOCK_BYTES(bits, group) (AFFINE_CODE_BYTES(bits, group) + 4)

/* The smallest block (af2g32) is 12 bytes, af3g32 16: SIMD loads rely on it. */
_Static_assert(AFFINE_BLOCK_BYTES(2, 32) == 12, "af2g32 block is 12 bytes");
_Static_assert(AFFINE_BLOCK_BYTES(3, 32) == 16, "af3g32 block is 16 bytes");
_Static_assert(AFFINE_BLOCK_BYTES(4, 64) == 36, "af4g64 block is 36 bytes");
_Static_assert(AFFINE_BLOCK_BYTES(8, 128) == 132, "af8g128 block is 132 bytes");

static inline uint16_t affine_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* Code j of a block's bit stream (bits <= 8: a code spans at most two bytes; the byte
 * after the last code is the scale's, so the 16-bit read stays inside the block). */
static inline int affine_code(const uint8_t *codes, int bits, int j)
{
    const int p = j * bits;
    const unsigned v = affine_load_u16(codes + (p >> 3));
    return (int)((v >> (p & 7)) & ((1u << bits) - 1));
}

#define AFFINE_DOT_NAME(bits, group, isa) affine_b##bits##g##group##_dot_q8_0_##isa
#define AFFINE_MUL_NAME(bits, group, isa) affine_b##bits##g##group##_mul_q8_0_##isa

#define AFFINE_DECL_DOT(fn) void fn(int64_t n, float *s, const void *w_row, const void *act_row)
#define AFFINE_DECL_MUL(fn)                                                                        \
    void fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,              \
            size_t act_stride, int64_t n_act, float *out, size_t out_stride)

#define AFFINE_DECL_REF(bits, group) AFFINE_DECL_DOT(AFFINE_DOT_NAME(bits, group, ref));
AFFINE_FOR_EACH(AFFINE_DECL_REF)
#undef AFFINE_DECL_REF

#if defined(__x86_64__)
#define AFFINE_DECL_SIMD(bits, group)                                                              \
    AFFINE_DECL_DOT(AFFINE_DOT_NAME(bits, group, avx2));                                           \
    AFFINE_DECL_MUL(AFFINE_MUL_NAME(bits, group, avx2));                                           \
    AFFINE_DECL_DOT(AFFINE_DOT_NAME(bits, group, avx512));                                         \
    AFFINE_DECL_MUL(AFFINE_MUL_NAME(bits, group, avx512));
AFFINE_FOR_EACH(AFFINE_DECL_SIMD)
#undef AFFINE_DECL_SIMD
#endif

#endif
