/* SIMD kernel rows of the i-quant and Q1_0 formats (x86-64 only). Each vec_dot computes
 * the same integer block sums as the scalar reference and combines them with the same
 * float operations in the same order, so results match the reference bit for bit.
 * mul_rows decodes each weight block once for up to 8 activation rows. */
#ifndef SPLASH_KQUANTS_IQ_SIMD_H
#define SPLASH_KQUANTS_IQ_SIMD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)

/* Declares <fmt>_dot_<act>_<isa> and <fmt>_mul_rows_<act>_<isa>. */
#define KQ_IQ_DECLARE_ROW(fmt, act, isa)                                                           \
    void fmt##_dot_##act##_##isa(int64_t n, float *s, const void *w_row, const void *act_row);     \
    void fmt##_mul_rows_##act##_##isa(int64_t n, const void *w, size_t w_stride, int64_t n_w,      \
                                      const void *act, size_t act_stride, int64_t n_act,           \
                                      float *out, size_t out_stride)

KQ_IQ_DECLARE_ROW(iq1s, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq1m, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq2xxs, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq2xs, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq2s, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq3xxs, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq3s, q8k, avx2);
KQ_IQ_DECLARE_ROW(iq4nl, q80, avx2);
KQ_IQ_DECLARE_ROW(iq4xs, q8k, avx2);
KQ_IQ_DECLARE_ROW(q1_0, q80, avx2);

KQ_IQ_DECLARE_ROW(iq4nl, q80, avx512);
KQ_IQ_DECLARE_ROW(iq4xs, q8k, avx512);

#endif

#endif
