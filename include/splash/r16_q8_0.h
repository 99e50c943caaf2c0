/* What every 16-row repacked (R16) AVX-512 kernel against Q8_0 activations shares: the
 * broadcast of 4 activation bytes, and the driver that walks a call's weight groups once
 * whatever the number of activation rows. Header only: each format plugin compiles its
 * own copy into its *_avx512.c (plugins link nothing of each other's), an out-of-tree
 * one from the installed header.
 *
 * A kernel defines its block type, its per-block activation data (prepared once per
 * call; most take struct splash_r16_q8_0_act), `PREPARE(y, n_q8_blocks, prep)` and
 * `TILE(b, nk, y, pp, nr, out, out_stride, first, prefetch)`: the 16 rows of one group over
 * nk weight blocks against nr <= SPLASH_R16_Q8_0_MAX_NR activation rows, `first` starting the
 * sums at 0 and later K chunks continuing them from out, so every (weight row, activation
 * row) pair takes the same float steps however the call is tiled. Then
 * SPLASH_R16_Q8_0_DEFINE_MUL defines the format's mul_rows. */
#ifndef SPLASH_R16_Q8_0_H
#define SPLASH_R16_Q8_0_H

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPLASH_R16_Q8_0_INLINE static inline __attribute__((always_inline))
#define SPLASH_R16_Q8_0_ROWS 16   /* weight rows per group */
#define SPLASH_R16_Q8_0_MAX_NR 8  /* activation rows per tile */
#define SPLASH_R16_Q8_0_PREP 2048 /* prepared activation blocks on the stack */

/* i & 15 for vpermb's 64 entries: a byte's low nibble. */
static const uint8_t splash_r16_nibble_lut[64] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 0,  1,  2,  3,  4,  5,
    6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
    12, 13, 14, 15, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
};

/* 4 activation bytes broadcast to every 32-bit lane (vpbroadcastd from memory). */
SPLASH_R16_Q8_0_INLINE __m512i splash_r16_q8_0_bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* A Q8_0 activation block as the kernels meet it: d, and `scale` times the block's sum,
 * the correction a code stored with an offset needs. */
struct splash_r16_q8_0_act {
    float d;
    int32_t c;
};

SPLASH_R16_Q8_0_INLINE void splash_r16_q8_0_prepare(const struct splash_q8_0_block *y, int64_t nk,
                                                    struct splash_r16_q8_0_act *p, int32_t scale)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < nk; i++) {
        /* sum(q + 128) of 8-byte quarters, then the whole block */
        const __m256i s =
            _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y[i].qs), k80),
                            _mm256_setzero_si256());
        __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
        p[i].d = _cvtsh_ss(y[i].d);
        p[i].c = scale * (_mm_cvtsi128_si32(t) - 32 * 128);
    }
}

/* Defines the mul_rows NAME of a format whose weight blocks (BLOCK_T, QK values) each meet
 * PER Q8_0 activation blocks, prepared as ACT_T by PREPARE and consumed by TILE; rows
 * after the last whole group are PLAIN's (the plain format's mul_rows). A call streaming
 * more than STREAM_BYTES of weights prefetches in its first tile of each group. One tile:
 * whole rows. More activation rows: all of them over K chunks of KC weight blocks, so a
 * group's chunk stays in L1 while every tile reads it (each weight is read once per call);
 * their prepared blocks go on the heap when the stack does not hold them, and without
 * the heap in batches of 8 rows (the same sums either way). */
