/* GGUF MXFP4 blocks (OCP microscaling FP4: E2M1 codes, one E8M0 scale per 32)
 * and the kernel rows the plugin's ISA files provide. */
#ifndef SPLASH_FORMATS_MXFP4_H
#define SPLASH_FORMATS_MXFP4_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/q8_blocks.h"

#define MXFP4_QK 32

/* Element j (j < 16) is the low nibble of qs[j], element j + 16 its high nibble. */
struct mxfp4_block {
    uint8_t e;      /* E8M0 scale: 2^(e - 127); 0xff is NaN */
    uint8_t qs[16]; /* E2M1 codes */
};
_Static_assert(sizeof(struct mxfp4_block) == 17, "MXFP4 block is 17 bytes");

/* E2M1 values doubled, so every code is a small integer: the values the OCP MX
 * specification defines for the 16 FP4 codes, times two. The block scale is
 * halved to match, as GGUF readers do, which keeps dots exact integer sums. */
static const int8_t mxfp4_e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128): half the E8M0 value, bit-built (2^-128 and 2^-127 are subnormal). */
static inline float mxfp4_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Most activation rows one mul_rows pass keeps in registers. */
#define MXFP4_MAX_ACT_ROWS 8
/* Loops over the pass's activation rows must unroll for the accumulators to stay in
 * registers (GCC keeps an array it indexes in a loop in memory). */
#define MXFP4_UNROLL_ROWS _Pragma("GCC unroll 8")

/* Calls fn(nb, w_row, act_rows, act_stride, out, out_stride, NR) for every weight row
 * and every chunk of up to MXFP4_MAX_ACT_ROWS activation rows, NR a constant. */
#define MXFP4_MUL_ROWS_DRIVER(fn, nb, w, w_stride, n_w, act, act_stride, n_act, out, out_stride)  \
    do {                                                                                           \
        for (int64_t j0_ = 0; j0_ < (n_act); j0_ += MXFP4_MAX_ACT_ROWS) {                          \
            int64_t left_ = (n_act) - j0_;                                                         \
            int nr_ = left_ < MXFP4_MAX_ACT_ROWS ? (int)left_ : MXFP4_MAX_ACT_ROWS;                \
            const char *a_ = (const char *)(act) + (size_t)j0_ * (act_stride);                     \
            for (int64_t i_ = 0; i_ < (n_w); i_++) {                                               \
                const void *w_ = (const char *)(w) + (size_t)i_ * (w_stride);                      \
                float *o_ = (out) + (size_t)j0_ * (out_stride) + (size_t)i_;                       \
                switch (nr_) {                                                                     \
                case 1: fn(nb, w_, a_, act_stride, o_, out_stride, 1); break;                      \
                case 2: fn(nb, w_, a_, act_stride, o_, out_stride, 2); break;                      \
                case 3: fn(nb, w_, a_, act_stride, o_, out_stride, 3); break;                      \
                case 4: fn(nb, w_, a_, act_stride, o_, out_stride, 4); break;                      \
                case 5: fn(nb, w_, a_, act_stride, o_, out_stride, 5); break;                      \
                case 6: fn(nb, w_, a_, act_stride, o_, out_stride, 6); break;                      \
                case 7: fn(nb, w_, a_, act_stride, o_, out_stride, 7); break;                      \
                default: fn(nb, w_, a_, act_stride, o_, out_stride, 8); break;                     \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define MXFP4_ROW_FNS(prefix)                                                                      \
    void prefix##_dot(int64_t n, float *s, const void *w_row, const void *act_row);                \
    void prefix##_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,                 \
                           const void *act, size_t act_stride, int64_t n_act, float *out,          \
                           size_t out_stride)

#if defined(__x86_64__)
MXFP4_ROW_FNS(mxfp4_q8_avx2);
MXFP4_ROW_FNS(mxfp4_q8_avx512vnni);
#endif

#endif
