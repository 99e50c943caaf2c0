/* AVX-512 VNNI kernel of Q5_0_R16 (q50_r16.h) against Q8_0 activations.
 *
 * A group block is five 64-byte vectors V0..V4 with the 16 rows' eight quads of levels u
 * (0..31) as 8u: five ANDs with 0xF8 give quads 0..4, and seven vpermb lookups of the
 * spare low bits, ORed together, quads 5..7 (vpermb runs on port 5, beside vpdpbusd on
 * port 0). One vpdpbusd of such a vector against 4 activation bytes broadcast from memory
 * adds the 16 rows' partial sums of 4 inputs in 16 int32 lanes, so 8 give a block's 16
 * integer dots sum 8u a, and the accumulator's start value -128 * sum(a) makes them
 * 8 sum (u - 16) a = 8 isum: exact (|8 isum| <= 8 * 32 * 16 * 128 < 2^24, so exact as a
 * float too). The block's scales for 16 rows are one vcvtph2ps of the stored d times 1/8
 * (exact), times the activation's d: (d_w d_act) / 8 with the scalar row's one rounding,
 * and one FMA adds the converted sum to the rows' totals, fma(8 isum, s / 8, acc) =
 * fma(isum, s, acc) bit for bit. Lane r of the totals is row r's dot: no horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, block by block, in
 * every tile (1 to 8 activation rows, which share each decoded weight block), so results
 * do not depend on n_act and equal the scalar row's bit for bit. Per activation row, the
 * blocks' d and -128 sum(a) are prepared once per call (and K chunk). A mat-vec streaming
 * its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/q50_r16.h"
#include "splash/r16_q8_0.h"

/* K chunk (blocks) of a call with more than one tile: 16 weight rows' chunk (22 KiB) and
 * a tile's 8 activation rows (17 KiB) fit L1 together */
#define Q50_KC 64
/* A call over more weight bytes than Q50_STREAM_BYTES is taken to stream them from
 * memory: its first tile prefetches into L2 this far ahead of the block it reads. */
#define Q50_STREAM_BYTES (16u << 10)
#define Q50_PREFETCH 4096

/* vpermb tables (64 entries, each depending on the index's spare bits i & 7 only): bits
 * src .. src + cnt - 1 of a vector's spare bits become bits dst .. of a level, as 8u. */
#define Q50_LUT_B(i, src, cnt, dst)                                                                \
    ((unsigned long long)((((i) >> (src)) & ((1u << (cnt)) - 1)) << (3 + (dst))) << (8 * (i)))
#define Q50_LUT(src, cnt, dst)                                                                     \
    _mm512_set1_epi64((long long)(Q50_LUT_B(0, src, cnt, dst) | Q50_LUT_B(1, src, cnt, dst) |      \
                                  Q50_LUT_B(2, src, cnt, dst) | Q50_LUT_B(3, src, cnt, dst) |      \
                                  Q50_LUT_B(4, src, cnt, dst) | Q50_LUT_B(5, src, cnt, dst) |      \
                                  Q50_LUT_B(6, src, cnt, dst) | Q50_LUT_B(7, src, cnt, dst)))

/* d and -128 sum(q): the kernels use 8u against u - 16 */
static void q50_r16_prepare(const struct splash_q8_0_block *y, int64_t nk,
                            struct splash_r16_q8_0_act *p)
{
    splash_r16_q8_0_prepare(y, nk, p, -128);
}

/* The eight quads (8u) of a block. The stream of quads 5..7 is V0..V4's spare bits
 * (q50_r16.h): quad 5 = V0 bits 0..2, V1 bits 0..1; quad 6 = V1 bit 2, V2 bits 0..2, V3
 * bit 0; quad 7 = V3 bits 1..2, V4 bits 0..2. */
SPLASH_R16_Q8_0_INLINE void q50_r16_quads(const struct q50_r16_block *b, __m512i w[8])
{
    const __m512i f8 = _mm512_set1_epi8((char)0xF8);
    const __m512i v0 = _mm512_loadu_si512(b->qs[0]), v1 = _mm512_loadu_si512(b->qs[1]),
                  v2 = _mm512_loadu_si512(b->qs[2]), v3 = _mm512_loadu_si512(b->qs[3]),
                  v4 = _mm512_loadu_si512(b->qs[4]);
    w[0] = _mm512_and_si512(v0, f8);
    w[1] = _mm512_and_si512(v1, f8);
    w[2] = _mm512_and_si512(v2, f8);
    w[3] = _mm512_and_si512(v3, f8);
    w[4] = _mm512_and_si512(v4, f8);
    /* the ternlog 0xFE is a | b | c */
    w[5] = _mm512_or_si512(_mm512_permutexvar_epi8(v0, Q50_LUT(0, 3, 0)),
                           _mm512_permutexvar_epi8(v1, Q50_LUT(0, 2, 3)));
    w[6] = _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(v1, Q50_LUT(2, 1, 0)),
                                     _mm512_permutexvar_epi8(v2, Q50_LUT(0, 3, 1)),
                                     _mm512_permutexvar_epi8(v3, Q50_LUT(0, 1, 4)), 0xFE);
    w[7] = _mm512_or_si512(_mm512_permutexvar_epi8(v3, Q50_LUT(1, 2, 0)),
                           _mm512_permutexvar_epi8(v4, Q50_LUT(0, 3, 2)));
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (blocks y[r],
 * prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
SPLASH_R16_Q8_0_INLINE void q50_r16_tile(const struct q50_r16_block *b, int64_t nk,
                                         const struct splash_q8_0_block *const *y,
                                         const struct splash_r16_q8_0_act *const *p, const int nr,
                                         float *out, size_t out_stride, const int first,
                                         const int prefetch)
{
    const __m512 eighth = _mm512_set1_ps(0.125f);
    __m512 tot[SPLASH_R16_Q8_0_MAX_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * out_stride);
    for (int64_t i = 0; i < nk; i++, b++) {
        if (prefetch) {
            _Pragma("GCC unroll 6") for (int l = 0; l < 6; l++)
                _mm_prefetch((const char *)b + Q50_PREFETCH + 64 * l, _MM_HINT_T1);
        }
        __m512i w[8];
        q50_r16_quads(b, w);
        const __m512 dw =
            _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d)), eighth);
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        {
            const int8_t *a = y[r][i].qs;
            /* two vpdpbusd chains (shorter latency for a mat-vec), added exactly */
            __m512i acc = _mm512_set1_epi32(p[r][i].c), acc2 = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
            {
                acc = _mm512_dpbusd_epi32(acc, w[2 * k], splash_r16_q8_0_bcast4(a + 8 * k));
                acc2 =
                    _mm512_dpbusd_epi32(acc2, w[2 * k + 1], splash_r16_q8_0_bcast4(a + 8 * k + 4));
            }
            acc = _mm512_add_epi32(acc, acc2);
            const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(p[r][i].d));
            tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, tot[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);
}

/* the rows after the last whole group are the plain format's */
SPLASH_R16_Q8_0_DEFINE_MUL(q50_r16_mul_q8_avx512, struct q50_r16_block, struct splash_r16_q8_0_act,
                           KQ_QK5_0, 1, q50_r16_tile, q50_r16_prepare, q5_0_mul_q8_0_avx2, Q50_KC,
                           Q50_STREAM_BYTES)