#define SPLASH_R16_Q8_0_DEFINE_MUL(NAME, BLOCK_T, ACT_T, QK, PER, TILE, PREPARE, PLAIN, KC,        \
                                   STREAM_BYTES)                                                   \
    static void NAME##_run(const char *wb, size_t w_stride, int64_t n_full, int64_t k0,            \
                           int64_t nk, const void *act, size_t act_stride, int64_t j0, int64_t nj, \
                           const ACT_T *prep, float *out, size_t out_stride, int stream)           \
    {                                                                                              \
        for (int64_t g = 0; g < n_full; g += SPLASH_R16_Q8_0_ROWS) {                               \
            for (int64_t t = 0; t < nj; t += SPLASH_R16_Q8_0_MAX_NR) {                             \
                const int nr =                                                                     \
                    nj - t < SPLASH_R16_Q8_0_MAX_NR ? (int)(nj - t) : SPLASH_R16_Q8_0_MAX_NR;      \
                const struct splash_q8_0_block *y[SPLASH_R16_Q8_0_MAX_NR];                         \
                const ACT_T *pp[SPLASH_R16_Q8_0_MAX_NR];                                           \
                for (int r = 0; r < nr; r++) {                                                     \
                    y[r] = (const struct splash_q8_0_block *)((const char *)act +                  \
                                                              (size_t)(j0 + t + r) * act_stride) + \
                           (PER)*k0;                                                               \
                    pp[r] = prep + (size_t)(t + r) * (PER) * (size_t)nk;                           \
                }                                                                                  \
                const BLOCK_T *b = (const BLOCK_T *)(wb + (size_t)g * w_stride) + k0;              \
                float *o = out + (size_t)(j0 + t) * out_stride + g;                                \
                const int first = k0 == 0, pf = stream && t == 0;                                  \
                /* constant tile sizes and prefetch flags: each case compiles on its own */        \
                switch (nr) {                                                                      \
                case 1:                                                                            \
                    if (pf)                                                                        \
                        TILE(b, nk, y, pp, 1, o, out_stride, first, 1);                            \
                    else                                                                           \
                        TILE(b, nk, y, pp, 1, o, out_stride, first, 0);                            \
                    break;                                                                         \
                case 2:                                                                            \
                    TILE(b, nk, y, pp, 2, o, out_stride, first, 0);                                \
                    break;                                                                         \
                case 3:                                                                            \
                    TILE(b, nk, y, pp, 3, o, out_stride, first, 0);                                \
                    break;                                                                         \
                case 4:                                                                            \
                    TILE(b, nk, y, pp, 4, o, out_stride, first, 0);                                \
                    break;                                                                         \
                case 5:                                                                            \
                    TILE(b, nk, y, pp, 5, o, out_stride, first, 0);                                \
                    break;                                                                         \
                case 6:                                                                            \
                    TILE(b, nk, y, pp, 6, o, out_stride, first, 0);                                \
                    break;                                                                         \
                case 7:                                                                            \
                    TILE(b, nk, y, pp, 7, o, out_stride, first, 0);                                \
                    break;                                                                         \
                default:                                                                           \
                    if (pf)                                                                        \
                        TILE(b, nk, y, pp, SPLASH_R16_Q8_0_MAX_NR, o, out_stride, first, 1);       \
                    else                                                                           \
                        TILE(b, nk, y, pp, SPLASH_R16_Q8_0_MAX_NR, o, out_stride, first, 0);       \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    void NAME(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,             \
              size_t act_stride, int64_t n_act, float *out, size_t out_stride)                     \
    {                                                                                              \
        const int64_t nb = n / (QK);                                                               \
        const int64_t n_full = n_w / SPLASH_R16_Q8_0_ROWS * SPLASH_R16_Q8_0_ROWS;                  \
        const char *wb = w;                                                                        \
        const int stream = (size_t)n_full * w_stride > (STREAM_BYTES);                             \
        ACT_T stack[SPLASH_R16_Q8_0_PREP], *prep = stack;                                          \
        int64_t nj = n_act, kc = n_act <= SPLASH_R16_Q8_0_MAX_NR || nb <= (KC) ? nb : (KC);        \
        if (n_full && (uint64_t)n_act * (PER) * (uint64_t)kc > SPLASH_R16_Q8_0_PREP) {             \
            prep = malloc((size_t)n_act * (PER) * (size_t)kc * sizeof *prep);                      \
            if (!prep) {                                                                           \
                prep = stack;                                                                      \
                nj = SPLASH_R16_Q8_0_MAX_NR;                                                       \
                const int64_t fit = SPLASH_R16_Q8_0_PREP / ((PER)*SPLASH_R16_Q8_0_MAX_NR);         \
                kc = kc < fit ? kc : fit;                                                          \
            }                                                                                      \
        }                                                                                          \
        for (int64_t j0 = 0; n_full && j0 < n_act; j0 += nj) {                                     \
            const int64_t mj = n_act - j0 < nj ? n_act - j0 : nj;                                  \
            for (int64_t k0 = 0; k0 < nb; k0 += kc) {                                              \
                const int64_t nk = nb - k0 < kc ? nb - k0 : kc;                                    \
                for (int64_t j = 0; j < mj; j++)                                                   \
                    PREPARE((const struct splash_q8_0_block *)((const char *)act +                 \
                                                               (size_t)(j0 + j) * act_stride) +    \
                                (PER)*k0,                                                          \
                            (PER)*nk, prep + (size_t)j * (PER) * (size_t)nk);                      \
                NAME##_run(wb, w_stride, n_full, k0, nk, act, act_stride, j0, mj, prep, out,       \
                           out_stride, stream);                                                    \
            }                                                                                      \
        }                                                                                          \
        if (prep != stack)                                                                         \
            free(prep);                                                                            \
        if (n_full < n_w)                                                                          \
            PLAIN(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act, act_stride,      \
                  n_act, out + n_full, out_stride);                                                \
    }

#endif
