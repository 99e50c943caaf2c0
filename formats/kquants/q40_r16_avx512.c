/* AVX-512 VNNI kernel of Q4_0_R16 (q40_r16.h) against Q8_0 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * of a 64-entry table i & 15 takes the low nibbles out (the bits above a nibble do not
 * matter), and of the vpmultishiftqb-shifted bytes the high nibbles: the codes q in
 * 0..15, unsigned for vpdpbusd. Both run on port 5, beside vpdpbusd on port 0, where a
 * mask or shift would compete with it. One vpdpbusd of such a vector against 4
 * activation bytes broadcast from memory adds the 16 rows' partial sums of 4 inputs, so 8
 * give a block's 16 integer dots sum q a, and the accumulator's start value -8 * sum(a)
 * makes them sum (q - 8) a: exact. The block's scales for 16 rows are one vcvtph2ps of
 * the stored d, times the activation's d (rounded once, as the scalar row's d_w * d_act),
 * and one FMA adds the converted sum to the rows' totals. Lane r of the totals is row r's
 * dot: no horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, block by block, in
 * every tile (1 to 8 activation rows, which share each decoded weight block), so results
 * do not depend on n_act and equal the scalar row's bit for bit. Per activation row, the
 * block's d and -8 sum(a) are prepared once per call (and K chunk) on the stack. A
 * mat-vec streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/q40_r16.h"
#include "splash/r16_q8_0.h"

/* K chunk (blocks) of a call with more than one tile: 16 weight rows' chunk (18 KiB) and
 * a tile's 8 activation rows (17 KiB) fit L1 together */
#define R16_KC 64
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches) prefetches into L2 this far ahead of the block it reads. */
#define R16_STREAM_BYTES (256u << 10)
#define R16_PREFETCH 4096

/* d and -8 sum(q): the levels 0..15 stand for q - 8 */
static void q40_r16_prepare(const struct splash_q8_0_block *y, int64_t nk,
                            struct splash_r16_q8_0_act *p)
{
    splash_r16_q8_0_prepare(y, nk, p, -8);
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (blocks y[r],
 * prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
SPLASH_R16_Q8_0_INLINE void q40_r16_tile(const struct q40_r16_block *b, int64_t nk,
                                         const struct splash_q8_0_block *const *y,
                                         const struct splash_r16_q8_0_act *const *p, const int nr,
                                         float *out, size_t out_stride, const int first,
                                         const int prefetch)
{
    const __m512i lut = _mm512_loadu_si512(splash_r16_nibble_lut);
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    __m512 tot[SPLASH_R16_Q8_0_MAX_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * out_stride);
    for (int64_t i = 0; i < nk; i++, b++) {
        if (prefetch) {
            _Pragma("GCC unroll 5") for (int l = 0; l < 5; l++)
                _mm_prefetch((const char *)b + R16_PREFETCH + 64 * l, _MM_HINT_T1);
        }
        __m512i wv[8];
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        {
            const __m512i v = _mm512_loadu_si512(b->qs[k]);
            wv[2 * k] = _mm512_permutexvar_epi8(v, lut);
            wv[2 * k + 1] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        {
            const int8_t *a = y[r][i].qs;
            /* two vpdpbusd chains (shorter latency for a mat-vec), added exactly */
            __m512i acc = _mm512_set1_epi32(p[r][i].c), acc2 = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
            {
                acc = _mm512_dpbusd_epi32(acc, wv[2 * k], splash_r16_q8_0_bcast4(a + 4 * k));
                acc2 = _mm512_dpbusd_epi32(acc2, wv[2 * k + 1],
                                           splash_r16_q8_0_bcast4(a + 16 + 4 * k));
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
SPLASH_R16_Q8_0_DEFINE_MUL(q40_r16_mul_q8_avx512, struct q40_r16_block, struct splash_r16_q8_0_act,
                           KQ_QK4_0, 1, q40_r16_tile, q40_r16_prepare, q4_0_mul_q8_0_avx512, R16_KC,
                           R16_STREAM_BYTES)
