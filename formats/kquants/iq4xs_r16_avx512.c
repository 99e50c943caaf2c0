/* AVX-512 VNNI kernel of IQ4_XS_R16 (iq4xs_r16.h) against Q8_K activations.
 *
 * A group block's qs[k] holds, one row per int32 lane, 4 inputs of 16 rows in its low
 * nibbles and the 4 inputs 16 after those in its high nibbles. vpermb looks the codes up
 * (it reads index bits 0..5, and the table repeats every 16 bytes, so the low nibbles
 * need no mask and the high ones one shift) as the IQ4_NL levels + 128, unsigned, and
 * one vpdpbusd against 4 activations broadcast from memory adds 16 rows' partial sums.
 * The 128 * (sum of the activations) this adds is taken off by starting each 32-value
 * sub-block's accumulator at -128 * (its two Q8_K bsums), so each int32 lane ends at the
 * exact sum of level * activation (|x| <= 32 * 127 * 127 < 2^24, exact as a float).
 *
 * Float steps, per (weight row, activation row) pair and super-block: f = sum over the
 * eight sub-blocks j, in order, of float(sum_j) * (ls_j - 32) (the first a product, the
 * others FMAs), then tot = fma(f, d * d_a, tot). The mat-vec is the tile with one
 * activation row, so a pair gets the same bits whatever else shares the call.
 *
 * Per super-block, 32 weight vectors (4096 weights) take 32 loads, 64 vpermb and 32
 * shifts, shared by the up to IQ4XS_R16_NR activation rows of a tile; each activation
 * row adds 64 vpdpbusd and 8 conversions and FMAs. */
#include "formats/kquants/iq4xs_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ4XS_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ4XS_R16_PF
#define IQ4XS_R16_PF 8192
#endif
#define IQ4XS_R16_STREAM_BYTES (1u << 20)

/* The IQ4_NL levels + 128 (unsigned) at every index whose low four bits are the code. */
KQ_INLINE __m512i iq4xs_r16_lut(void)
{
    return _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values)),
        _mm512_set1_epi8((char)0x80));
}

/* Sub-block j's scale ls_j - 32 of the 16 rows, as floats: the 6-bit field brought to
 * the top of each lane and shifted down arithmetically (w0 = sc, w1 = sh widened). */
KQ_INLINE __m512 iq4xs_r16_scale(__m512i w0, __m512i w1, const int j)
{
    __m512i t;
    if (j == 0)
        t = w0;
    else if (j < 5)
        t = _mm512_slli_epi32(w0, 6 * j);
    else if (j < 7)
        t = _mm512_slli_epi32(w1, j == 5 ? 16 : 22);
    else /* bits 4..5 from sc bits 0..1, bits 0..3 from sh bits 0..3; 0xD8: c ? b : a */
        t = _mm512_ternarylogic_epi32(_mm512_slli_epi32(w0, 30), _mm512_slli_epi32(w1, 26),
                                      _mm512_set1_epi32(0x3C000000), 0xD8);
    return _mm512_cvtepi32_ps(_mm512_srai_epi32(t, 26));
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq4xs_r16_tile(int64_t nb, const struct iq4xs_r16_block *b, const char *act,
                              size_t act_stride, const int nr, float *out, size_t out_stride,
                              const int prefetch)
{
    const __m512i lut = iq4xs_r16_lut();
    /* sub-blocks a pass takes at once: nk * nr interleaved vpdpbusd chains (latency 4,
     * two per cycle) keep both ports busy */
    const int nk = nr == 1 ? 8 : nr == 2 ? 4 : nr <= 4 ? 2 : 1;
    __m512 tot[IQ4XS_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ4XS_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ4XS_R16_NR];
        /* -128 * (the activations' sum) of each sub-block, per activation row */
        _Alignas(32) int32_t init[IQ4XS_R16_NR][8];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            y[r] = (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            _mm256_store_si256((__m256i *)init[r],
                               _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[r]->bsums),
                                                 _mm256_set1_epi16(-128)));
        }
        /* the compiler would forward init from the stores through shuffles (port 5, which
         * the lookups need): reading it back from memory makes broadcast loads */
        __asm__ volatile("" ::: "memory");
        const __m512i w0 = _mm512_loadu_si512(b->sc);
        const __m512i w1 = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)b->sh));
        __m512 f[IQ4XS_R16_NR];
        KQ_UNROLL for (int j0 = 0; j0 < 8; j0 += nk)
        {
            __m512i acc[8][IQ4XS_R16_NR];
            KQ_UNROLL for (int k = 0; k < nk; k++) KQ_UNROLL for (int r = 0; r < nr; r++)
                acc[k][r] = _mm512_set1_epi32(init[r][j0 + k]);
            KQ_UNROLL for (int g = 0; g < 4; g++) KQ_UNROLL for (int k = 0; k < nk; k++)
            {
                const int j = j0 + k;
                const __m512i v = _mm512_loadu_si512(b->qs[4 * j + g]);
                const __m512i lo = _mm512_permutexvar_epi8(v, lut);
                const __m512i hi = _mm512_permutexvar_epi8(_mm512_srli_epi32(v, 4), lut);
                KQ_UNROLL for (int r = 0; r < nr; r++)
                {
                    const int8_t *a = y[r]->qs + 32 * j + 4 * g;
                    acc[k][r] = _mm512_dpbusd_epi32(acc[k][r], lo, kq_bcast4(a));
                    acc[k][r] = _mm512_dpbusd_epi32(acc[k][r], hi, kq_bcast4(a + 16));
                }
            }
            /* the float steps in sub-block order, whatever nk */
            KQ_UNROLL for (int k = 0; k < nk; k++)
            {
                const int j = j0 + k;
                const __m512 s = iq4xs_r16_scale(w0, w1, j);
                KQ_UNROLL for (int r = 0; r < nr; r++) f[r] =
                    j ? _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[k][r]), s, f[r])
                      : _mm512_mul_ps(_mm512_cvtepi32_ps(acc[k][r]), s);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
            _mm512_fmadd_ps(f[r], _mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)), tot[r]);
    }
    KQ_UNROLL for (int r = 0; r < nr; r++) _mm512_storeu_ps(out + r * out_stride, tot[r]);
}

#define IQ4XS_R16_CASE(NR)                                                                         \
    case NR:                                                                                       \
        iq4xs_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                               \
        break;

void iq4xs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ4XS_R16_ROWS * IQ4XS_R16_ROWS;
    const char *wb = w;
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ4XS_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ4XS_R16_ROWS) {
        const struct iq4xs_r16_block *b =
            (const struct iq4xs_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq4xs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 1);
            else
                iq4xs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ4XS_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ4XS_R16_NR ? IQ4XS_R16_NR : (int)(n_act - j)) {
                IQ4XS_R16_CASE(1)
                IQ4XS_R16_CASE(2)
                IQ4XS_R16_CASE(3)
                IQ4XS_R16_CASE(4)
                IQ4XS_R16_CASE(5)
                IQ4XS_R16_CASE(6)
                IQ4XS_R16_CASE(7)
            default:
                iq4xs_r16_tile(nb, b, a, act_stride, IQ4XS_R16_NR, o, out_stride, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ4_XS rows */
    if (n_full < n_w)
        iq4xs_mul_rows_q8k_avx512(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                                  act_stride, n_act, out + n_full, out_stride);
}
