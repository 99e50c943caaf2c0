/* AVX-512 VNNI kernel of af<B>g<G>_R16 (affine_r16.h) against Q8_0 activations.
 *
 * 4-bit: piece p of a block holds, in int32 lane r of qs[p][k], row r's nibbles of values
 * 4k .. 4k + 3 (low) and 16 + 4k .. 16 + 4k + 3 (high). vpermb of a 64-entry table
 * i & 15 takes the low nibbles out, and of the vpmultishiftqb-shifted bytes the high
 * ones: the codes 0..15, unsigned for vpdpbusd, on port 5 beside vpdpbusd on port 0.
 * 8-bit: lane r of qs[p][k] is row r's codes 4k .. 4k + 3 as they are.
 * Eight vpdpbusd against 4 broadcast activation bytes each give the 16 rows' exact
 * Σ q a of the piece; the float steps are the scalar row's (affine_r16.h): per piece
 * acc = fma(isum, s d, acc), per group acc = fma(z, A, acc), with the 16 rows' bf16
 * scales and biases widened from one 64-byte line. Lane r of every
 * vector is row r: no horizontal sums, and every tile (1 to 8 activation rows sharing
 * each decoded piece) gives each (weight row, activation row) pair the same bits.
 *
 * Per activation row and call (and K chunk), each Q8_0 block's d and its group's A =
 * Σ_p d_p Σa_p are prepared once on the stack (vpsadbw sums the bytes). A mat-vec
 * streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "formats/affine/affine_r16.h"
#include "splash/r16_q8_0.h"

/* K chunk (blocks) of a call with more than one tile: 2048 values, as Q4_0_R16's 64
 * blocks, so a group's chunk (18 KiB) and a tile's 8 activation rows (17 KiB) fit L1 */
#define AF_R16_KC(group) (2048 / (group))
/* A mat-vec over more weight bytes than this (a matrix larger than the caches)
 * prefetches into L2 this far ahead of the block it reads. */
#define AF_R16_STREAM_BYTES (256u << 10)
#define AF_R16_PREFETCH 4096

/* d of n Q8_0 blocks and A of their groups (per of them), in the scalar row's steps:
 * the byte sums are exact, A a chain of FMAs over the group's blocks. */
static inline __attribute__((always_inline)) void
af_r16_prepare_avx512(int per, const struct splash_q8_0_block *y, int64_t n,
                      struct affine_r16_act *p)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < n; i += per) {
        float a = 0.0f;
        for (int k = 0; k < per; k++) {
            /* sum(q + 128) of 8-byte quarters, then of the block */
            const __m256i s = _mm256_sad_epu8(
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y[i + k].qs), k80),
                _mm256_setzero_si256());
            __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
            const int sum = _mm_cvtsi128_si32(t) - 32 * 128;
            p[i + k].d = _cvtsh_ss(y[i + k].d);
            a = fmaf((float)sum, p[i + k].d, a);
        }
        for (int k = 0; k < per; k++)
            p[i + k].a = a;
    }
}

