/* The 6-bit scale and min fields that Q4_K_R16 and Q5_K_R16 share (the plain types'
 * 12 packed bytes per row, word k of row r at int32 lane r of scales[k]), decoded for
 * 16 rows at once. Included only from *_avx512.c. */
#ifndef SPLASH_KQUANTS_K4_R16_SIMD_H
#define SPLASH_KQUANTS_K4_R16_SIMD_H

#include "formats/kquants/kq_simd.h"

/* One block's scales for every activation row. */
struct kq_k4r16_dec {
    __m512 s[8];  /* sub-block j's scale as a float, times the format's factor (exact) */
    __m512i m[8]; /* int16 pairs (m_j, m_j) */
    __m512 d, dmin;
};

/* Bytes c0 and c1 of each int32 lane zero-extended to its two int16 halves (c1 < 0: c0
 * zero-extended to the whole lane). */
KQ_INLINE __m512i kq_k4r16_spread(__m512i v, int c0, int c1)
{
    /* vpshufb indexes within 128-bit lanes; 0x80 gives a zero byte */
    const uint32_t w0 = 0x80008000u | (uint32_t)c0 | (c1 < 0 ? 0x800000u : (uint32_t)c1 << 16);
    const uint32_t step = c1 < 0 ? 4 : 0x40004;
    return _mm512_shuffle_epi8(v, _mm512_set4_epi32((int)(w0 + 3 * step), (int)(w0 + 2 * step),
                                                    (int)(w0 + step), (int)w0));
}

/* The 6-bit fields of 16 rows' packed scales (kq_get_scale_min_k4 on each int32 lane):
 * bytes 4r + c of v[0..3] are row r's sc_c, sc_{4+c}, m_c, m_{4+c}. */
KQ_INLINE void kq_k4r16_fields(const uint8_t scales[3][64], __m512i v[4])
{
    const __m512i x0 = _mm512_loadu_si512(scales[0]);
    const __m512i x1 = _mm512_loadu_si512(scales[1]);
    const __m512i x2 = _mm512_loadu_si512(scales[2]);
    const __m512i m3f = _mm512_set1_epi8(0x3F), m0f = _mm512_set1_epi8(0x0F),
                  m30 = _mm512_set1_epi8(0x30);
    /* the ternlog 0xEC is (a & c) | b */
    v[0] = _mm512_and_si512(x0, m3f);
    v[1] =
        _mm512_ternarylogic_epi32(x2, _mm512_and_si512(_mm512_srli_epi16(x0, 2), m30), m0f, 0xEC);
    v[2] = _mm512_and_si512(x1, m3f);
    v[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(x2, 4),
                                     _mm512_and_si512(_mm512_srli_epi16(x1, 2), m30), m0f, 0xEC);
}

/* Sub-block j's scale as a float for 16 rows, times f_even or f_odd (powers of two, so
 * exact). The mat-vec and the tiles use it alike, so a pair's result does not depend on
 * how many activation rows share the call. */
KQ_INLINE __m512 kq_k4r16_scale(const __m512i v[4], int j, float f_even, float f_odd)
{
    const __m512 s = _mm512_cvtepi32_ps(kq_k4r16_spread(v[j / 4], j % 4, -1));
    const float f = j & 1 ? f_odd : f_even;
    return f == 1.0f ? s : _mm512_mul_ps(s, _mm512_set1_ps(f));
}

KQ_INLINE void kq_k4r16_decode(const uint8_t scales[3][64], const uint16_t d[16],
                               const uint16_t dmin[16], float f_even, float f_odd,
                               struct kq_k4r16_dec *o)
{
    __m512i v[4];
    kq_k4r16_fields(scales, v);
    o->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
    o->dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dmin));
    KQ_UNROLL for (int j = 0; j < 8; j++)
    {
        o->s[j] = kq_k4r16_scale(v, j, f_even, f_odd);
        o->m[j] = kq_k4r16_spread(v[2 + j / 4], j % 4, j % 4);
    }
}

/* The int16 pairs (B_2t, B_2t+1) of a Q8_K row's 32-value sums, 4 per super-block. */
KQ_INLINE void kq_k4r16_pairs(const struct splash_q8_k_block *y, int64_t nb, int32_t *bp)
{
    for (int64_t i = 0; i < nb; i++) {
        const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums),
                                            _mm256_set1_epi16(1));
        _mm_storeu_si128((__m128i *)(bp + 4 * i), _mm256_cvtepi32_epi16(s));
    }
}

#endif
