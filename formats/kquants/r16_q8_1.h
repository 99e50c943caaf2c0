/* What the 16-row repacked AVX-512 kernels against Q8_1 activations (Q4_1_R16, Q5_1_R16)
 * share: the activation blocks' scales converted once per call, and the driver that walks
 * the call's weight groups once with tiles of up to R16_Q8_1_MAX_NR activation rows.
 *
 * A kernel defines its block type and
 * `TILE(b, nb, y, pp, nr, out, out_stride, prefetch, conv)`: the 16 rows of one group over
 * all nb blocks against nr activation rows (prepared scales pp[r], or with conv the
 * scales converted in the tile: the same values), then R16_Q8_1_DEFINE_MUL defines its
 * mul_rows. */
#ifndef SPLASH_FORMATS_KQUANTS_R16_Q8_1_H
#define SPLASH_FORMATS_KQUANTS_R16_Q8_1_H

#include <stdint.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "splash/r16_q8_0.h"

#define R16_Q8_1_ROWS 16
/* activation rows of a tile: their 2 x 9 totals, scales, the code vectors of one qs line
 * and the constants fill the 32 vector registers (4 rows spill) */
#define R16_Q8_1_MAX_NR 2
#define R16_Q8_1_PREP 2048 /* (d, s) pairs on the stack; more go on the heap */

/* One activation block's d and s = d * sum(qs), as floats. */
struct r16_q8_1_act {
    float d, s;
};

static inline void r16_q8_1_prepare(const struct splash_q8_1_block *y, int64_t nk,
                                    struct r16_q8_1_act *p)
{
    for (int64_t i = 0; i < nk; i++) {
        p[i].d = kq_h2f(y[i].d);
        p[i].s = kq_h2f(y[i].s);
    }
}

/* Defines NAME, the tile of a format with BLOCK_T blocks (d[16], m[16] and qs[4][64] as
 * Q4_1_R16 lays them out): the 16 rows of one group over its nb blocks against nr
 * activation rows (blocks y[r], prepared p[r], or with conv their scales converted here):
 * out[r * out_stride + l] = dot. Each qs line gives its 16 rows' low and high nibbles;
 * CODES(b, k, &lo, &hi) makes the codes of line k from them (Q5_1 adds its fifth bits).
 * These are the plain AVX2 kernels' float steps: 8 lane sums, then the minimum's. */
#define R16_Q8_1_DEFINE_TILE(NAME, BLOCK_T, CODES)                                                 \
    SPLASH_R16_Q8_0_INLINE void NAME(                                                              \
        const BLOCK_T *b, int64_t nb, const struct splash_q8_1_block *const *y,                    \
        const struct r16_q8_1_act *const *p, const int nr, float *out, size_t out_stride,          \
        const int prefetch, const int conv)                                                        \
    {                                                                                              \
        const __m512i lut = _mm512_loadu_si512(splash_r16_nibble_lut);                             \
        const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);                                \
        /* tot[r][l]: lane sums l of the plain kernel; totm[r]: its sum of m s_a */                \
        __m512 tot[R16_Q8_1_MAX_NR][8], totm[R16_Q8_1_MAX_NR];                                     \
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                       \
        {                                                                                          \
            totm[r] = _mm512_setzero_ps();                                                         \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) tot[r][l] = _mm512_setzero_ps();   \
        }                                                                                          \
        for (int64_t i = 0; i < nb; i++, b++) {                                                    \
            if (prefetch) {                                                                        \
                for (int l = 0; l < (int)(sizeof *b / 64); l++)                                    \
                    _mm_prefetch((const char *)b + R16_PREFETCH + 64 * l, _MM_HINT_T1);            \
            }                                                                                      \
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));          \
            const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->m));          \
            __m512 t[R16_Q8_1_MAX_NR];                                                             \
            _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                   \
            {                                                                                      \
                const float da = conv ? kq_h2f(y[r][i].d) : p[r][i].d;                             \
                const float sa = conv ? kq_h2f(y[r][i].s) : p[r][i].s;                             \
                t[r] = _mm512_mul_ps(dw, _mm512_set1_ps(da));                                      \
                totm[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa), totm[r]);                        \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                                    \
            {                                                                                      \
                const __m512i v = _mm512_loadu_si512(b->qs[k]);                                    \
                __m512i lo = _mm512_permutexvar_epi8(v, lut);                                      \
                __m512i hi = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);  \
                CODES(b, k, &lo, &hi);                                                             \
                _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                               \
                {                                                                                  \
                    const int8_t *a = y[r][i].qs;                                                  \
                    const __m512i pl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,             \
                                                           splash_r16_q8_0_bcast4(a + 4 * k));     \
                    const __m512i ph = _mm512_dpbusd_epi32(                                        \
                        _mm512_setzero_si512(), hi, splash_r16_q8_0_bcast4(a + 16 + 4 * k));       \
                    tot[r][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pl), t[r], tot[r][k]);          \
                    tot[r][4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ph), t[r], tot[r][4 + k]);  \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        /* the plain kernel's horizontal sum of its 8 lanes, then the minimum's total */           \
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                       \
        {                                                                                          \
            const __m512 s0 = _mm512_add_ps(tot[r][0], tot[r][4]);                                 \
            const __m512 s1 = _mm512_add_ps(tot[r][1], tot[r][5]);                                 \
            const __m512 s2 = _mm512_add_ps(tot[r][2], tot[r][6]);                                 \
            const __m512 s3 = _mm512_add_ps(tot[r][3], tot[r][7]);                                 \
            const __m512 sum = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));        \
            _mm512_storeu_ps(out + (size_t)r * out_stride, _mm512_add_ps(sum, totm[r]));           \
        }                                                                                          \
    }

