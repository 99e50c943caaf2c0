/* Q2_0 / PQ2_0 x Q8_0 kernels for AVX-512 (VNNI + VBMI). 64 codes (16 bytes) become
 * 64 bytes with one permute and one multishift; vpdpbusd gives Σ q a and Σ a per
 * 4 elements, whose difference is Σ (q - 1) a, exact in int32. Lanes 0..7 hold the
 * first Q8_0 block of the pair, lanes 8..15 the second. */
#include <immintrin.h>

#include "formats/pq2/pq2.h"
#include "splash/fp.h"

#define PQ2_MAX_ROWS 8

/* 16 code bytes -> 64 codes in element order: qword t takes bytes 2t, 2t + 1 (elements
 * 8t .. 8t + 7) and multishift pulls each 2-bit field to the bottom of its byte. */
static inline __m512i pq2_decode64_avx512(const uint8_t *qs)
{
    /* qword t (t = 0..7) starts at byte 2t; the bytes above the first two are unused. */
    const __m512i perm =
        _mm512_set_epi64(0x0f0f0f0f0f0f0f0ell, 0x0d0d0d0d0d0d0d0cll,
                         0x0b0b0b0b0b0b0b0all, 0x0909090909090908ll, 0x0707070707070706ll,
                         0x0505050505050504ll, 0x0303030303030302ll, 0x0101010101010100ll);
    const __m512i ctrl = _mm512_set1_epi64(0x0e0c0a0806040200ll);
    const __m512i b =
        _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)qs));
    const __m512i x = _mm512_multishift_epi64_epi8(ctrl, _mm512_permutexvar_epi8(perm, b));
    return _mm512_and_si512(x, _mm512_set1_epi8(3));
}

static inline __attribute__((always_inline)) void
pq2_rows_avx512(int qk, int nr, int64_t n, const uint8_t *w, const uint8_t *act,
                size_t act_stride, float *out, size_t out_stride)
{
    const int sub = qk / SPLASH_QK8_0;
    const size_t block_bytes = (size_t)(2 + qk / 4);
    const __m512i ones8 = _mm512_set1_epi8(1);
    __m512 acc[PQ2_MAX_ROWS];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / qk; i++, w += block_bytes) {
        const float dw = _cvtsh_ss((unsigned short)(w[0] | (w[1] << 8)));
        for (int k = 0; k < sub; k += 2) {
            const __m512i q = pq2_decode64_avx512(w + 2 + 8 * k);
            for (int r = 0; r < nr; r++) {
                const struct splash_q8_0_block *y =
                    (const struct splash_q8_0_block *)(const void *)(act + (size_t)r * act_stride) +
                    i * sub + k;
                const __m512i a = _mm512_inserti64x4(
                    _mm512_castsi256_si512(
                        _mm256_loadu_si256((const __m256i *)(const void *)y[0].qs)),
                    _mm256_loadu_si256((const __m256i *)(const void *)y[1].qs), 1);
                const __m512i zero = _mm512_setzero_si512();
                const __m512i d32 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, a),
                                                     _mm512_dpbusd_epi32(zero, ones8, a));
                const __m512 sv = _mm512_insertf32x8(
                    _mm512_set1_ps(dw * _cvtsh_ss(y[0].d)),
                    _mm256_set1_ps(dw * _cvtsh_ss(y[1].d)), 1);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d32), sv, acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

static inline __attribute__((always_inline)) void
pq2_mul_avx512(int qk, int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
               size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    for (int64_t j0 = 0; j0 < n_act; j0 += PQ2_MAX_ROWS) {
        const int64_t nr = n_act - j0 < PQ2_MAX_ROWS ? n_act - j0 : PQ2_MAX_ROWS;
        const uint8_t *a = (const uint8_t *)act + (size_t)j0 * act_stride;
        for (int64_t i = 0; i < n_w; i++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)i * w_stride;
            float *o = out + (size_t)j0 * out_stride + (size_t)i;
            switch (nr) {
            case 1: pq2_rows_avx512(qk, 1, n, wr, a, act_stride, o, out_stride); break;
            case 2: pq2_rows_avx512(qk, 2, n, wr, a, act_stride, o, out_stride); break;
            case 3: pq2_rows_avx512(qk, 3, n, wr, a, act_stride, o, out_stride); break;
            case 4: pq2_rows_avx512(qk, 4, n, wr, a, act_stride, o, out_stride); break;
            case 5: pq2_rows_avx512(qk, 5, n, wr, a, act_stride, o, out_stride); break;
            case 6: pq2_rows_avx512(qk, 6, n, wr, a, act_stride, o, out_stride); break;
            case 7: pq2_rows_avx512(qk, 7, n, wr, a, act_stride, o, out_stride); break;
            default: pq2_rows_avx512(qk, 8, n, wr, a, act_stride, o, out_stride); break;
            }
        }
    }
}

void pq2_q2_0_dot_q8_0_avx512(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_rows_avx512(PQ2_QK_Q2_0, 1, n, w_row, act_row, 0, s, 0);
}

void pq2_pq2_0_dot_q8_0_avx512(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_rows_avx512(PQ2_QK_PQ2_0, 1, n, w_row, act_row, 0, s, 0);
}

void pq2_q2_0_mul_q8_0_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride)
{
    pq2_mul_avx512(PQ2_QK_Q2_0, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride);
}

void pq2_pq2_0_mul_q8_0_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *act, size_t act_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    pq2_mul_avx512(PQ2_QK_PQ2_0, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride);
}
