/* AVX-512 VNNI NVFP4 x Q8_0 rows (GGUF NVFP4 and NVFP4_G): one 64-value block per
 * 512-bit vector, one sub-block per 128-bit lane, which is also how the two Q8_0
 * blocks' 64 bytes lie. vpdpbusd takes unsigned by signed bytes, so the shuffle
 * table holds |doubled E2M1| and the code's sign bit negates the activation byte
 * (Q8_0 bytes lie in [-127, 127]). One accumulator per activation row whatever
 * the pass size. */
#include <immintrin.h>

#include "formats/nvfp4/nvfp4.h"

#define INLINE static inline __attribute__((always_inline))

/* |doubled E2M1| per code: the OCP MX FP4 magnitudes times two. */
static const int8_t nvfp4_abs_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};

/* A block's four UE4M3 scales, halved, times g. With bit 7 cleared a UE4M3 byte
 * shifted up by 7 is a binary16 of its value times 2^-8 (normals and subnormals
 * alike), so F16C widens it exactly. As GGUF's NVFP4 reads them, the byte 0x7f is 0
 * and 0xff, whose bit 7 is ignored, is 480. */
INLINE __m128 scales4(const uint8_t d[4], float g)
{
    uint32_t raw;
    memcpy(&raw, d, sizeof raw);
    const __m128i m7f = _mm_set1_epi16(0x7f);
    const __m128i x = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)raw));
    const __m128i v = _mm_and_si128(x, m7f);
    const __m128i h = _mm_andnot_si128(_mm_cmpeq_epi16(x, m7f), _mm_slli_epi16(v, 7));
    return _mm_mul_ps(_mm_mul_ps(_mm_cvtph_ps(h), _mm_set1_ps(128.0f)), _mm_set1_ps(g));
}

INLINE void rows_avx512(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                        size_t out_stride, const int nr, const int grouped)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)nvfp4_abs_x2));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i sign = _mm512_set1_epi8(0x08);
    /* lane s = sub-block s's 8 bytes twice: low nibbles, then high nibbles */
    const __m512i spread = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i shift = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
    const __m512i lane_of = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    __m512 acc[NVFP4_MAX_ACT_ROWS];
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / NVFP4_QK; i++) {
        const struct nvfp4_block *b;
        float g = 1.0f;
        if (grouped) {
            const struct nvfp4g_block *sb = (const struct nvfp4g_block *)w + i / 4;
            b = &sb->b[i % 4];
            g = sb->g;
        } else {
            b = (const struct nvfp4_block *)w + i;
        }
        const __m512i q = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b->qs));
        const __m512i codes =
            _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(spread, q), shift), m4);
        const __m512i wabs = _mm512_shuffle_epi8(lut, codes);
        const __mmask64 neg = _mm512_test_epi8_mask(codes, sign);
        const __m512 ds = _mm512_permutexvar_ps(lane_of, _mm512_castps128_ps512(scales4(b->d, g)));
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)(act + (size_t)r * act_stride) + 2 * i;
            __m512i a = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[0].qs)),
                _mm256_loadu_si256((const __m256i *)y[1].qs), 1);
            a = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
            const __m512 p =
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, a));
            const __m512 dy = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(y[0].d)),
                                                 _mm256_set1_ps(_cvtsh_ss(y[1].d)), 1);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dy, ds), p, acc[r]);
        }
    }
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

INLINE void plain_rows(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                       size_t out_stride, const int nr)
{
    rows_avx512(n, w, act, act_stride, out, out_stride, nr, 0);
}

INLINE void grouped_rows(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                         size_t out_stride, const int nr)
{
    rows_avx512(n, w, act, act_stride, out, out_stride, nr, 1);
}

void nvfp4_q8_avx512vnni_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    plain_rows(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4_q8_avx512vnni_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                  const void *act, size_t act_stride, int64_t n_act, float *out,
                                  size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(plain_rows, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}

void nvfp4g_q8_avx512vnni_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    grouped_rows(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4g_q8_avx512vnni_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                   const void *act, size_t act_stride, int64_t n_act, float *out,
                                   size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(grouped_rows, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
