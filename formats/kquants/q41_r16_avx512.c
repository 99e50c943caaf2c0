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

#define INLINE static inline __attribute__((always_inline))
/* activation rows of a tile: their 2 x 9 totals, scales, the code vectors of one qs line
 * and the constants fill the 32 vector registers (4 rows spill) */
#define R16_MAX_NR 2
/* (d, s) pairs on the stack; more go on the heap */
#define R16_PREP 2048
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

/* One activation block's d and s = d * sum(qs), as floats. */
struct q41_r16_act {
    float d, s;
};

static void q41_r16_prepare(const struct q8_1_block *y, int64_t nk, struct q41_r16_act *p)
{
    for (int64_t i = 0; i < nk; i++) {
        p[i].d = kq_h2f(y[i].d);
        p[i].s = kq_h2f(y[i].s);
    }
}

INLINE __m512i q41_r16_bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* The 16 rows of one group over its nb blocks against nr activation rows (blocks y[r],
 * prepared p[r], or with conv their scales converted here): out[r * out_stride + l] = dot. */
INLINE void q41_r16_tile(const struct q41_r16_block *b, int64_t nb,
                         const struct q8_1_block *const *y, const struct q41_r16_act *const *p,
                         const int nr, float *out, size_t out_stride, const int prefetch,
                         const int conv)
{
    const __m512i lut = _mm512_loadu_si512(q41_r16_lut);
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    /* tot[r][l]: lane sums l of the plain kernel; totm[r]: its sum of m s_a */
    __m512 tot[R16_MAX_NR][8], totm[R16_MAX_NR];
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
        __m512 t[R16_MAX_NR];
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
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, q41_r16_bcast4(a + 4 * k));
                const __m512i ph =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, q41_r16_bcast4(a + 16 + 4 * k));
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

/* Every activation row (prepared blocks prep[j * nb ..], or NULL to convert the scales in
 * the tiles) against every whole group: group by group, every tile of up to 2 activation
 * rows while the group's blocks are in L1/L2 (the first tile over streaming weights
 * fetches ahead). */
static void q41_r16_run(const char *wb, size_t w_stride, int64_t n_full, int64_t nb,
                        const void *act, size_t act_stride, int64_t n_act,
                        const struct q41_r16_act *prep, float *out, size_t out_stride, int stream)
{
    for (int64_t g = 0; g < n_full; g += Q41_R16_ROWS) {
        const struct q41_r16_block *b = (const struct q41_r16_block *)(wb + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j += R16_MAX_NR) {
            const int nr = n_act - j < R16_MAX_NR ? (int)(n_act - j) : R16_MAX_NR;
            const struct q8_1_block *y[R16_MAX_NR];
            const struct q41_r16_act *pp[R16_MAX_NR] = {NULL};
            for (int r = 0; r < nr; r++) {
                y[r] =
                    (const struct q8_1_block *)((const char *)act + (size_t)(j + r) * act_stride);
                if (prep)
                    pp[r] = prep + (size_t)(j + r) * (size_t)nb;
            }
            float *o = out + (size_t)j * out_stride + g;
            const int pf = stream && j == 0;
            if (!prep) {
                for (int r = 0; r < nr; r++)
                    q41_r16_tile(b, nb, y + r, pp, 1, o + (size_t)r * out_stride, out_stride, 0, 1);
            } else if (nr == 1 && pf) {
                q41_r16_tile(b, nb, y, pp, 1, o, out_stride, 1, 0);
            } else if (nr == 1) {
                q41_r16_tile(b, nb, y, pp, 1, o, out_stride, 0, 0);
            } else if (pf) {
                q41_r16_tile(b, nb, y, pp, 2, o, out_stride, 1, 0);
            } else {
                q41_r16_tile(b, nb, y, pp, 2, o, out_stride, 0, 0);
            }
        }
    }
}

void q41_r16_mul_q8_1_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    const int64_t nb = n / KQ_QK4_1;
    const int64_t n_full = n_w / Q41_R16_ROWS * Q41_R16_ROWS;
    const char *wb = w;
    const int stream = (size_t)n_full * w_stride > R16_STREAM_BYTES;
    /* every activation row's scales converted once (so each group is read from memory
     * once per call), on the stack or the heap; without either, the tiles convert them
     * (the same values: the same sums either way) */
    struct q41_r16_act stack[R16_PREP], *prep = NULL;
    if (n_full && (uint64_t)n_act * (uint64_t)nb <= R16_PREP)
        prep = stack;
    else if (n_full)
        prep = malloc((size_t)n_act * (size_t)nb * sizeof *prep);
    for (int64_t j = 0; prep && j < n_act; j++)
        q41_r16_prepare((const struct q8_1_block *)((const char *)act + (size_t)j * act_stride), nb,
                        prep + (size_t)j * (size_t)nb);
    if (n_full)
        q41_r16_run(wb, w_stride, n_full, nb, act, act_stride, n_act, prep, out, out_stride,
                    stream);
    if (prep != stack)
        free(prep);
    /* the rows after the last whole group are plain Q4_1 rows */
    if (n_full < n_w)
        q4_1_mul_q8_1_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                           act_stride, n_act, out + n_full, out_stride);
}
