/* AVX2 + FMA kernels for the legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
 *
 * One 32-value block per 256-bit register, weights unpacked to bytes. Signed
 * weights use the sign trick (maddubs(|w|, sign(a, w)) = w * a in int16
 * pairs); unsigned ones (Q4_1, Q5_1) go straight into maddubs and their minimum
 * comes back through the Q8_1 block sum s. Each type sums in the float order of the
 * ggml dot its reference models were run with: 8 lanes for most, block by block for
 * Q5_1. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"

static inline float kq_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 packed bytes -> [low nibbles, high nibbles]: values 0..31 of the block. */
KQ_INLINE __m256i kq_nibbles(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* Bit j of the 32-bit word -> byte j all ones. */
KQ_INLINE __m256i kq_bits_to_bytes(const uint8_t *qh)
{
    uint32_t u;
    memcpy(&u, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)u), shuf);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}

/* sum of unsigned w * signed a */
KQ_INLINE __m256i kq_dot_u8(__m256i w, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

#define KQ_ACT(type, r) ((const type *)((const char *)act + (r) * act_stride))

/* Kernels over signed weights against Q8_0: UNPACK(b) yields block b's bytes. */
#define KQ_DEFINE_SIGNED_Q8_0(kernel, wtype, UNPACK)                                               \
    KQ_INLINE void kernel(int64_t n, const void *w_row, const void *act, size_t act_stride,        \
                          int nr, float *out, size_t out_stride)                                   \
    {                                                                                              \
        const wtype *x = w_row;                                                                    \
        __m256 acc[KQ_MAX_NR];                                                                     \
        for (int r = 0; r < nr; r++)                                                               \
            acc[r] = _mm256_setzero_ps();                                                          \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const __m256i w = UNPACK(x + i);                                                       \
            const __m256i aw = _mm256_sign_epi8(w, w);                                             \
            const float dw = kq_h2f_fast(x[i].d);                                                  \
            for (int r = 0; r < nr; r++) {                                                         \
                const struct splash_q8_0_block *y = KQ_ACT(struct splash_q8_0_block, r) + i;       \
                const __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);                      \
                const __m256i p = _mm256_madd_epi16(                                               \
                    _mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));       \
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * kq_h2f_fast(y->d)),                   \
                                         _mm256_cvtepi32_ps(p), acc[r]);                           \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[r * out_stride] = kq_hsum256(acc[r]);                                              \
    }

/* Kernels over unsigned weights with a minimum against Q8_1. */
#define KQ_DEFINE_UNSIGNED_Q8_1(kernel, wtype, UNPACK)                                             \
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
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const __m256i w = UNPACK(x + i);                                                       \
            const float dw = kq_h2f_fast(x[i].d), mw = kq_h2f_fast(x[i].m);                        \
            for (int r = 0; r < nr; r++) {                                                         \
                const struct splash_q8_1_block *y = KQ_ACT(struct splash_q8_1_block, r) + i;       \
                const __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);                      \
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * kq_h2f_fast(y->d)),                   \
                                         _mm256_cvtepi32_ps(kq_dot_u8(w, a)), acc[r]);             \
                accm[r] += mw * kq_h2f_fast(y->s);                                                 \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[r * out_stride] = kq_hsum256(acc[r]) + accm[r];                                    \
    }

/* Q5_1 in ggml's block order (its model runs take the generic Q5_1 dot: the golden
 * logits agree with that order to 5e-7 at position 0 and with the lane order above only
 * to 0.03): each block's exact integer sum, then sum += (d_w d_a) sumi + m_w s_a in
 * separate float steps, the scalar row's bits. */
KQ_INLINE int32_t kq_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

