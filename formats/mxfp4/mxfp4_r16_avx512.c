/* AVX-512 VNNI kernel of MXFP4_R16 (mxfp4_r16.h) against Q8_0 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * looks the low nibbles up (a 16-entry table repeated over its 64 entries, so the bits
 * above a nibble do not matter) as the doubled E2M1 values plus 128, unsigned for
 * vpdpbusd; the high nibbles are brought down by vpmultishiftqb first (port 5, beside
 * vpermb, where a shift would compete with vpdpbusd for port 0). One vpdpbusd of such a
 * vector against 4 activation bytes broadcast from memory adds the 16 rows' partial sums
 * of 4 inputs, so 8 give a block's 16 integer dots (biased by 128 * sum(a), which the
 * accumulator's start value -128 * sum(a) takes back: exact). The block's scale for 16
 * rows is one vscalefps of the activation's d by the stored exponents x = e - 128 (2^x d,
 * rounded once, as the scalar row's 2^(e - 128) * d), and one FMA adds the converted sum
 * to the rows' totals. Lane r of the totals is row r's dot: no horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, block by block, in
 * every tile (1 to 8 activation rows, which share each decoded weight block), so results
 * do not depend on n_act and equal the scalar row's bit for bit. Per activation row, the
 * block's d and -128 sum(a) are prepared once per call (and K chunk), on the stack or, for
 * many rows, the heap. The loops run group-outer: each group's weights are read from
 * memory once per call, however many tiles of activation rows share them. A mat-vec
 * block is ~26 vector ops (8 vpermb, 4 vpmultishiftqb, 8 vpdpbusd, scale and
 * sum), about half the plain MXFP4 kernel's cycles per weight; with 8 activation rows the
 * decoded block serves 8 rows' 64 vpdpbusd (~70 int8 multiply-adds per cycle). A mat-vec
 * streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/mxfp4/mxfp4_r16.h"
#include "splash/r16_q8_0.h"

/* K chunk (blocks) of a call with more than one tile: 16 weight rows' chunk (17 KiB) and
 * a tile's 8 activation rows (17 KiB) fit L1 together */
#define R16_KC 64
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches, as the engine splits it) prefetches into L2 this far ahead of the block it
 * reads: from memory that takes it from ~60% to ~85% of the read bandwidth; in cache it
 * would cost ~3%. */
#define R16_STREAM_BYTES (256u << 10)
#define R16_PREFETCH 4096

/* Doubled E2M1 values plus 128 per code, repeated to vpermb's 64 entries. */
static const uint8_t r16_lut[64] = {
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
};

/* d and -128 sum(q): the looked-up values carry a +128 bias */
static void r16_prepare(const struct splash_q8_0_block *y, int64_t nk,
                        struct splash_r16_q8_0_act *p)
{
    splash_r16_q8_0_prepare(y, nk, p, -128);
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (blocks y[r],
 * prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
SPLASH_R16_Q8_0_INLINE void r16_tile(const struct mxfp4_r16_block *b, int64_t nk,
                                     const struct splash_q8_0_block *const *y,
                                     const struct splash_r16_q8_0_act *const *p, const int nr,
                                     float *out, size_t out_stride, const int first,
                                     const int prefetch)
{
    const __m512i lut = _mm512_loadu_si512(r16_lut);
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
        const __m512 x =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->x)));
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
            const __m512 s = _mm512_scalef_ps(_mm512_set1_ps(p[r][i].d), x);
            tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, tot[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);
}

/* the rows after the last whole group are the plain format's */
SPLASH_R16_Q8_0_DEFINE_MUL(mxfp4_r16_mul_q8_avx512, struct mxfp4_r16_block,
                           struct splash_r16_q8_0_act, MXFP4_QK, 1, r16_tile, r16_prepare,
                           mxfp4_q8_avx512vnni_mul_rows, R16_KC, R16_STREAM_BYTES)
