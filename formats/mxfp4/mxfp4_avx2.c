/* AVX2 MXFP4 x Q8_0 rows: a byte shuffle maps the 32 codes of a block to the
 * doubled E2M1 integers, maddubs/madd form the integer dot, one FMA per block
 * applies the two scales. Each activation row has one accumulator whatever the
 * number of rows in the pass, so vec_dot and mul_rows agree bit for bit. */
#include <immintrin.h>

#include "formats/mxfp4/mxfp4.h"

#define INLINE static inline __attribute__((always_inline))

INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void rows_avx2(int64_t nb, const void *w, const char *act, size_t act_stride, float *out,
                      size_t out_stride, const int nr)
{
    const struct mxfp4_block *x = w;
    const __m128i lut = _mm_loadu_si128((const __m128i *)mxfp4_e2m1_x2);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MXFP4_MAX_ACT_ROWS];
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(q, m4));
        const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
        const __m256i wq = _mm256_set_m128i(hi, lo); /* elements 0..31 */
        const __m256i wabs = _mm256_sign_epi8(wq, wq);
        const float dw = mxfp4_e8m0_half(x[i].e);
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)(act + (size_t)r * act_stride) + i;
            const __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);
            const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, wq));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(y->d) * dw);
            acc[r] = _mm256_fmadd_ps(d, p, acc[r]);
        }
    }
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = hsum8(acc[r]);
}

void mxfp4_q8_avx2_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    rows_avx2(n / MXFP4_QK, w_row, act_row, 0, s, 0, 1);
}

void mxfp4_q8_avx2_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                            const void *act, size_t act_stride, int64_t n_act, float *out,
                            size_t out_stride)
{
    MXFP4_MUL_ROWS_DRIVER(rows_avx2, n / MXFP4_QK, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