#define KQ_DEFINE_UNSIGNED_Q8_1_BLOCKWISE(kernel, wtype, UNPACK)                                   \
    KQ_INLINE void kernel(int64_t n, const void *w_row, const void *act, size_t act_stride,        \
                          int nr, float *out, size_t out_stride)                                   \
    {                                                                                              \
        const wtype *x = w_row;                                                                    \
        float sum[KQ_MAX_NR];                                                                      \
        for (int r = 0; r < nr; r++)                                                               \
            sum[r] = 0;                                                                            \
        for (int64_t i = 0; i < n / 32; i++) {                                                     \
            const __m256i w = UNPACK(x + i);                                                       \
            const float dw = kq_h2f_fast(x[i].d), mw = kq_h2f_fast(x[i].m);                        \
            for (int r = 0; r < nr; r++) {                                                         \
                const struct splash_q8_1_block *y = KQ_ACT(struct splash_q8_1_block, r) + i;       \
                const __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);                      \
                const float sumi = (float)kq_hsum_epi32(kq_dot_u8(w, a));                          \
                const float part = (dw * kq_h2f_fast(y->d)) * sumi;                                \
                const float min = mw * kq_h2f_fast(y->s);                                          \
                sum[r] = sum[r] + (part + min);                                                    \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++)                                                               \
            out[r * out_stride] = sum[r];                                                          \
    }

KQ_INLINE __m256i kq_unpack_q4_0(const struct q4_0_block *b)
{
    return _mm256_sub_epi8(kq_nibbles(b->qs), _mm256_set1_epi8(8));
}

KQ_INLINE __m256i kq_unpack_q8_0(const struct splash_q8_0_block *b)
{
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

/* q | 0xF0 where the fifth bit is clear: q - 16 in two's complement */
KQ_INLINE __m256i kq_unpack_q5_0(const struct q5_0_block *b)
{
    const __m256i hb = kq_bits_to_bytes(b->qh);
    return _mm256_or_si256(kq_nibbles(b->qs), _mm256_andnot_si256(hb, _mm256_set1_epi8((char)0xF0)));
}

KQ_INLINE __m256i kq_unpack_q4_1(const struct q4_1_block *b)
{
    return kq_nibbles(b->qs);
}

KQ_INLINE __m256i kq_unpack_q5_1(const struct q5_1_block *b)
{
    const __m256i hb = kq_bits_to_bytes(b->qh);
    return _mm256_or_si256(kq_nibbles(b->qs), _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

KQ_DEFINE_SIGNED_Q8_0(q4_0_kernel_avx2, struct q4_0_block, kq_unpack_q4_0)
KQ_DEFINE_SIGNED_Q8_0(q5_0_kernel_avx2, struct q5_0_block, kq_unpack_q5_0)
KQ_DEFINE_SIGNED_Q8_0(q8_0_kernel_avx2, struct splash_q8_0_block, kq_unpack_q8_0)
KQ_DEFINE_UNSIGNED_Q8_1(q4_1_kernel_avx2, struct q4_1_block, kq_unpack_q4_1)
KQ_DEFINE_UNSIGNED_Q8_1_BLOCKWISE(q5_1_kernel_avx2, struct q5_1_block, kq_unpack_q5_1)

KQ_DEFINE_DOT_AND_MUL(q4_0_dot_q8_0_avx2, q4_0_mul_q8_0_avx2, q4_0_kernel_avx2)
KQ_DEFINE_DOT_AND_MUL(q5_0_dot_q8_0_avx2, q5_0_mul_q8_0_avx2, q5_0_kernel_avx2)
KQ_DEFINE_DOT_AND_MUL(q8_0_dot_q8_0_avx2, q8_0_mul_q8_0_avx2, q8_0_kernel_avx2)
KQ_DEFINE_DOT_AND_MUL(q4_1_dot_q8_1_avx2, q4_1_mul_q8_1_avx2, q4_1_kernel_avx2)
KQ_DEFINE_DOT_AND_MUL(q5_1_dot_q8_1_avx2, q5_1_mul_q8_1_avx2, q5_1_kernel_avx2)
