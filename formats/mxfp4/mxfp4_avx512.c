/* AVX-512 VNNI MXFP4 x Q8_0 rows, two blocks per 512-bit vector.
 *
 * vpdpbusd multiplies unsigned by signed bytes, so the shuffle table holds the
 * magnitudes of the doubled E2M1 values and the code's sign bit negates the
 * activation byte instead (Q8_0 bytes lie in [-127, 127], so negation is exact).
 * Lanes 0..7 carry the even block, 8..15 the odd one; one FMA applies both blocks'
 * scales. One accumulator per activation row whatever the pass size. */
#include <immintrin.h>

#include "formats/mxfp4/mxfp4.h"

#define INLINE static inline __attribute__((always_inline))

/* |doubled E2M1| per code: the OCP MX FP4 magnitudes times two. */
static const int8_t mxfp4_abs_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};

INLINE __m512i act_pair(const struct q8_0_block *y, int both)
{
    __m256i a0 = _mm256_loadu_si256((const __m256i *)y[0].qs);
    __m256i a1 = both ? _mm256_loadu_si256((const __m256i *)y[1].qs) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
}

INLINE void rows_avx512(int64_t nb, const void *w, const char *act, size_t act_stride, float *out,
                        size_t out_stride, const int nr)
{
    const struct mxfp4_block *x = w;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_abs_x2));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i sign = _mm512_set1_epi8(0x08);
    /* 128-bit lanes: codes of block 0 (low nibbles, high nibbles), block 1 likewise */
    const __m512i spread = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
    const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    __m512 acc[MXFP4_MAX_ACT_ROWS];
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int both = i + 1 < nb;
        const __m128i q0 = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m128i q1 =
            both ? _mm_loadu_si128((const __m128i *)x[i + 1].qs) : _mm_setzero_si128();
        const __m512i q = _mm512_castsi256_si512(_mm256_set_m128i(q1, q0));
        const __m512i codes =
            _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(spread, q), shift), m4);
        const __m512i wabs = _mm512_shuffle_epi8(lut, codes);
        const __mmask64 neg = _mm512_test_epi8_mask(codes, sign);
        const float dw0 = mxfp4_e8m0_half(x[i].e);
        const float dw1 = both ? mxfp4_e8m0_half(x[i + 1].e) : 0.0f;
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const struct q8_0_block *y =
                (const struct q8_0_block *)(act + (size_t)r * act_stride) + i;
            __m512i a = act_pair(y, both);
            a = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
            const __m512 p =
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, a));
            const float d1 = both ? _cvtsh_ss(y[1].d) * dw1 : 0.0f;
            const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(y[0].d) * dw0),
                                                _mm256_set1_ps(d1), 1);
            acc[r] = _mm512_fmadd_ps(d, p, acc[r]);
        }
    }
    MXFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

void mxfp4_q8_avx512vnni_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    rows_avx512(n / MXFP4_QK, w_row, act_row, 0, s, 0, 1);
}

void mxfp4_q8_avx512vnni_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                  const void *act, size_t act_stride, int64_t n_act, float *out,
                                  size_t out_stride)
{
    MXFP4_MUL_ROWS_DRIVER(rows_avx512, n / MXFP4_QK, w, w_stride, n_w, act, act_stride, n_act,
                          out, out_stride);
}
