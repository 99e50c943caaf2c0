/* NVFP4_R16: NVFP4 rows (GGUF type 40) repacked at load in groups of 16 for the AVX-512
 * VNNI kernels.
 *
 * A block is block i of 16 consecutive rows, 16 x 36 = 576 bytes (the plain rows' bytes
 * exactly, so 4.5 bits per weight):
 *
 *   d   [64]                 the rows' 4 UE4M3 scales each, as canonical bytes c (below):
 *                            sub-block s of row r at d[NVFP4_R16_DPOS(s, r)]
 *   qs  [8][4 x 16 rows]     qs[k][4r + c] = qs[4k + c] of row r
 *
 * so 32-bit lane r of the 64-byte vector qs[k] is row r's code bytes 4k .. 4k + 3, k = 2s + h
 * for sub-block s (values 16s .. 16s + 15): their low nibbles are values 16s + 4h .. + 3 and
 * their high nibbles values 16s + 8 + 4h .. + 3 (the plain nibble order). One byte lookup
 * (vpermb) of the nibbles and one vpdpbusd against 4 broadcast activations give the 16
 * rows' partial sums of 4 consecutive inputs in 16 int32 lanes.
 *
 * A canonical scale byte c is the plain byte with GGUF's reading folded in: 0x7f (read as
 * 0) becomes 0, and bit 7 (ignored) is cleared, so 0xff becomes 0x7f (480). c << 7 is then
 * the binary16 of the scale's value times 2^-8 for every c, which vcvtph2ps widens exactly.
 * The 64 bytes lie so that byte unpacks with zero and two 256-bit converts give the four
 * sub-blocks' 16-row vectors in order (NVFP4_R16_DPOS).
 *
 * Rows after the last whole group keep the plain NVFP4 layout.
 *
 * Both kernel rows take the same float steps per (weight row, activation row) pair and
 * Q8_0 block (sub-blocks 2q and 2q + 1, activation scale d_a), so they give the same bits:
 * the sub-blocks' exact integer dots i0, i1, their scales w0, w1 (the UE4M3 values times
 * 2^-8, exact), p = fma(i1, w1, i0 * w0) (the product exact, one rounding), then
 * acc = fma(p, 128 d_a, acc) (128 d_a exact; UE4M3 / 2 = w * 128 is GGUF's half scale). */
#ifndef SPLASH_FORMATS_NVFP4_R16_H
#define SPLASH_FORMATS_NVFP4_R16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/nvfp4/nvfp4.h"
#include "splash/format.h"

#define NVFP4_R16_ROWS 16

struct nvfp4_r16_block {
    uint8_t d[4 * NVFP4_R16_ROWS];
    uint8_t qs[8][4 * NVFP4_R16_ROWS];
};
_Static_assert(sizeof(struct nvfp4_r16_block) == NVFP4_R16_ROWS * sizeof(struct nvfp4_block),
               "an NVFP4_R16 block takes exactly the bytes of 16 NVFP4 blocks");

/* Byte of d holding sub-block s's scale of row r: 128-bit lane 2 (s % 2) + r / 8, its low
 * 8 bytes for s < 2 (vpunpcklbw takes them), its high 8 for s >= 2 (vpunpckhbw). */
#define NVFP4_R16_DPOS(s, r) (16 * (2 * ((s) % 2) + (r) / 8) + 8 * ((s) / 2) + (r) % 8)

/* The canonical scale byte of a plain UE4M3 byte, and back (a byte of the same value). */
static inline uint8_t nvfp4_r16_canon(uint8_t x)
{
    return x == 0x7f ? 0 : (uint8_t)(x & 0x7f);
}

static inline uint8_t nvfp4_r16_uncanon(uint8_t c)
{
    return c == 0x7f ? 0xff : c;
}

/* A canonical byte's UE4M3 value times 2^-8 (the binary16 c << 7), exact:
 * (1 + m/8) 2^(e-8-7), or m 2^-17 when e is 0. */
static inline float nvfp4_r16_scale(uint8_t c)
{
    uint32_t e = (c >> 3) & 0xfu, m = c & 0x7u;
    if (e == 0)
        return (float)m * 0x1p-17f;
    uint32_t bits = (e + 112u) << 23 | m << 20;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Row r's plain NVFP4 block of an NVFP4_R16 block (the repack's inverse up to the scale
 * bytes' spelling: the same values). */
static inline void nvfp4_r16_unpack_row(const struct nvfp4_r16_block *b, int r,
                                        struct nvfp4_block *o)
{
    for (int s = 0; s < 4; s++)
        o->d[s] = nvfp4_r16_uncanon(b->d[NVFP4_R16_DPOS(s, r)]);
    for (int k = 0; k < 8; k++)
        memcpy(o->qs + 4 * k, &b->qs[k][4 * r], 4);
}

/* The descriptor (plugin.c lists it) and the repack NVFP4's descriptor names. */
extern const struct splash_format_type nvfp4_r16_type;
void nvfp4_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst);

/* mul_rows of NVFP4_R16 weights (struct splash_kernel_row): whole groups of 16 rows, then
 * fewer than 16 plain NVFP4 rows at the matrix's end. */
void nvfp4_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride);
#if defined(__x86_64__)
void nvfp4_r16_mul_q8_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride);
#endif

#endif
