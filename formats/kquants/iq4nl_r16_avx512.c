/* AVX-512 VNNI kernel of IQ4_NL_R16 (iq4nl_r16.h) against Q8_0 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpshufb
 * looks the nibbles up (the low ones masked, the high ones shifted down and masked) in
 * a 16-entry table of the IQ4_NL levels plus 128, unsigned for vpdpbusd. One vpdpbusd
 * of such a vector against 4 activation bytes broadcast from memory adds the 16 rows'
 * partial sums of 4 inputs, so 8 give a block's 16 integer dots (biased by 128 * sum(a),
 * which the accumulator's start value -128 * sum(a) takes back: exact, as
 * |dot| <= 32 * 127 * 127 < 2^24 is exact as a float too). The block's scale for 16
 * rows is one vcvtph2ps of the stored d times the activation's d (one rounding, as the
 * scalar row's d * d_act), and one FMA adds the converted sum to the rows' totals. Lane
 * r of the totals is row r's dot: no horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, block by block, in
 * every tile (1 to 8 activation rows, which share each decoded weight block), so results
 * do not depend on n_act and equal the scalar row's bit for bit. Per activation row, the
 * block's d and -128 sum(a) are prepared once per call (and K chunk), on the stack or, for
 * many rows, the heap. The loops run group-outer: each group's weights are read from
 * memory once per call, however many tiles of activation rows share them. A streaming
 * mat-vec prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/iq4nl_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "splash/r16_q8_0.h"

/* K chunk (blocks) of a call with more than one tile: 16 weight rows' chunk (18 KiB) and
 * a tile's 8 activation rows (17 KiB) fit L1 together */
#define R16_KC 64
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches) prefetches into L2 this far ahead of the block it reads. */
#define R16_STREAM_BYTES (256u << 10)
#ifndef R16_PREFETCH
#define R16_PREFETCH 4096
#endif

/* d and -128 sum(q): the looked-up values carry a +128 bias */
static void iq4nl_r16_prepare(const struct splash_q8_0_block *y, int64_t nk,
                              struct splash_r16_q8_0_act *p)
{
    splash_r16_q8_0_prepare(y, nk, p, -128);
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (blocks y[r],
 * prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
SPLASH_R16_Q8_0_INLINE void iq4nl_r16_tile(const struct iq4nl_r16_block *b, int64_t nk,
                                           const struct splash_q8_0_block *const *y,
                                           const struct splash_r16_q8_0_act *const *p, const int nr,
                                           float *out, size_t out_stride, const int first,
                                           const int prefetch)
{
    /* the IQ4_NL levels + 128 in every 128-bit lane */
    const __m512i lut =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values)),
                         _mm512_set1_epi8((char)0x80));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
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
            wv[2 * k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
            wv[2 * k + 1] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
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
SPLASH_R16_Q8_0_DEFINE_MUL(iq4nl_r16_mul_q80_avx512, struct iq4nl_r16_block,
                           struct splash_r16_q8_0_act, KQ_QK4_NL, 1, iq4nl_r16_tile,
                           iq4nl_r16_prepare, iq4nl_mul_rows_q80_avx512, R16_KC, R16_STREAM_BYTES)
