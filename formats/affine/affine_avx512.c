/* MLX affine x Q8_0 kernels for AVX-512 (VNNI + VBMI).
 *
 * Two 32-code pieces (two Q8_0 blocks, from one group or, at 32 per group, from two)
 * are unpacked together for any width: every 8 codes of `bits` fill exactly `bits`
 * bytes, so a byte permute gives each qword the `bits` bytes of its 8 codes and
 * vpmultishiftqb pulls code e from bit e * bits to the bottom of byte e. vpdpbusd
 * then forms Σ q a and Σ a per 4 elements (codes are unsigned, activations signed),
 * exact in int32; lanes 0..7 belong to the first piece, 8..15 to the second. vec_dot
 * is mul_rows for one row, so the two give identical results. */
#include <immintrin.h>

#include "formats/affine/affine.h"
#include "splash/fp.h"

#define AFFINE_MAX_ROWS 8

/* The code bytes of one piece (4 * bits bytes) in the low bytes of a ymm; masked, so
 * nothing past them is read. */
static inline __attribute__((always_inline)) __m256i affine_piece_avx512(int bits,
                                                                         const uint8_t *p)
{
    const __mmask32 m = bits == 8 ? 0xffffffffu : (__mmask32)((1u << (4 * bits)) - 1);
    return _mm256_maskz_loadu_epi8(m, p);
}

/* Two pieces (one per ymm half) -> 64 codes in element order. Qword t reads bytes
 * 32 (t / 4) + bits (t % 4) .. + 7; its control bytes are 0, bits, .., 7 bits. */
static inline __attribute__((always_inline)) __m512i affine_unpack64_avx512(int bits, __m256i p0,
                                                                            __m256i p1)
{
#define AF_QW(t)                                                                                   \
    (long long)((uint64_t)(32 * ((t) / 4) + bits * ((t) % 4)) * 0x0101010101010101ull +            \
                0x0706050403020100ull)
    const __m512i perm = _mm512_set_epi64(AF_QW(7), AF_QW(6), AF_QW(5), AF_QW(4), AF_QW(3),
                                          AF_QW(2), AF_QW(1), AF_QW(0));
#undef AF_QW
    const __m512i ctrl = _mm512_set1_epi64((long long)((uint64_t)bits * 0x0706050403020100ull));
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(p0), p1, 1);
    const __m512i v = _mm512_multishift_epi64_epi8(ctrl, _mm512_permutexvar_epi8(perm, x));
    return bits == 8 ? v : _mm512_and_si512(v, _mm512_set1_epi8((char)((1 << bits) - 1)));
}

static inline __m512 affine_halves_ps(float lo, float hi)
{
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

/* nr activation rows (a constant after inlining) against one weight row. */
static inline __attribute__((always_inline)) void
affine_rows_avx512(int bits, int group, int nr, int64_t n, const uint8_t *w, const uint8_t *act,
                   size_t act_stride, float *out, size_t out_stride)
{
    const int cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const int sub = group / SPLASH_QK8_0;
    const int64_t n_pieces = n / SPLASH_QK8_0;
    const __m512i ones8 = _mm512_set1_epi8(1);
    __m512 acc[AFFINE_MAX_ROWS];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n_pieces; k += 2) {
        /* piece k, and k + 1 unless k is the last (only possible at 32 per group) */
        const int has1 = k + 1 < n_pieces;
        const uint8_t *b0 = w + (size_t)(k / sub) * (size_t)bb;
        const uint8_t *b1 = w + (size_t)((k + 1) / sub) * (size_t)bb;
        const __m256i p0 = affine_piece_avx512(bits, b0 + 4 * bits * (k % sub));
        const __m256i p1 = has1 ? affine_piece_avx512(bits, b1 + 4 * bits * ((k + 1) % sub))
                                : _mm256_setzero_si256();
        const __m512i q = affine_unpack64_avx512(bits, p0, p1);
        const float s0 = splash_bf16_to_fp32(affine_load_u16(b0 + cb));
        const float z0 = splash_bf16_to_fp32(affine_load_u16(b0 + cb + 2));
        const float s1 = has1 ? splash_bf16_to_fp32(affine_load_u16(b1 + cb)) : 0.0f;
        const float z1 = has1 ? splash_bf16_to_fp32(affine_load_u16(b1 + cb + 2)) : 0.0f;
        const __m512 vs = affine_halves_ps(s0, s1), vz = affine_halves_ps(z0, z1);
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)(const void *)(act + (size_t)r * act_stride) + k;
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)y[0].qs);
            const __m256i a1 = has1 ? _mm256_loadu_si256((const __m256i *)(const void *)y[1].qs)
                                    : _mm256_setzero_si256();
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
            const __m512i zero = _mm512_setzero_si512();
            const __m512i qa = _mm512_dpbusd_epi32(zero, q, a);
            const __m512i sa = _mm512_dpbusd_epi32(zero, ones8, a);
            /* d_a of both pieces, converted together and spread over the halves */
            const __m128i dd = _mm_cvtsi32_si128(y[0].d | (has1 ? (int)y[1].d << 16 : 0));
            const __m512 vda = _mm512_permutexvar_ps(
                _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                _mm512_castps128_ps512(_mm_cvtph_ps(dd)));
            /* acc += d_a (s qa + z sa): one FMA on the loop-carried chain */
            const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(qa), vs,
                                             _mm512_mul_ps(_mm512_cvtepi32_ps(sa), vz));
            acc[r] = _mm512_fmadd_ps(t, vda, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[(size_t)r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

static inline __attribute__((always_inline)) void
affine_mul_avx512(int bits, int group, int64_t n, const void *w, size_t w_stride, int64_t n_w,
                  const void *act, size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    for (int64_t j0 = 0; j0 < n_act; j0 += AFFINE_MAX_ROWS) {
        const int64_t nr = n_act - j0 < AFFINE_MAX_ROWS ? n_act - j0 : AFFINE_MAX_ROWS;
        const uint8_t *a = (const uint8_t *)act + (size_t)j0 * act_stride;
        for (int64_t i = 0; i < n_w; i++) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)i * w_stride;
            float *o = out + (size_t)j0 * out_stride + (size_t)i;
#define AF_CASE(k)                                                                                 \
    case k: affine_rows_avx512(bits, group, k, n, wr, a, act_stride, o, out_stride); break;
            switch (nr) {
                AF_CASE(1) AF_CASE(2) AF_CASE(3) AF_CASE(4) AF_CASE(5) AF_CASE(6) AF_CASE(7)
            default: affine_rows_avx512(bits, group, 8, n, wr, a, act_stride, o, out_stride); break;
            }
#undef AF_CASE
        }
    }
}

#define AFFINE_DEFINE_AVX512(bits, group)                                                          \
    void AFFINE_DOT_NAME(bits, group, avx512)(int64_t n, float *s, const void *w_row,              \
                                              const void *act_row)                                 \
    {                                                                                              \
        affine_rows_avx512(bits, group, 1, n, w_row, act_row, 0, s, 0);                            \
    }                                                                                              \
    void AFFINE_MUL_NAME(bits, group, avx512)(int64_t n, const void *w, size_t w_stride,           \
                                              int64_t n_w, const void *act, size_t act_stride,     \
                                              int64_t n_act, float *out, size_t out_stride)        \
    {                                                                                              \
        affine_mul_avx512(bits, group, n, w, w_stride, n_w, act, act_stride, n_act, out,           \
                          out_stride);                                                             \
    }

AFFINE_FOR_EACH(AFFINE_DEFINE_AVX512)
