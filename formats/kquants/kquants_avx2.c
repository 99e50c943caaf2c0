/* AVX2 + FMA kernels for the K-quants (Q2_K .. Q6_K) against Q8_K.
 *
 * 32 values per step: levels unpacked to unsigned bytes, maddubs against the
 * activations (pairs of int16), madd against the sub-block scales (int32).
 * Signed level offsets (Q3_K's -4, Q6_K's -32) and minimums (Q2_K, Q4_K,
 * Q5_K) come back through the activation block sums bsums. Each super-block's
 * int32 sum is exact and scaled in float once. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"

static inline float kq_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* int16 scale vector: lanes 0..7 = a, 8..15 = b (16 values each) */
KQ_INLINE __m256i kq_sc2(int a, int b)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}

/* 8 int32 lanes summed as int32 */
KQ_INLINE int kq_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

#define KQ_ACT_K(r) ((const struct splash_q8_k_block *)((const char *)act + (r)*act_stride) + i)

/* Shared skeleton: PREP unpacks block i into w[8] (32 values each, in order)
 * and sc[8] (their scales); FIX(y) is the int correction from bsums; D and
 * DMIN the super-block scales; MINS(y) the int minimum term (or 0). */
#define KQ_K_KERNEL(kernel, wtype, PREP, FIX, MINS, DMIN)                                          \
    KQ_INLINE void kernel(int64_t n, const void *w_row, const void *act, size_t act_stride,        \
                          int nr, float *out, size_t out_stride)                                   \
    {                                                                                              \
        const wtype *x = w_row;                                                                    \
        __m256 acc[KQ_MAX_NR];                                                                     \
        float accm[KQ_MAX_NR];                                                                     \
        for (int r = 0; r < nr; r++) {                                                             \
            acc[r] = _mm256_setzero_ps();                                                          \
            accm[r] = 0;                                                                           \
        }                                                                                          \
        for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {                                            \
            __m256i w[8], sc[8];                                                                   \
            PREP;                                                                                  \
            const float dw = kq_h2f_fast(x[i].d);                                                  \
            const float dmw = DMIN;                                                                \
            for (int r = 0; r < nr; r++) {                                                         \
                const struct splash_q8_k_block *y = KQ_ACT_K(r);                                   \
                __m256i isum = _mm256_setzero_si256();                                             \
                for (int k = 0; k < 8; k++) {                                                      \
                    const __m256i a = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * k));       \
                    isum = _mm256_add_epi32(                                                       \
                        isum, _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], a), sc[k]));            \
                }                                                                                  \
                isum = _mm256_sub_epi32(isum, FIX);                                                \
                acc[r] =                                                                           \
                    _mm256_fmadd_ps(_mm256_set1_ps(dw * y->d), _mm256_cvtepi32_ps(isum), acc[r]);  \
                accm[r] -= dmw * y->d * (float)(MINS);                                             \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[r * out_stride] = kq_hsum256(acc[r]) + accm[r];                                    \
    }

#define KQ_BSUMS(y) _mm256_loadu_si256((const __m256i *)(y)->bsums)

/* ---- Q2_K: w[k] = 32 values 128h + 32j + l: (qs[32h + l] >> 2j) & 3 -------- */

KQ_INLINE void q2k_prep(const struct q2_k_block *b, __m256i *w, __m256i *sc, __m256i *mins16)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int j = 0; j < 4; j++)
            w[4 * h + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
    }
    for (int k = 0; k < 8; k++)
        sc[k] = kq_sc2(b->scales[2 * k] & 0xF, b->scales[2 * k + 1] & 0xF);
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    *mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
}

KQ_K_KERNEL(q2k_kernel_avx2, struct q2_k_block, __m256i mins16; q2k_prep(x + i, w, sc, &mins16),
            _mm256_setzero_si256(), kq_hsum_epi32(_mm256_madd_epi16(KQ_BSUMS(y), mins16)),
            kq_h2f_fast(x[i].dmin))
KQ_DEFINE_DOT_AND_MUL(q2k_dot_q8k_avx2, q2k_mul_q8k_avx2, q2k_kernel_avx2)

/* ---- Q3_K: levels 0..7 = low 2 bits | hmask bit << 2; offset -4 via bsums -- */

