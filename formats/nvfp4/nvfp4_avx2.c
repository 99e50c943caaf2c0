/* AVX2 NVFP4 x Q8_0 rows (GGUF NVFP4 and NVFP4_G).
 *
 * A 64-value block decodes into two vectors of 32 doubled E2M1 integers: sub-blocks
 * 0 and 2 in one, 1 and 3 in the other (unpacking the low and high nibbles of each
 * sub-block's 8 bytes), matched by the corresponding halves of the two Q8_0 blocks.
 * maddubs/madd give four int32 lanes per sub-block; one FMA per vector applies
 * dy * d * g. One accumulator per activation row whatever the pass size. */
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

/* grouped: NVFP4_G superblocks (g, four blocks) instead of plain blocks. */
INLINE void rows_avx2(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                      size_t out_stride, const int nr, const int grouped)
{
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)nvfp4_e2m1_x2));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i even = _mm256_set_epi32(2, 2, 2, 2, 0, 0, 0, 0);
    const __m256i odd = _mm256_set_epi32(3, 3, 3, 3, 1, 1, 1, 1);
    __m256 acc[NVFP4_MAX_ACT_ROWS];
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        acc[r] = _mm256_setzero_ps();
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
        const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i w02 = _mm256_shuffle_epi8(lut, _mm256_unpacklo_epi64(lo, hi));
        const __m256i w13 = _mm256_shuffle_epi8(lut, _mm256_unpackhi_epi64(lo, hi));
        const __m256i abs02 = _mm256_sign_epi8(w02, w02);
        const __m256i abs13 = _mm256_sign_epi8(w13, w13);
        const __m128 ds = scales4(b->d, g);
        NVFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)(act + (size_t)r * act_stride) + 2 * i;
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[0].qs);
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[1].qs);
            const __m256i a02 = _mm256_permute2x128_si256(y0, y1, 0x20);
            const __m256i a13 = _mm256_permute2x128_si256(y0, y1, 0x31);
            const __m256 p02 = _mm256_cvtepi32_ps(
                _mm256_madd_epi16(_mm256_maddubs_epi16(abs02, _mm256_sign_epi8(a02, w02)), ones));
            const __m256 p13 = _mm256_cvtepi32_ps(
                _mm256_madd_epi16(_mm256_maddubs_epi16(abs13, _mm256_sign_epi8(a13, w13)), ones));
            const float dy0 = _cvtsh_ss(y[0].d), dy1 = _cvtsh_ss(y[1].d);
            /* dy * d * g per sub-block: [s0, s1, s2, s3] */
            const __m256 d = _mm256_castps128_ps256(_mm_mul_ps(_mm_set_ps(dy1, dy1, dy0, dy0), ds));
            const __m256 d02 = _mm256_permutevar8x32_ps(d, even);
            const __m256 d13 = _mm256_permutevar8x32_ps(d, odd);
            acc[r] = _mm256_fmadd_ps(d02, p02, acc[r]);
            acc[r] = _mm256_fmadd_ps(d13, p13, acc[r]);
        }
    }
    NVFP4_UNROLL_ROWS
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = hsum8(acc[r]);
}

INLINE void plain_rows(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                       size_t out_stride, const int nr)
{
    rows_avx2(n, w, act, act_stride, out, out_stride, nr, 0);
}

INLINE void grouped_rows(int64_t n, const void *w, const char *act, size_t act_stride, float *out,
                         size_t out_stride, const int nr)
{
    rows_avx2(n, w, act, act_stride, out, out_stride, nr, 1);
}

void nvfp4_q8_avx2_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    plain_rows(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4_q8_avx2_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                            const void *act, size_t act_stride, int64_t n_act, float *out,
                            size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(plain_rows, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}

void nvfp4g_q8_avx2_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    grouped_rows(n, w_row, act_row, 0, s, 0, 1);
}

void nvfp4g_q8_avx2_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    NVFP4_MUL_ROWS_DRIVER(grouped_rows, n, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
