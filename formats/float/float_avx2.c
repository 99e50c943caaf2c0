/* AVX2 + FMA + F16C rows for F32, F16 and BF16 weights.
 *
 * Every activation row keeps two 8-lane accumulators (even and odd 8-element
 * chunks) whatever the number of rows in the pass, so mul_rows and vec_dot give
 * bit-identical results for the same pair of rows. */
#include <immintrin.h>

#include "formats/float/float_kernels.h"
#include "splash/fp.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE __m256 load_f32(const void *p, int64_t i)
{
    return _mm256_loadu_ps((const float *)p + i);
}

INLINE __m256 load_f16(const void *p, int64_t i)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}

INLINE __m256 load_bf16(const void *p, int64_t i)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

INLINE float elem_f32(const void *p, int64_t i)
{
    return ((const float *)p)[i];
}

INLINE float elem_f16(const void *p, int64_t i)
{
    return splash_fp16_to_fp32(((const uint16_t *)p)[i]);
}

INLINE float elem_bf16(const void *p, int64_t i)
{
    return splash_bf16_to_fp32(((const uint16_t *)p)[i]);
}

/* One weight row against nr activation rows; load/elem convert one storage type. */
#define FLOAT_ROWS_AVX2(name, load, elem)                                                          \
    INLINE void name(int64_t n, const void *w, const char *act, size_t act_stride, float *out,     \
                     size_t out_stride, const int nr)                                              \
    {                                                                                              \
        __m256 acc0[FLOAT_MAX_ACT_ROWS], acc1[FLOAT_MAX_ACT_ROWS];                                 \
        FLOAT_UNROLL_ROWS                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            acc0[r] = _mm256_setzero_ps();                                                         \
            acc1[r] = _mm256_setzero_ps();                                                         \
        }                                                                                          \
        int64_t i = 0;                                                                             \
        for (; i + 16 <= n; i += 16) {                                                             \
            __m256 w0 = load(w, i), w1 = load(w, i + 8);                                           \
            FLOAT_UNROLL_ROWS                                                                      \
            for (int r = 0; r < nr; r++) {                                                         \
                const char *a = act + (size_t)r * act_stride;                                      \
                acc0[r] = _mm256_fmadd_ps(w0, load(a, i), acc0[r]);                                \
                acc1[r] = _mm256_fmadd_ps(w1, load(a, i + 8), acc1[r]);                            \
            }                                                                                      \
        }                                                                                          \
        FLOAT_UNROLL_ROWS                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            const char *a = act + (size_t)r * act_stride;                                          \
            float s = hsum8(_mm256_add_ps(acc0[r], acc1[r]));                                      \
            for (int64_t k = i; k < n; k++)                                                        \
                s += elem(w, k) * elem(a, k);                                                      \
            out[(size_t)r * out_stride] = s;                                                       \
        }                                                                                          \
    }

FLOAT_ROWS_AVX2(f32_rows, load_f32, elem_f32)
FLOAT_ROWS_AVX2(f16_rows, load_f16, elem_f16)
FLOAT_ROWS_AVX2(bf16_rows, load_bf16, elem_bf16)

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

FLOAT_ENTRY_POINTS(float_f32_avx2, f32_rows)
FLOAT_ENTRY_POINTS(float_f16_avx2, f16_rows)
FLOAT_ENTRY_POINTS(float_bf16_avx2, bf16_rows)