/* Like R16_Q8_1_DEFINE_TILE, in the block order of ggml's generic dot instead (Q5_1's
 * reference runs): each block's exact integer sum per row, then
 * tot = tot + ((d_w d_a) sumi + m_w s_a) in separate float steps, the scalar row's bits. */
#define R16_Q8_1_DEFINE_TILE_BLOCKWISE(NAME, BLOCK_T, CODES)                                       \
    SPLASH_R16_Q8_0_INLINE void NAME(                                                              \
        const BLOCK_T *b, int64_t nb, const struct splash_q8_1_block *const *y,                    \
        const struct r16_q8_1_act *const *p, const int nr, float *out, size_t out_stride,          \
        const int prefetch, const int conv)                                                        \
    {                                                                                              \
        const __m512i lut = _mm512_loadu_si512(splash_r16_nibble_lut);                             \
        const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);                                \
        __m512 tot[R16_Q8_1_MAX_NR];                                                               \
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();         \
        for (int64_t i = 0; i < nb; i++, b++) {                                                    \
            if (prefetch) {                                                                        \
                for (int l = 0; l < (int)(sizeof *b / 64); l++)                                    \
                    _mm_prefetch((const char *)b + R16_PREFETCH + 64 * l, _MM_HINT_T1);            \
            }                                                                                      \
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));          \
            const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->m));          \
            __m512i isum[R16_Q8_1_MAX_NR];                                                         \
            _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++) isum[r] = _mm512_setzero_si512(); \
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                                    \
            {                                                                                      \
                const __m512i v = _mm512_loadu_si512(b->qs[k]);                                    \
                __m512i lo = _mm512_permutexvar_epi8(v, lut);                                      \
                __m512i hi = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);  \
                CODES(b, k, &lo, &hi);                                                             \
                _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                               \
                {                                                                                  \
                    const int8_t *a = y[r][i].qs;                                                  \
                    isum[r] = _mm512_dpbusd_epi32(isum[r], lo, splash_r16_q8_0_bcast4(a + 4 * k)); \
                    isum[r] =                                                                      \
                        _mm512_dpbusd_epi32(isum[r], hi, splash_r16_q8_0_bcast4(a + 16 + 4 * k));  \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                   \
            {                                                                                      \
                const float da = conv ? kq_h2f(y[r][i].d) : p[r][i].d;                             \
                const float sa = conv ? kq_h2f(y[r][i].s) : p[r][i].s;                             \
                const __m512 part = _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(da)),           \
                                                  _mm512_cvtepi32_ps(isum[r]));                    \
                const __m512 min = _mm512_mul_ps(mw, _mm512_set1_ps(sa));                          \
                tot[r] = _mm512_add_ps(tot[r], _mm512_add_ps(part, min));                          \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                       \
            _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);                                \
    }

