/* AVX-512 VNNI kernel of Q4_1_R16 (q41_r16.h) against Q8_1 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * of a 64-entry table i & 15 takes the low nibbles out (the bits above a nibble do not
 * matter), and of the vpmultishiftqb-shifted bytes the high nibbles: the codes q in
 * 0..15, unsigned for vpdpbusd. Both run on port 5, beside vpdpbusd on port 0, where a
 * mask or shift would compete with it. One vpdpbusd of such a vector against 4
 * activation bytes broadcast from memory gives the 16 rows' exact sums of q a over 4
 * consecutive inputs: values 4l .. 4l + 3 of the block for the plain kernel's lane l
 * (q41_r16.h), so 8 of them give the 8 lane sums of 16 rows. Each is converted and
 * added by FMA, with the block's t = d_w d_a (two vcvtph2ps decode the 16 rows' d and m
 * from one 64-byte line), to its own lane total, and m s_a to a ninth; the end adds them
 * in the plain kernel's order. Lane r of every vector is row r: no horizontal sums.
 *
 * These are Q4_1's AVX2 kernel's float steps, so every (weight row, activation row) pair
 * gets its bits (and the scalar row's) in every tile of 1 or 2 activation rows. A tile
 * walks whole rows; a call takes each group's blocks from memory once, for its first
 * tile, and from L2 for the others (the per-call activation scales are converted once, on
 * the stack or the heap). A mat-vec streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/q41_r16.h"
#include "formats/kquants/r16_q8_1.h"
#include "formats/r16_q8_0.h"

#define INLINE static inline __attribute__((always_inline))
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches) prefetches into L2 this far ahead of the block it reads. */
#define R16_STREAM_BYTES (256u << 10)
#define R16_PREFETCH 4096

/* i & 15 for vpermb's 64 entries: a byte's low nibble. */
static const uint8_t q41_r16_lut[64] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 0,  1,  2,  3,  4,  5,
    6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
    12, 13, 14, 15, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
};

/* The 16 rows of one group over its nb blocks against nr activation rows (blocks y[r],
 * prepared p[r], or with conv their scales converted here): out[r * out_stride + l] = dot. */
INLINE void q41_r16_tile(const struct q41_r16_block *b, int64_t nb,
                         const struct q8_1_block *const *y, const struct r16_q8_1_act *const *p,
                         const int nr, float *out, size_t out_stride, const int prefetch,
                         const int conv)
{
    const __m512i lut = _mm512_loadu_si512(q41_r16_lut);
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    /* tot[r][l]: lane sums l of the plain kernel; totm[r]: its sum of m s_a */
    __m512 tot[R16_Q8_1_MAX_NR][8], totm[R16_Q8_1_MAX_NR];
    _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)
    {
        totm[r] = _mm512_setzero_ps();
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) tot[r][l] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            _Pragma("GCC unroll 5") for (int l = 0; l < 5; l++)
                _mm_prefetch((const char *)b + R16_PREFETCH + 64 * l, _MM_HINT_T1);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->m));
        __m512 t[R16_Q8_1_MAX_NR];
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)
        {
            const float da = conv ? kq_h2f(y[r][i].d) : p[r][i].d;
            const float sa = conv ? kq_h2f(y[r][i].s) : p[r][i].s;
            t[r] = _mm512_mul_ps(dw, _mm512_set1_ps(da));
            totm[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa), totm[r]);
        }
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        {
            const __m512i v = _mm512_loadu_si512(b->qs[k]);
            const __m512i lo = _mm512_permutexvar_epi8(v, lut);
            const __m512i hi = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);
            _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)
            {
                const int8_t *a = y[r][i].qs;
                const __m512i pl =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, r16_q8_0_bcast4(a + 4 * k));
                const __m512i ph = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                                       r16_q8_0_bcast4(a + 16 + 4 * k));
                tot[r][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pl), t[r], tot[r][k]);
                tot[r][4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ph), t[r], tot[r][4 + k]);
            }
        }
    }
    /* the plain kernel's horizontal sum of its 8 lanes, then the minimum's total */
    _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)
    {
        const __m512 s0 = _mm512_add_ps(tot[r][0], tot[r][4]);
        const __m512 s1 = _mm512_add_ps(tot[r][1], tot[r][5]);
        const __m512 s2 = _mm512_add_ps(tot[r][2], tot[r][6]);
        const __m512 s3 = _mm512_add_ps(tot[r][3], tot[r][7]);
        const __m512 sum = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
        _mm512_storeu_ps(out + (size_t)r * out_stride, _mm512_add_ps(sum, totm[r]));
    }
}

/* the rows after the last whole group are the plain format's */
R16_Q8_1_DEFINE_MUL(q41_r16_mul_q8_1_avx512, struct q41_r16_block, KQ_QK4_1, q41_r16_tile,
                    q4_1_mul_q8_1_avx2, R16_STREAM_BYTES)
