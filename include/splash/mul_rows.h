/* A helper for format plugins: the mul_rows loop over weight rows and chunks of
 * activation rows, calling a kernel whose activation-row count is a compile-time
 * constant so its per-row accumulators stay in registers. Header-only. */
#ifndef SPLASH_MUL_ROWS_H
#define SPLASH_MUL_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* Most activation rows one pass keeps in registers. */
#define SPLASH_MAX_ACT_ROWS 8
/* Loops over a pass's activation rows must unroll for the accumulators to stay in
 * registers (GCC keeps an array it indexes in a loop in memory). */
#define SPLASH_UNROLL_ROWS _Pragma("GCC unroll 8")

/* Calls fn(n, w_row, act_rows, act_stride, out, out_stride, NR) for every weight row and
 * every chunk of up to SPLASH_MAX_ACT_ROWS activation rows, NR a compile-time constant. */
#define SPLASH_MUL_ROWS_DRIVER(fn, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride)  \
    do {                                                                                           \
        for (int64_t j0_ = 0; j0_ < (n_act); j0_ += SPLASH_MAX_ACT_ROWS) {                         \
            int64_t left_ = (n_act) - j0_;                                                         \
            int nr_ = left_ < SPLASH_MAX_ACT_ROWS ? (int)left_ : SPLASH_MAX_ACT_ROWS;              \
            const char *a_ = (const char *)(act) + (size_t)j0_ * (act_stride);                     \
            for (int64_t i_ = 0; i_ < (n_w); i_++) {                                               \
                const void *w_ = (const char *)(w) + (size_t)i_ * (w_stride);                      \
                float *o_ = (out) + (size_t)j0_ * (out_stride) + (size_t)i_;                       \
                switch (nr_) {                                                                     \
                case 1: fn(n, w_, a_, act_stride, o_, out_stride, 1); break;                       \
                case 2: fn(n, w_, a_, act_stride, o_, out_stride, 2); break;                       \
                case 3: fn(n, w_, a_, act_stride, o_, out_stride, 3); break;                       \
                case 4: fn(n, w_, a_, act_stride, o_, out_stride, 4); break;                       \
                case 5: fn(n, w_, a_, act_stride, o_, out_stride, 5); break;                       \
                case 6: fn(n, w_, a_, act_stride, o_, out_stride, 6); break;                       \
                case 7: fn(n, w_, a_, act_stride, o_, out_stride, 7); break;                       \
                default: fn(n, w_, a_, act_stride, o_, out_stride, 8); break;                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Declares a kernel row's pair of functions: PREFIX_dot and PREFIX_mul_rows. */
#define SPLASH_ROW_FNS(prefix)                                                                     \
    void prefix##_dot(int64_t n, float *s, const void *w_row, const void *act_row);                \
    void prefix##_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,                 \
                           const void *act, size_t act_stride, int64_t n_act, float *out,          \
                           size_t out_stride)

#endif
