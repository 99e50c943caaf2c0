/* AVX2 building blocks of the i-quant kernels: a weight block is decoded once into
 * magnitudes, sign carriers and integer scales, then dotted with each activation row
 * (maddubs of |w| and sign(a, w), exact in int16 for |w| <= 127). Only the *_avx2.c
 * and *_avx512.c files include this. */
#ifndef SPLASH_KQUANTS_IQ_AVX2_H
#define SPLASH_KQUANTS_IQ_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* One 256-value weight block decoded for integer dot products. */
struct kq_dec256 {
    _Alignas(64) int8_t mag[256]; /* |w| (64-aligned for the AVX-512 rows) */
    _Alignas(64) int8_t sgn[256]; /* carries w's sign; zero where w is zero */
    int16_t ls[16];               /* integer scale of each 16 values */
};

/* Byte e of the result is 0xff where bit e % 8 of byte e / 8 of s4 is set. */
static inline __m256i kq_bits_to_mask(uint32_t s4)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                            2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s4), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* +1 where the bit is clear, -1 where it is set (a sign carrier for _mm256_sign_epi8). */
static inline __m256i kq_bits_to_sign(uint32_t s4)
{
    return _mm256_or_si256(kq_bits_to_mask(s4), _mm256_set1_epi8(1));
}

static inline int32_t kq_hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* int16 pair sums of w * a over 32 values. */
static inline __m256i kq_dot32_i16(const int8_t *mag, const int8_t *sgn, const int8_t *q8)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)q8);
    __m256i s = _mm256_sign_epi8(a, _mm256_load_si256((const __m256i *)sgn));
    return _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)mag), s);
}

/* sum over the block of ls * w * a (exact in int32). */
static inline int32_t kq_dec_dot_scaled(const struct kq_dec256 *b, const int8_t *q8)
{
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) {
        __m256i p = kq_dot32_i16(b->mag + 32 * k, b->sgn + 32 * k, q8 + 32 * k);
        __m256i sc =
            _mm256_set_m128i(_mm_set1_epi16(b->ls[2 * k + 1]), _mm_set1_epi16(b->ls[2 * k]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
    }
    return kq_hsum_i32(acc);
}

/* Eight int32 vectors to one vector of their eight sums, in order. */
static inline __m256i kq_reduce8(const __m256i p[8])
{
    __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
    __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
    __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
    __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
    __m256i h0123 = _mm256_hadd_epi32(h01, h23);
    __m256i h4567 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                            _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/* The eight unscaled 32-value sums of w * a; q8[k] points at the k-th 32 activations. */
static inline void kq_dec_dot_sub32(const struct kq_dec256 *b, const int8_t *const q8[8],
                                    int32_t sums[8])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8];
    for (int k = 0; k < 8; k++)
        p[k] = _mm256_madd_epi16(kq_dot32_i16(b->mag + 32 * k, b->sgn + 32 * k, q8[k]), ones);
    _mm256_storeu_si256((__m256i *)sums, kq_reduce8(p));
}

/* Rows as lanes: for one 32-value weight group (mag, sgn) and up to 8 activation rows
 * (q8[r], r < nr), the vector of the 8 integer sums w * a_r (zero for r >= nr). Float
 * steps on such vectors repeat the reference's per-row sequence in each lane. */
static inline __m256i kq_dot32_rows(const int8_t *mag, const int8_t *sgn,
                                    const int8_t *const q8[8], int nr)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8];
    for (int r = 0; r < 8; r++)
        p[r] = r < nr ? _mm256_madd_epi16(kq_dot32_i16(mag, sgn, q8[r]), ones)
                      : _mm256_setzero_si256();
    return kq_reduce8(p);
}

/* Defines <fmt>_mul_rows_<act>_avx2 and <fmt>_dot_<act>_avx2 over a block kernel
 * block_fn(const void *w_block, const uint8_t *const act_block[], int n_act, float sumf[])
 * that decodes the weight block once and accumulates into sumf[r] for each activation
 * row; finish(sumf) gives the dot product. */
#define KQ_IQ_DEFINE_ROWS(fmt, act, isa, w_elems, w_bytes, a_bytes, block_fn, finish)              \
    void fmt##_mul_rows_##act##_##isa(int64_t n, const void *w, size_t w_stride, int64_t n_w,      \
                                      const void *a, size_t a_stride, int64_t n_act, float *out,   \
                                      size_t out_stride)                                           \
    {                                                                                              \
        const int64_t nb = n / (w_elems);                                                          \
        for (int64_t i = 0; i < n_w; i++) {                                                        \
            const uint8_t *wr = (const uint8_t *)w + (size_t)i * w_stride;                         \
            for (int64_t j0 = 0; j0 < n_act; j0 += 8) {                                            \
                const int nr = n_act - j0 < 8 ? (int)(n_act - j0) : 8;                             \
                float sumf[8] = {0};                                                               \
                const uint8_t *ab[8];                                                              \
                for (int r = 0; r < nr; r++)                                                       \
                    ab[r] = (const uint8_t *)a + (size_t)(j0 + r) * a_stride;                      \
                for (int64_t b = 0; b < nb; b++) {                                                 \
                    block_fn(wr + (size_t)b * (w_bytes), ab, nr, sumf);                            \
                    for (int r = 0; r < nr; r++)                                                   \
                        ab[r] += (a_bytes);                                                        \
                }                                                                                  \
                for (int r = 0; r < nr; r++)                                                       \
                    out[(size_t)(j0 + r) * out_stride + (size_t)i] = finish(sumf[r]);             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    void fmt##_dot_##act##_##isa(int64_t n, float *s, const void *w_row, const void *act_row)      \
    {                                                                                              \
        fmt##_mul_rows_##act##_##isa(n, w_row, 0, 1, act_row, 0, 1, s, 1);                         \
    }

static inline float kq_finish_id(float s)
{
    return s;
}

static inline float kq_finish_eighth(float s)
{
    return 0.125f * s;
}

static inline float kq_finish_quarter(float s)
{
    return 0.25f * s;
}

#endif
