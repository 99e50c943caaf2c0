/* MLX affine x Q8_0 kernels for AVX2.
 *
 * Each 32-code piece of a group (one Q8_0 block's worth) is unpacked once, for all the
 * activation rows of a mul_rows call:
 *   2 and 4 bits: to 32 bytes, then maddubs (codes <= 15: |15 * 127 * 2| fits int16);
 *   3, 5, 6 bits: to 16-bit lanes: a byte shuffle brings the two bytes holding each
 *     code into its lane, a multiply by 2^(16 - bits - shift) moves the code to the top
 *     and a shift by 16 - bits brings it down (AVX2 has no per-lane 16-bit shift);
 *   8 bits: zero-extended to 16 bits (maddubs would saturate at 255 * 127 * 2);
 * then Σ q a (madd) and Σ a, exact in int32, scaled by s d_a and z d_a in float.
 * vec_dot is mul_rows for one row, so the two give identical results. */
#include <immintrin.h>

#include "formats/affine/affine.h"
#include "splash/fp.h"

#define AFFINE_MAX_ROWS 8

static inline float affine_hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Byte holding the low bits of code i of a 16-code window, the next byte (or -128:
 * shuffle writes 0) and the multiplier that puts the code at the top of 16 bits. */
#define AF_LO(b, i) (((b) * (i)) >> 3)
#define AF_HI(b, i) (AF_LO(b, i) + 1 < 16 ? AF_LO(b, i) + 1 : -128)
#define AF_PAIR(b, i) (char)AF_LO(b, i), (char)AF_HI(b, i)
#define AF_MUL(b, i) (short)(1 << (16 - (b) - (((b) * (i)) & 7)))

/* 32 codes at p (8 bytes, 2 bits each) -> 32 bytes in element order. */
static inline __m256i affine_unpack2_avx2(const uint8_t *p)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    const __m128i m = _mm_set1_epi8(3);
    const __m128i p0 = _mm_and_si128(b, m);
    const __m128i p1 = _mm_and_si128(_mm_srli_epi16(b, 2), m);
    const __m128i p2 = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    const __m128i p3 = _mm_and_si128(_mm_srli_epi16(b, 6), m);
    const __m128i p01 = _mm_unpacklo_epi8(p0, p1);
    const __m128i p23 = _mm_unpacklo_epi8(p2, p3);
    return _mm256_set_m128i(_mm_unpackhi_epi16(p01, p23), _mm_unpacklo_epi16(p01, p23));
}

/* 32 codes at p (16 bytes, low nibble first) -> 32 bytes in element order. */
static inline __m256i affine_unpack4_avx2(const uint8_t *p)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(b, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

/* 16 codes of `bits` (3, 5 or 6) starting at byte `off` of a block of bb bytes ->
 * 16-bit lanes. The 16-byte load is moved back inside the block when it would run
 * past its end (the shuffle indices move with it). */
static inline __attribute__((always_inline)) __m256i
affine_unpack16_avx2(int bits, const uint8_t *blk, int bb, int off)
{
    const int at = off + 16 <= bb ? off : bb - 16;
    const __m256i idx = _mm256_add_epi8(
        _mm256_setr_epi8(AF_PAIR(bits, 0), AF_PAIR(bits, 1), AF_PAIR(bits, 2), AF_PAIR(bits, 3),
                         AF_PAIR(bits, 4), AF_PAIR(bits, 5), AF_PAIR(bits, 6), AF_PAIR(bits, 7),
                         AF_PAIR(bits, 8), AF_PAIR(bits, 9), AF_PAIR(bits, 10),
                         AF_PAIR(bits, 11), AF_PAIR(bits, 12), AF_PAIR(bits, 13),
                         AF_PAIR(bits, 14), AF_PAIR(bits, 15)),
        _mm256_set1_epi8((char)(off - at)));
    const __m256i mul = _mm256_setr_epi16(
        AF_MUL(bits, 0), AF_MUL(bits, 1), AF_MUL(bits, 2), AF_MUL(bits, 3), AF_MUL(bits, 4),
        AF_MUL(bits, 5), AF_MUL(bits, 6), AF_MUL(bits, 7), AF_MUL(bits, 8), AF_MUL(bits, 9),
        AF_MUL(bits, 10), AF_MUL(bits, 11), AF_MUL(bits, 12), AF_MUL(bits, 13), AF_MUL(bits, 14),
        AF_MUL(bits, 15));
    const __m256i win =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(blk + at)));
    const __m256i v = _mm256_mullo_epi16(_mm256_shuffle_epi8(win, idx), mul);
    return _mm256_srli_epi16(v, 16 - bits);
}

