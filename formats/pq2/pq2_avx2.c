/* Q2_0 / PQ2_0 x Q8_0 kernels for AVX2. Codes are unpacked to bytes in element
 * order, then Σ (q - 1) a = Σ q a - Σ a per Q8_0 block with maddubs (exact in int16:
 * |3 * 127 * 2| fits). vec_dot is mul_rows for one row, so both sum in the same order. */
#include <immintrin.h>

#include "formats/pq2/pq2.h"
#include "splash/fp.h"

#define PQ2_MAX_ROWS 8

static inline float pq2_hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 bytes of codes -> 32 codes in element order (element 4i + k = bits 2k of byte i). */
static inline __m256i pq2_decode32_avx2(const uint8_t *qs)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)qs);
    const __m128i m = _mm_set1_epi8(3);
    const __m128i p0 = _mm_and_si128(b, m);
    const __m128i p1 = _mm_and_si128(_mm_srli_epi16(b, 2), m);
    const __m128i p2 = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    const __m128i p3 = _mm_and_si128(_mm_srli_epi16(b, 6), m);
    const __m128i p01 = _mm_unpacklo_epi8(p0, p1);
    const __m128i p23 = _mm_unpacklo_epi8(p2, p3);
    return _mm256_set_m128i(_mm_unpackhi_epi16(p01, p23), _mm_unpacklo_epi16(p01, p23));
}

/* nr activation rows (a compile-time constant after inlining) against one weight row. */
static inline __attribute__((always_inline)) void
pq2_rows_avx2(int qk, int nr, int64_t n, const uint8_t *w, const uint8_t *act, size_t act_stride,
              float *out, size_t out_stride)
{
    const int sub = qk / SPLASH_QK8_0;
    const size_t block_bytes = (size_t)(2 + qk / 4);
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[PQ2_MAX_ROWS];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk; i++, w += block_bytes) {
        const float dw = _cvtsh_ss((unsigned short)(w[0] | (w[1] << 8)));
        for (int k = 0; k < sub; k++) {
            const __m256i q = pq2_decode32_avx2(w + 2 + 8 * k);
            for (int r = 0; r < nr; r++) {
                const struct splash_q8_0_block *y =
                    (const struct splash_q8_0_block *)(const void *)(act + (size_t)r * act_stride) +
                    i * sub + k;
                const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)y->qs);
                const __m256i d16 =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(ones8, a));
                const __m256 d32 = _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, ones16));
                acc[r] = _mm256_fmadd_ps(d32, _mm256_set1_ps(dw * _cvtsh_ss(y->d)),
                                         acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = pq2_hsum_avx2(acc[r]);
}

static inline __attribute__((always_inline)) void
pq2_mul_avx2(int qk, int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
             size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    for (int64_t j0 = 0; j0 < n_act; j0 += PQ2_MAX_ROWS) {
        const int64_t nr = n_act - j0 < PQ2_MAX_ROWS ? n_act - j0 : PQ2_MAX_ROWS;
        const uint8_t *a = (const uint8_t *)act + (size_t)j0 * act_stride;
        for (int64_t i = 0; i < n_w; i++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)i * w_stride;
            float *o = out + (size_t)j0 * out_stride + (size_t)i;
            switch (nr) {
            case 1: pq2_rows_avx2(qk, 1, n, wr, a, act_stride, o, out_stride); break;
            case 2: pq2_rows_avx2(qk, 2, n, wr, a, act_stride, o, out_stride); break;
            case 3: pq2_rows_avx2(qk, 3, n, wr, a, act_stride, o, out_stride); break;
            case 4: pq2_rows_avx2(qk, 4, n, wr, a, act_stride, o, out_stride); break;
            case 5: pq2_rows_avx2(qk, 5, n, wr, a, act_stride, o, out_stride); break;
            case 6: pq2_rows_avx2(qk, 6, n, wr, a, act_stride, o, out_stride); break;
            case 7: pq2_rows_avx2(qk, 7, n, wr, a, act_stride, o, out_stride); break;
            default: pq2_rows_avx2(qk, 8, n, wr, a, act_stride, o, out_stride); break;
            }
        }
    }
}

void pq2_q2_0_dot_q8_0_avx2(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_rows_avx2(PQ2_QK_Q2_0, 1, n, w_row, act_row, 0, s, 0);
}

void pq2_pq2_0_dot_q8_0_avx2(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_rows_avx2(PQ2_QK_PQ2_0, 1, n, w_row, act_row, 0, s, 0);
}

void pq2_q2_0_mul_q8_0_avx2(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                            const void *act, size_t act_stride, int64_t n_act, float *out,
                            size_t out_stride)
{
    pq2_mul_avx2(PQ2_QK_Q2_0, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride);
}

void pq2_pq2_0_mul_q8_0_avx2(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    pq2_mul_avx2(PQ2_QK_PQ2_0, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride);
}
