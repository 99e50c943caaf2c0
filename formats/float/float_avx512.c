/* AVX-512 rows for F32, F16 (F16C widening) and BF16 (AVX512_BF16 vdpbf16ps).
 *
 * Two 16-lane accumulators per activation row whatever the number of rows in the
 * pass (bit-identical vec_dot and mul_rows); the tail is read with masked loads,
 * whose zero lanes add nothing. vdpbf16ps flushes subnormal inputs to zero, which
 * moves a dot by less than 2^-126 per product. */
#include <immintrin.h>

#include "formats/float/float_kernels.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __mmask16 tail_mask16(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

INLINE __mmask32 tail_mask32(int64_t left)
{
    return left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1u);
}

INLINE __m512 load_f32(const void *p, int64_t i, __mmask16 m)
{
    return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

INLINE __m512 load_f16(const void *p, int64_t i, __mmask16 m)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
}

/* 16 elements per vector (F32, F16): a and b are chunks i and i + 16 of 32. */
#define FLOAT_ROWS_AVX512(name, load)                                                              \
    INLINE void name(int64_t n, const void *w, const char *act, size_t act_stride, float *out,     \
                     size_t out_stride, const int nr)                                              \
    {                                                                                              \
        __m512 acc0[FLOAT_MAX_ACT_ROWS], acc1[FLOAT_MAX_ACT_ROWS];                                 \
        FLOAT_UNROLL_ROWS                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            acc0[r] = _mm512_setzero_ps();                                                         \
            acc1[r] = _mm512_setzero_ps();                                                         \
        }                                                                                          \
        for (int64_t i = 0; i < n; i += 32) {                                                      \
            __mmask16 m0 = tail_mask16(n - i);                                                     \
            __mmask16 m1 = n - i > 16 ? tail_mask16(n - i - 16) : 0;                               \
            __m512 w0 = load(w, i, m0), w1 = load(w, i + 16, m1);                                  \
            FLOAT_UNROLL_ROWS                                                                      \
            for (int r = 0; r < nr; r++) {                                                         \
                const char *a = act + (size_t)r * act_stride;                                      \
                acc0[r] = _mm512_fmadd_ps(w0, load(a, i, m0), acc0[r]);                            \
                acc1[r] = _mm512_fmadd_ps(w1, load(a, i + 16, m1), acc1[r]);                       \
            }                                                                                      \
        }                                                                                          \
        FLOAT_UNROLL_ROWS                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[(size_t)r * out_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));   \
    }

FLOAT_ROWS_AVX512(f32_rows, load_f32)
FLOAT_ROWS_AVX512(f16_rows, load_f16)

INLINE __m512bh load_bf16x32(const void *p, int64_t i, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, (const uint16_t *)p + i);
}

/* vdpbf16ps: 32 bf16 pairs per instruction, 64 elements per iteration. */
INLINE void bf16_rows(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                      size_t out_stride, const int nr)
{
    __m512 acc0[FLOAT_MAX_ACT_ROWS], acc1[FLOAT_MAX_ACT_ROWS];
    FLOAT_UNROLL_ROWS
    for (int r = 0; r < nr; r++) {
        acc0[r] = _mm512_setzero_ps();
        acc1[r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n; i += 64) {
        __mmask32 m0 = tail_mask32(n - i);
        __mmask32 m1 = n - i > 32 ? tail_mask32(n - i - 32) : 0;
        __m512bh w0 = load_bf16x32(w, i, m0), w1 = load_bf16x32(w, i + 32, m1);
        FLOAT_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const char *a = act + (size_t)r * act_stride;
            acc0[r] = _mm512_dpbf16_ps(acc0[r], w0, load_bf16x32(a, i, m0));
            acc1[r] = _mm512_dpbf16_ps(acc1[r], w1, load_bf16x32(a, i + 32, m1));
        }
    }
    FLOAT_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

#define FLOAT_ENTRY_POINTS(prefix, rows)                                                           \
    void prefix##_dot(int64_t n, float *s, const void *w_row, const void *act_row)                 \
    {                                                                                              \
        rows(n, w_row, act_row, 0, s, 0, 1);                                                       \
    }                                                                                              \
    void prefix##_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,                 \
                           const void *act, size_t act_stride, int64_t n_act, float *out,          \
                           size_t out_stride)                                                      \
    {                                                                                              \
        FLOAT_MUL_ROWS_DRIVER(rows, n, w, w_stride, n_w, act, act_stride, n_act, out,              \
                              out_stride);                                                         \
    }

FLOAT_ENTRY_POINTS(float_f32_avx512, f32_rows)
FLOAT_ENTRY_POINTS(float_f16_avx512, f16_rows)
FLOAT_ENTRY_POINTS(float_bf16_avx512bf16, bf16_rows)
