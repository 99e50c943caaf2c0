/* AVX2 FP8 E4M3 x F32 rows.
 *
 * E4M3 widens to binary16 exactly by moving bits: sign to bit 15, exponent and
 * mantissa (7 bits) up by 7. The binary16 number is the E4M3 value times 2^-8
 * for normals and subnormals alike (the exponent biases differ by 8), so F16C
 * converts it and the block scale carries the 2^8. One pair of accumulators per
 * block and one per activation row whatever the pass size. */
#include <immintrin.h>

#include "formats/nvfp4/nvfp4.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 E4M3 bytes as 16 binary16 values of value * 2^-8. */
INLINE __m256i e4m3_to_f16x16(const uint8_t *p)
{
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
    const __m256i s = _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8);
    const __m256i em = _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7f)), 7);
    return _mm256_or_si256(s, em);
}

INLINE void rows_avx2(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                      size_t out_stride, const int nr)
{
    const struct fp8_block *x = w;
    __m256 acc[NVFP4_MAX_ACT_ROWS];
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / FP8_QK; i++) {
        __m256 t0[NVFP4_MAX_ACT_ROWS], t1[NVFP4_MAX_ACT_ROWS];
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            t0[r] = _mm256_setzero_ps();
            t1[r] = _mm256_setzero_ps();
        }
        for (int j = 0; j < FP8_QK; j += 16) {
            const __m256i h = e4m3_to_f16x16(x[i].q + j);
            const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
            const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
            NVFP4_UNROLL_ROWS
            for (int r = 0; r < nr; r++) {
                const float *a = (const float *)(act + (size_t)r * act_stride) + i * FP8_QK + j;
                t0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a), t0[r]);
                t1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a + 8), t1[r]);
            }
        }
        const __m256 g = _mm256_set1_ps(x[i].g * 256.0f);
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++)
            acc[r] = _mm256_fmadd_ps(g, _mm256_add_ps(t0[r], t1[r]), acc[r]);
    }
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = hsum8(acc[r]);
}

void nvfp4_fp8_f32_avx2_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    rows_avx2(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4_fp8_f32_avx2_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                 const void *act, size_t act_stride, int64_t n_act, float *out,
                                 size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(rows_avx2, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