/* Defines the mul_rows NAME of a format with BLOCK_T blocks of QK values, its tiles TILE
 * and its plain rows PLAIN for the rows after the last whole group. Every activation
 * row's scales are converted once (so each group is read from memory once per call), on
 * the stack or the heap; without either, the tiles convert them. A call streaming more
 * than STREAM_BYTES of weights prefetches in its first tile of each group. */
#define R16_Q8_1_DEFINE_MUL(NAME, BLOCK_T, QK, TILE, PLAIN, STREAM_BYTES)                          \
    static void NAME##_run(const char *wb, size_t w_stride, int64_t n_full, int64_t nb,            \
                           const void *act, size_t act_stride, int64_t n_act,                      \
                           const struct r16_q8_1_act *prep, float *out, size_t out_stride,         \
                           int stream)                                                             \
    {                                                                                              \
        for (int64_t g = 0; g < n_full; g += R16_Q8_1_ROWS) {                                      \
            const BLOCK_T *b = (const BLOCK_T *)(wb + (size_t)g * w_stride);                       \
            for (int64_t j = 0; j < n_act; j += R16_Q8_1_MAX_NR) {                                 \
                const int nr = n_act - j < R16_Q8_1_MAX_NR ? (int)(n_act - j) : R16_Q8_1_MAX_NR;   \
                const struct splash_q8_1_block *y[R16_Q8_1_MAX_NR];                                \
                const struct r16_q8_1_act *pp[R16_Q8_1_MAX_NR] = {NULL};                           \
                for (int r = 0; r < nr; r++) {                                                     \
                    y[r] = (const struct splash_q8_1_block *)((const char *)act +                  \
                                                              (size_t)(j + r) * act_stride);       \
                    if (prep)                                                                      \
                        pp[r] = prep + (size_t)(j + r) * (size_t)nb;                               \
                }                                                                                  \
                float *o = out + (size_t)j * out_stride + g;                                       \
                const int pf = stream && j == 0;                                                   \
                if (!prep) {                                                                       \
                    for (int r = 0; r < nr; r++)                                                   \
                        TILE(b, nb, y + r, pp, 1, o + (size_t)r * out_stride, out_stride, 0, 1);   \
                } else if (nr == 1 && pf) {                                                        \
                    TILE(b, nb, y, pp, 1, o, out_stride, 1, 0);                                    \
                } else if (nr == 1) {                                                              \
                    TILE(b, nb, y, pp, 1, o, out_stride, 0, 0);                                    \
                } else if (pf) {                                                                   \
                    TILE(b, nb, y, pp, 2, o, out_stride, 1, 0);                                    \
                } else {                                                                           \
                    TILE(b, nb, y, pp, 2, o, out_stride, 0, 0);                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    void NAME(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,             \
              size_t act_stride, int64_t n_act, float *out, size_t out_stride)                     \
    {                                                                                              \
        const int64_t nb = n / (QK);                                                               \
        const int64_t n_full = n_w / R16_Q8_1_ROWS * R16_Q8_1_ROWS;                                \
        const char *wb = w;                                                                        \
        const int stream = (size_t)n_full * w_stride > (STREAM_BYTES);                             \
        struct r16_q8_1_act stack[R16_Q8_1_PREP], *prep = NULL;                                    \
        if (n_full && (uint64_t)n_act * (uint64_t)nb <= R16_Q8_1_PREP)                             \
            prep = stack;                                                                          \
        else if (n_full)                                                                           \
            prep = malloc((size_t)n_act * (size_t)nb * sizeof *prep);                              \
        for (int64_t j = 0; prep && j < n_act; j++)                                                \
            r16_q8_1_prepare(                                                                      \
                (const struct splash_q8_1_block *)((const char *)act + (size_t)j * act_stride),    \
                nb, prep + (size_t)j * (size_t)nb);                                                \
        if (n_full)                                                                                \
            NAME##_run(wb, w_stride, n_full, nb, act, act_stride, n_act, prep, out, out_stride,    \
                       stream);                                                                    \
        if (prep != stack)                                                                         \
            free(prep);                                                                            \
        if (n_full < n_w)                                                                          \
            PLAIN(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act, act_stride,      \
                  n_act, out + n_full, out_stride);                                                \
    }

#endif
