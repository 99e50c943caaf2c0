/* AVX-512 FP8 E4M3 x F32 rows: the AVX2 rows' bit move (E4M3 -> binary16 of value
 * times 2^-8, see nvfp4_fp8_avx2.c) on 32 values at a time. One pair of
 * accumulators per block and one per activation row whatever the pass size. */
#include <immintrin.h>

#include "formats/nvfp4/nvfp4.h"

#define INLINE static inline __attribute__((always_inline))

/* 32 E4M3 bytes as 32 binary16 values of value * 2^-8. */
INLINE __m512i e4m3_to_f16x32(const uint8_t *p)
{
    const __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
    const __m512i s = _mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x80)), 8);
    const __m512i em = _mm512_slli_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7f)), 7);
    return _mm512_or_si512(s, em);
}

INLINE void rows_avx512(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                        size_t out_stride, const int nr)
{
    const struct fp8_block *x = w;
    __m512 acc[NVFP4_MAX_ACT_ROWS];
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / FP8_QK; i++) {
        __m512 t0[NVFP4_MAX_ACT_ROWS], t1[NVFP4_MAX_ACT_ROWS];
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            t0[r] = _mm512_setzero_ps();
            t1[r] = _mm512_setzero_ps();
        }
        for (int j = 0; j < FP8_QK; j += 32) {
            const __m512i h = e4m3_to_f16x32(x[i].q + j);
            const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
            const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
            NVFP4_UNROLL_ROWS
            for (int r = 0; r < nr; r++) {
                const float *a = (const float *)(act + (size_t)r * act_stride) + i * FP8_QK + j;
                t0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(a), t0[r]);
                t1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(a + 16), t1[r]);
            }
        }
        const __m512 g = _mm512_set1_ps(x[i].g * 256.0f);
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++)
            acc[r] = _mm512_fmadd_ps(g, _mm512_add_ps(t0[r], t1[r]), acc[r]);
    }
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

void nvfp4_fp8_f32_avx512_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    rows_avx512(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4_fp8_f32_avx512_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                   const void *act, size_t act_stride, int64_t n_act, float *out,
                                   size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(rows_avx512, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