/* The 16 rows' bf16 values of one 32-byte run of a block, widened to float. */
static inline __attribute__((always_inline)) __m512 af_r16_bf16x16(const uint8_t *p)
{
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (blocks y[r],
 * prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
static inline __attribute__((always_inline)) void
af_r16_tile(int bits, int group, const uint8_t *b, int64_t nk,
            const struct splash_q8_0_block *const *y, const struct affine_r16_act *const *p,
            const int nr, float *out, size_t out_stride, const int first, const int prefetch)
{
    const int per = group / SPLASH_QK8_0;
    const size_t bb = AFFINE_R16_BLOCK_BYTES(bits, group);
    const __m512i lut = _mm512_loadu_si512(splash_r16_nibble_lut);
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    __m512 tot[SPLASH_R16_Q8_0_MAX_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * out_stride);
    for (int64_t i = 0; i < nk; i++, b += bb) {
        if (prefetch) {
            for (size_t l = 0; l < bb / 64; l++)
                _mm_prefetch((const char *)b + AF_R16_PREFETCH + 64 * l, _MM_HINT_T1);
        }
        const __m512 s = af_r16_bf16x16(b + AFFINE_R16_S), z = af_r16_bf16x16(b + AFFINE_R16_Z);
        for (int k = 0; k < per; k++) {
            const uint8_t *qs = b + AFFINE_R16_QS + (size_t)k * AFFINE_R16_PIECE_BYTES(bits);
            /* wv[2c]: values 4c .. 4c + 3; wv[2c + 1]: values 16 + 4c .. 16 + 4c + 3 */
            __m512i wv[8];
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            {
                if (bits == 8) {
                    wv[2 * c] = _mm512_loadu_si512(qs + 64 * c);
                    wv[2 * c + 1] = _mm512_loadu_si512(qs + 64 * (4 + c));
                } else {
                    const __m512i v = _mm512_loadu_si512(qs + 64 * c);
                    wv[2 * c] = _mm512_permutexvar_epi8(v, lut);
                    wv[2 * c + 1] =
                        _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);
                }
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            {
                const int8_t *a = y[r][i * per + k].qs;
                /* two vpdpbusd chains (shorter latency for a mat-vec), added exactly */
                __m512i acc = _mm512_setzero_si512(), acc2 = _mm512_setzero_si512();
                _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                {
                    acc = _mm512_dpbusd_epi32(acc, wv[2 * c], splash_r16_q8_0_bcast4(a + 4 * c));
                    acc2 = _mm512_dpbusd_epi32(acc2, wv[2 * c + 1],
                                               splash_r16_q8_0_bcast4(a + 16 + 4 * c));
                }
                acc = _mm512_add_epi32(acc, acc2);
                const __m512 sd = _mm512_mul_ps(s, _mm512_set1_ps(p[r][i * per + k].d));
                tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), sd, tot[r]);
            }
        }
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
            _mm512_fmadd_ps(z, _mm512_set1_ps(p[r][i * per].a), tot[r]);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);
}

/* Per (bits, group): its block type (for the driver's pointer steps), prepare, tile and
 * mul_rows; the rows after the last whole group are the plain format's. */
#define AF_R16_DEFINE_AVX512(bits, group)                                                          \
    struct af##bits##g##group##_r16_block {                                                        \
        uint8_t bytes[AFFINE_R16_BLOCK_BYTES(bits, group)];                                        \
    };                                                                                             \
    static void af##bits##g##group##_r16_prepare(const struct splash_q8_0_block *y, int64_t n,     \
                                                 struct affine_r16_act *p)                         \
    {                                                                                              \
        af_r16_prepare_avx512(group / SPLASH_QK8_0, y, n, p);                                      \
    }                                                                                              \
    SPLASH_R16_Q8_0_INLINE void af##bits##g##group##_r16_tile(                                     \
        const struct af##bits##g##group##_r16_block *b, int64_t nk,                                \
        const struct splash_q8_0_block *const *y, const struct affine_r16_act *const *p,           \
        const int nr, float *out, size_t out_stride, const int first, const int prefetch)          \
    {                                                                                              \
        af_r16_tile(bits, group, b->bytes, nk, y, p, nr, out, out_stride, first, prefetch);        \
    }                                                                                              \
    SPLASH_R16_Q8_0_DEFINE_MUL(affine_b##bits##g##group##_r16_mul_avx512,                          \
                               struct af##bits##g##group##_r16_block, struct affine_r16_act,       \
                               group, group / SPLASH_QK8_0, af##bits##g##group##_r16_tile,         \
                               af##bits##g##group##_r16_prepare,                                   \
                               AFFINE_MUL_NAME(bits, group, avx512), AF_R16_KC(group),             \
                               AF_R16_STREAM_BYTES)

AFFINE_R16_FOR_EACH(AF_R16_DEFINE_AVX512)
