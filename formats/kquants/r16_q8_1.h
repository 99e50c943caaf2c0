/* What the 16-row repacked AVX-512 kernels against Q8_1 activations (Q4_1_R16, Q5_1_R16)
 * share: the activation blocks' scales converted once per call, and the driver that walks
 * the call's weight groups once with tiles of up to R16_Q8_1_MAX_NR activation rows.
 *
 * A kernel defines its block type and
 * `TILE(b, nb, y, pp, nr, out, out_stride, prefetch, conv)`: the 16 rows of one group over
 * all nb blocks against nr activation rows (prepared scales pp[r], or with conv the
 * scales converted in the tile: the same values), then R16_Q8_1_DEFINE_MUL defines its
 * mul_rows. */
#ifndef SPLASH_FORMATS_KQUANTS_R16_Q8_1_H
#define SPLASH_FORMATS_KQUANTS_R16_Q8_1_H

#include <stdint.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"

#define R16_Q8_1_ROWS 16
/* activation rows of a tile: their 2 x 9 totals, scales, the code vectors of one qs line
 * and the constants fill the 32 vector registers (4 rows spill) */
#define R16_Q8_1_MAX_NR 2
#define R16_Q8_1_PREP 2048 /* (d, s) pairs on the stack; more go on the heap */

/* One activation block's d and s = d * sum(qs), as floats. */
struct r16_q8_1_act {
    float d, s;
};

static inline void r16_q8_1_prepare(const struct q8_1_block *y, int64_t nk, struct r16_q8_1_act *p)
{
    for (int64_t i = 0; i < nk; i++) {
        p[i].d = kq_h2f(y[i].d);
        p[i].s = kq_h2f(y[i].s);
    }
}

/* Defines the mul_rows NAME of a format with BLOCK_T blocks of QK values, its tiles TILE
 * and its plain rows PLAIN for the rows after the last whole group. Every activation
 * row's scales are converted once (so each group is read from memory once per call), on
 * the stack or the heap; without either, the tiles convert them. A call streaming more
 * than STREAM_BYTES of weights prefetches in its first tile of each group. */
#define R16_Q8_1_DEFINE_MUL(NAME, BLOCK_T, QK, TILE, PLAIN, STREAM_BYTES)                          \
    static void NAME##_run(const char *wb, size_t w_stride, int64_t n_full, int64_t nb,            \
                           const void *act, size_t act_stride, int64_t n_act,                      \
                           const struct r16_q8_1_act *prep, float *out, size_t out_stride,         \
                           int stream)                                                             \
    {                                                                                              \
        for (int64_t g = 0; g < n_full; g += R16_Q8_1_ROWS) {                                      \
            const BLOCK_T *b = (const BLOCK_T *)(wb + (size_t)g * w_stride);                       \
            for (int64_t j = 0; j < n_act; j += R16_Q8_1_MAX_NR) {                                 \
                const int nr = n_act - j < R16_Q8_1_MAX_NR ? (int)(n_act - j) : R16_Q8_1_MAX_NR;   \
                const struct q8_1_block *y[R16_Q8_1_MAX_NR];                                       \
                const struct r16_q8_1_act *pp[R16_Q8_1_MAX_NR] = {NULL};                           \
                for (int r = 0; r < nr; r++) {                                                     \
                    y[r] = (const struct q8_1_block *)((const char *)act +                         \
                                                       (size_t)(j + r) * act_stride);              \
                    if (prep)                                                                      \
                        pp[r] = prep + (size_t)(j + r) * (size_t)nb;                               \
                }                                                                                  \
                float *o = out + (size_t)j * out_stride + g;                                       \
                const int pf = stream && j == 0;                                                   \
                if (!prep) {                                                                       \
                    for (int r = 0; r < nr; r++)                                                   \
                        TILE(b, nb, y + r, pp, 1, o + (size_t)r * out_stride, out_stride, 0, 1);   \
                } else if (nr == 1 && pf) {                                                        \
                    TILE(b, nb, y, pp, 1, o, out_stride, 1, 0);                                    \
                } else if (nr == 1) {                                                              \
                    TILE(b, nb, y, pp, 1, o, out_stride, 0, 0);                                    \
                } else if (pf) {                                                                   \
                    TILE(b, nb, y, pp, 2, o, out_stride, 1, 0);                                    \
                } else {                                                                           \
                    TILE(b, nb, y, pp, 2, o, out_stride, 0, 0);                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    void NAME(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,             \
              size_t act_stride, int64_t n_act, float *out, size_t out_stride)                     \
    {                                                                                              \
        const int64_t nb = n / (QK);                                                               \
        const int64_t n_full = n_w / R16_Q8_1_ROWS * R16_Q8_1_ROWS;                                \
        const char *wb = w;                                                                        \
        const int stream = (size_t)n_full * w_stride > (STREAM_BYTES);                             \
        struct r16_q8_1_act stack[R16_Q8_1_PREP], *prep = NULL;                                    \
        if (n_full && (uint64_t)n_act * (uint64_t)nb <= R16_Q8_1_PREP)                             \
            prep = stack;                                                                          \
        else if (n_full)                                                                           \
            prep = malloc((size_t)n_act * (size_t)nb * sizeof *prep);                              \
        for (int64_t j = 0; prep && j < n_act; j++)                                                \
            r16_q8_1_prepare(                                                                      \
                (const struct q8_1_block *)((const char *)act + (size_t)j * act_stride), nb,       \
                prep + (size_t)j * (size_t)nb);                                                    \
        if (n_full)                                                                                \
            NAME##_run(wb, w_stride, n_full, nb, act, act_stride, n_act, prep, out, out_stride,    \
                       stream);                                                                    \
        if (prep != stack)                                                                         \
            free(prep);                                                                            \
        if (n_full < n_w)                                                                          \
            PLAIN(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act, act_stride,      \
                  n_act, out + n_full, out_stride);                                                \
    }

#endif