KQ_INLINE void q3k_prep(const struct q3_k_block *b, __m256i *w, __m256i *sc, __m256i *sc16)
{
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int j = 0; j < 4; j++) {
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
            w[4 * h + j] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
        }
    }
    int8_t s[16];
    kq_q3k_unpack_scales(b->scales, s);
    for (int k = 0; k < 8; k++)
        sc[k] = kq_sc2(s[2 * k], s[2 * k + 1]);
    *sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)s));
}

KQ_K_KERNEL(q3k_kernel_avx2, struct q3_k_block, __m256i sc16; q3k_prep(x + i, w, sc, &sc16),
            _mm256_slli_epi32(_mm256_madd_epi16(KQ_BSUMS(y), sc16), 2), 0, 0.0f)
KQ_DEFINE_DOT_AND_MUL(q3k_dot_q8k_avx2, q3k_mul_q8k_avx2, q3k_kernel_avx2)

/* ---- Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scales and mins ---------------- */

KQ_INLINE void q4k_prep(const uint8_t *packed, const uint8_t *qs, const uint8_t *qh, __m256i *w,
                        __m256i *sc, __m128i *mins8)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    uint8_t sm[16];
    kq_k4_unpack(packed, sm);
    const uint8_t *s = sm, *m = sm + 8;
    for (int p = 0; p < 4; p++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * p));
        w[2 * p] = _mm256_and_si256(q, m4);
        w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        sc[2 * p] = _mm256_set1_epi16(s[2 * p]);
        sc[2 * p + 1] = _mm256_set1_epi16(s[2 * p + 1]);
    }
    if (qh) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)qh), one = _mm256_set1_epi8(1);
        for (int k = 0; k < 8; k++)
            w[k] = _mm256_or_si256(
                w[k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, k), one), 4));
    }
    uint64_t mm;
    memcpy(&mm, m, 8);
    *mins8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mm));
}

/* sum over sub-blocks j of min_j * (bsums[2j] + bsums[2j+1]) */
KQ_INLINE int kq_k4_mins(const struct splash_q8_k_block *y, __m128i mins8)
{
    const __m256i bs = KQ_BSUMS(y);
    const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    __m128i p = _mm_madd_epi16(pairs, mins8);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(p);
}

KQ_K_KERNEL(q4k_kernel_avx2, struct q4_k_block,
            __m128i mins8; q4k_prep(x[i].scales, x[i].qs, NULL, w, sc, &mins8),
            _mm256_setzero_si256(), kq_k4_mins(y, mins8), kq_h2f_fast(x[i].dmin))
KQ_DEFINE_DOT_AND_MUL(q4k_dot_q8k_avx2, q4k_mul_q8k_avx2, q4k_kernel_avx2)

KQ_K_KERNEL(q5k_kernel_avx2, struct q5_k_block,
            __m128i mins8; q4k_prep(x[i].scales, x[i].qs, x[i].qh, w, sc, &mins8),
            _mm256_setzero_si256(), kq_k4_mins(y, mins8), kq_h2f_fast(x[i].dmin))
KQ_DEFINE_DOT_AND_MUL(q5k_dot_q8k_avx2, q5k_mul_q8k_avx2, q5k_kernel_avx2)

/* ---- Q6_K: levels 0..63, offset -32 via bsums ------------------------------- */

KQ_INLINE void q6k_prep(const struct q6_k_block *b, __m256i *w, __m256i *sc, __m256i *sc16)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        const __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                 _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        for (int k = 0; k < 4; k++) {
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
            w[4 * h + k] = _mm256_or_si256(lows[k], _mm256_slli_epi16(hb, 4));
        }
    }
    for (int k = 0; k < 8; k++)
        sc[k] = kq_sc2(b->scales[2 * k], b->scales[2 * k + 1]);
    *sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
}

KQ_K_KERNEL(q6k_kernel_avx2, struct q6_k_block, __m256i sc16; q6k_prep(x + i, w, sc, &sc16),
            _mm256_slli_epi32(_mm256_madd_epi16(KQ_BSUMS(y), sc16), 5), 0, 0.0f)
KQ_DEFINE_DOT_AND_MUL(q6k_dot_q8k_avx2, q6k_mul_q8k_avx2, q6k_kernel_avx2)
