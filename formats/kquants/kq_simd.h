/* Pieces shared by the SIMD files: the register-blocked mul_rows driver and
 * fp16 scalars through F16C. Included only from *_avx2.c / *_avx512.c. */
#ifndef SPLASH_KQUANTS_SIMD_H
#define SPLASH_KQUANTS_SIMD_H

#include <immintrin.h>
#include <string.h>

#include "formats/kquants/kq_common.h"

#define KQ_MAX_NR 8 /* activation rows one pass over a weight row serves */
/* Bytes ahead of the current block that the mat-vec tiles prefetch in each weight row. */
#define KQ_PREFETCH 1024

#define KQ_INLINE static inline __attribute__((always_inline))
/* Loops over a tile's rows must unroll for its accumulators to stay in registers. */
#define KQ_UNROLL _Pragma("GCC unroll 8")

static inline float kq_h2f_fast(uint16_t h)
{
    return _cvtsh_ss(h);
}

#if defined(__AVX512F__)
/* 4 bytes at p broadcast to every int32 lane: the activation operand of a vpdpbusd
 * against 16 interleaved weight rows (compilers make it an embedded broadcast). */
KQ_INLINE __m512i kq_bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}
#endif

/* A kernel `name(n, w_row, act, act_stride, nr, out, out_stride)` computes nr
 * dot products of one weight row with nr activation rows. These wrappers make
 * the vec_dot (nr = 1) and a mul_rows that hands it up to KQ_MAX_NR activation
 * rows per pass, each nr a compile-time constant so accumulators stay in
 * registers. */
#define KQ_DEFINE_DOT_AND_MUL(dot_fn, mul_fn, kernel)                                              \
    void dot_fn(int64_t n, float *s, const void *w_row, const void *act_row)                       \
    {                                                                                              \
        kernel(n, w_row, act_row, 0, 1, s, 0);                                                     \
    }                                                                                              \
    void mul_fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,           \
                size_t act_stride, int64_t n_act, float *out, size_t out_stride)                   \
    {                                                                                              \
        for (int64_t i = 0; i < n_w; i++) {                                                        \
            const void *wr = (const char *)w + i * w_stride;                                       \
            for (int64_t j = 0; j < n_act; j += KQ_MAX_NR) {                                       \
                const char *a = (const char *)act + j * act_stride;                                \
                float *o = out + j * out_stride + i;                                               \
                switch (n_act - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(n_act - j)) {                   \
                case 1:                                                                            \
                    kernel(n, wr, a, act_stride, 1, o, out_stride);                                \
                    break;                                                                         \
                case 2:                                                                            \
                    kernel(n, wr, a, act_stride, 2, o, out_stride);                                \
                    break;                                                                         \
                case 3:                                                                            \
                    kernel(n, wr, a, act_stride, 3, o, out_stride);                                \
                    break;                                                                         \
                case 4:                                                                            \
                    kernel(n, wr, a, act_stride, 4, o, out_stride);                                \
                    break;                                                                         \
                case 5:                                                                            \
                    kernel(n, wr, a, act_stride, 5, o, out_stride);                                \
                    break;                                                                         \
                case 6:                                                                            \
                    kernel(n, wr, a, act_stride, 6, o, out_stride);                                \
                    break;                                                                         \
                case 7:                                                                            \
                    kernel(n, wr, a, act_stride, 7, o, out_stride);                                \
                    break;                                                                         \
                default:                                                                           \
                    kernel(n, wr, a, act_stride, 8, o, out_stride);                                \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* A tile kernel `tile(n, w, w_stride, NW, act, act_stride, NR, out, out_stride)` computes
 * the NW x NR dot products of NW weight rows with NR activation rows into
 * out[r * out_stride + i]; NW and NR are compile-time constants at every call. Each
 * pair's operations do not depend on NW or NR, so every tile gives vec_dot's result
 * bit for bit. mul_rows hands a single activation row KQ_TILE_NW weight rows at a
 * time (the mat-vec case: activation loads and scale work are shared, and the rows'
 * independent chains overlap), and several activation rows one weight row at a time. */
#define KQ_TILE_NW 4

/* Prefetches into L2 the bytes one tile further on that a tile's step i reads: the
 * rows of a mat-vec chunk are consecutive, so this streams the chunk (and the start
 * of the next one, usually the same thread's) ahead of the loads. */
KQ_INLINE void kq_prefetch_next_tile(const void *w, size_t w_stride, int nw, int64_t i,
                                     size_t block_bytes)
{
    const char *p = (const char *)w + (size_t)nw * w_stride + (size_t)i * (size_t)nw * block_bytes;
    KQ_UNROLL for (size_t l = 0; l < (size_t)nw * block_bytes; l += 64)
        _mm_prefetch(p + l, _MM_HINT_T1);
}

#define KQ_DEFINE_TILED_DOT_AND_MUL(dot_fn, mul_fn, tile)                                          \
    void dot_fn(int64_t n, float *s, const void *w_row, const void *act_row)                       \
    {                                                                                              \
        tile(n, w_row, 0, 1, act_row, 0, 1, s, 0);                                                 \
    }                                                                                              \
    void mul_fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,           \
                size_t act_stride, int64_t n_act, float *out, size_t out_stride)                   \
    {                                                                                              \
        const char *wb = w;                                                                        \
        if (n_act == 1) {                                                                          \
            int64_t i = 0;                                                                         \
            for (; i + KQ_TILE_NW <= n_w; i += KQ_TILE_NW)                                         \
                tile(n, wb + i * w_stride, w_stride, KQ_TILE_NW, act, 0, 1, out + i, 0);           \
            for (; i < n_w; i++)                                                                   \
                tile(n, wb + i * w_stride, w_stride, 1, act, 0, 1, out + i, 0);                    \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < n_act; j += KQ_MAX_NR) {                                           \
            const char *a = (const char *)act + j * act_stride;                                    \
            const int nr = n_act - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(n_act - j);                  \
            for (int64_t i = 0; i < n_w; i++) {                                                    \
                const char *wr = wb + i * w_stride;                                                \
                float *o = out + j * out_stride + i;                                               \
                switch (nr) {                                                                      \
                case 1:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 1, o, out_stride);                     \
                    break;                                                                         \
                case 2:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 2, o, out_stride);                     \
                    break;                                                                         \
                case 3:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 3, o, out_stride);                     \
                    break;                                                                         \
                case 4:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 4, o, out_stride);                     \
                    break;                                                                         \
                case 5:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 5, o, out_stride);                     \
                    break;                                                                         \
                case 6:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 6, o, out_stride);                     \
                    break;                                                                         \
                case 7:                                                                            \
                    tile(n, wr, w_stride, 1, a, act_stride, 7, o, out_stride);                     \
                    break;                                                                         \
                default:                                                                           \
                    tile(n, wr, w_stride, 1, a, act_stride, 8, o, out_stride);                     \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#endif