/* nr activation rows (a constant after inlining) against one weight row. */
static inline __attribute__((always_inline)) void
affine_rows_avx2(int bits, int group, int nr, int64_t n, const uint8_t *w, const uint8_t *act,
                 size_t act_stride, float *out, size_t out_stride)
{
    const int cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const int sub = group / SPLASH_QK8_0;
    const int bytes8 = bits == 2 || bits == 4; /* codes as bytes, else as 16-bit lanes */
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[AFFINE_MAX_ROWS];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < n / group; g++, w += bb) {
        const __m256 vs = _mm256_set1_ps(splash_bf16_to_fp32(affine_load_u16(w + cb)));
        const __m256 vz = _mm256_set1_ps(splash_bf16_to_fp32(affine_load_u16(w + cb + 2)));
        for (int k = 0; k < sub; k++) {
            const int off = 4 * bits * k; /* this piece's first code byte */
            __m256i c0, c1 = _mm256_setzero_si256();
            if (bits == 2) {
                c0 = affine_unpack2_avx2(w + off);
            } else if (bits == 4) {
                c0 = affine_unpack4_avx2(w + off);
            } else if (bits == 8) {
                const __m128i *p = (const __m128i *)(const void *)(w + off);
                c0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(p));
                c1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(p + 1));
            } else {
                c0 = affine_unpack16_avx2(bits, w, bb, off);
                c1 = affine_unpack16_avx2(bits, w, bb, off + 2 * bits);
            }
            for (int r = 0; r < nr; r++) {
                const struct splash_q8_0_block *y =
                    (const struct splash_q8_0_block *)(const void *)(act + (size_t)r * act_stride) +
                    g * sub + k;
                const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)y->qs);
                __m256i qa;
                if (bytes8) {
                    qa = _mm256_madd_epi16(_mm256_maddubs_epi16(c0, a), ones16);
                } else {
                    const __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(a));
                    const __m256i a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1));
                    qa = _mm256_add_epi32(_mm256_madd_epi16(c0, a0), _mm256_madd_epi16(c1, a1));
                }
                const __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16);
                /* acc += d_a (s qa + z sa): one FMA on the loop-carried chain */
                const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qa), vs,
                                                 _mm256_mul_ps(_mm256_cvtepi32_ps(sa), vz));
                acc[r] = _mm256_fmadd_ps(t, _mm256_set1_ps(_cvtsh_ss(y->d)), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = affine_hsum_avx2(acc[r]);
}

static inline __attribute__((always_inline)) void
affine_mul_avx2(int bits, int group, int64_t n, const void *w, size_t w_stride, int64_t n_w,
                const void *act, size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    for (int64_t j0 = 0; j0 < n_act; j0 += AFFINE_MAX_ROWS) {
        const int64_t nr = n_act - j0 < AFFINE_MAX_ROWS ? n_act - j0 : AFFINE_MAX_ROWS;
        const uint8_t *a = (const uint8_t *)act + (size_t)j0 * act_stride;
        for (int64_t i = 0; i < n_w; i++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)i * w_stride;
            float *o = out + (size_t)j0 * out_stride + (size_t)i;
#define AF_CASE(k)                                                                                 \
    case k: affine_rows_avx2(bits, group, k, n, wr, a, act_stride, o, out_stride); break;
            switch (nr) {
                AF_CASE(1) AF_CASE(2) AF_CASE(3) AF_CASE(4) AF_CASE(5) AF_CASE(6) AF_CASE(7)
            default: affine_rows_avx2(bits, group, 8, n, wr, a, act_stride, o, out_stride); break;
            }
#undef AF_CASE
        }
    }
}

#define AFFINE_DEFINE_AVX2(bits, group)                                                            \
    void AFFINE_DOT_NAME(bits, group, avx2)(int64_t n, float *s, const void *w_row,                \
                                            const void *act_row)                                   \
    {                                                                                              \
        affine_rows_avx2(bits, group, 1, n, w_row, act_row, 0, s, 0);                              \
    }                                                                                              \
    void AFFINE_MUL_NAME(bits, group, avx2)(int64_t n, const void *w, size_t w_stride,             \
                                            int64_t n_w, const void *act, size_t act_stride,       \
                                            int64_t n_act, float *out, size_t out_stride)          \
    {                                                                                              \
        affine_mul_avx2(bits, group, n, w, w_stride, n_w, act, act_stride, n_act, out,             \
                        out_stride);                                                               \
    }

AFFINE_FOR_EACH(AFFINE_DEFINE_AVX2)
