/* AVX-512 VNNI kernel of Q4_K_R16 (q4k_r16.h) against Q8_K activations.
 *
 * A group block's qs[k] holds 4 inputs of 16 rows per nibble half, one row per int32
 * lane, so a vpdpbusd of its masked nibbles against 4 activations broadcast from memory
 * adds 16 rows' partial sums at once; the high nibbles are used in place (v & 0xF0, 16
 * times the level), which the float scale of their sub-block takes back (d sc / 16,
 * exact). Per sub-block of 32 inputs, 8 vpdpbusd give the 16 rows' exact integer sums
 * (at most 32 * 240 * 128 < 2^24, exact as floats), which one convert and one FMA with
 * the rows' sc_j add to the super-block's float sum, then scaled by d; the mins take
 * vpdpwssd of the rows' int16 m_j against the activation's sums, one convert and one
 * FMA with dmin; the super-block sum is scaled by the activation's d once. Both paths
 * take the same float steps in the same order, so every (weight row, activation row)
 * pair gets the same bits whatever else shares the call.
 *
 * The rows' scales are decoded once per block for all activation rows of a tile (up
 * to KQ_MAX_NR): the 12 scale bytes are kq_k4_unpack's words on 16 rows at once, the
 * bytes spread to int32 / int16 lanes by vpshufb. Each unpacked weight register serves
 * every activation row of the tile: per activation row and 4096 multiply-adds a tile of
 * 8 spends ~105 vector ops (64 of them vpdpbusd). A mat-vec (q4k_r16_matvec) decodes
 * the scales as it goes, meets the mins with 32-value activation sums prepared once per
 * call, and spends ~190, about half the plain Q4_K kernel's; streaming from memory, it
 * prefetches ahead. */
#include "formats/kquants/k4_r16_simd.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"
#include "formats/kquants/q4k_r16.h"

/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads, every line; in cache the prefetches would only cost issue slots. A
 * call over more than STREAM_BYTES is taken to stream: the engine hands each thread
 * pieces of tens of KB of decode matrices that never stay in cache between tokens. */
#define Q4K_R16_PREFETCH 8192
#define Q4K_R16_STREAM_BYTES (16u << 10)

/* Super-blocks per row up to which a mat-vec prepares its activation sums on the stack. */
#define Q4K_R16_MATVEC_NB 512

/* Sub-block scales: sc_j for the low nibbles, sc_j / 16 for the high ones, which the kernels use in
 * place as 16 times their level. */
#define Q4K_R16_SCALE_F 1.0f, 1.0f / 16

/* The 16 rows of one group against NR activation rows (rows at act + r * act_stride):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void q4k_r16_tile(int64_t nb, const struct q4k_r16_block *b, const void *act,
                            size_t act_stride, const int nr, float *out, size_t out_stride,
                            const int prefetch)
{
    __m512 tot[KQ_MAX_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8((char)0xF0);
    /* sub-blocks a pass takes at once: nk * nr interleaved vpdpbusd chains (latency 5,
     * two per cycle) keep both ports busy; more would not fit the registers */
    const int nk = nr == 1 ? 8 : nr == 2 ? 4 : nr <= 4 ? 2 : 1;
    for (int64_t i = 0; i < nb; i++, b++) {
        /* the first tile over weights streaming from memory fetches ahead, so the loads
         * overlap its arithmetic; later tiles find the group in L1/L2 */
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + Q4K_R16_PREFETCH + l, _MM_HINT_T1);
        }
        struct kq_k4r16_dec dec;
        kq_k4r16_decode(b->scales, b->d, b->dmin, Q4K_R16_SCALE_F, &dec);
        const struct splash_q8_k_block *y[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) y[r] =
            (const struct splash_q8_k_block *)((const char *)act + r * act_stride) + i;
        __m512 f[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) f[r] = _mm512_setzero_ps();
        KQ_UNROLL for (int j0 = 0; j0 < 8; j0 += nk)
        {
            __m512i acc[8][KQ_MAX_NR];
            KQ_UNROLL for (int k = 0; k < nk; k++) KQ_UNROLL for (int r = 0; r < nr; r++)
                acc[k][r] = _mm512_setzero_si512();
            KQ_UNROLL for (int g = 0; g < 8; g++)
            {
                KQ_UNROLL for (int k = 0; k < nk; k++)
                {
                    /* sub-block j: the low (even j) or high (odd j) nibbles of qs[8 (j / 2) ..] */
                    const int j = j0 + k, a0 = 64 * (j / 2) + 32 * (j & 1);
                    const __m512i wq = _mm512_and_si512(_mm512_loadu_si512(b->qs[8 * (j / 2) + g]),
                                                        j & 1 ? hi4 : lo4);
                    KQ_UNROLL for (int r = 0; r < nr; r++) acc[k][r] =
                        _mm512_dpbusd_epi32(acc[k][r], wq, kq_bcast4(y[r]->qs + a0 + 4 * g));
                }
            }
            KQ_UNROLL for (int k = 0; k < nk; k++) KQ_UNROLL for (int r = 0; r < nr; r++) f[r] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[k][r]), dec.s[j0 + k], f[r]);
        }
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            __m512i ms = _mm512_setzero_si512();
            KQ_UNROLL for (int j = 0; j < 8; j++)
            {
                int32_t bs;
                memcpy(&bs, &y[r]->bsums[2 * j], 4);
                ms = _mm512_dpwssd_epi32(ms, dec.m[j], _mm512_set1_epi32(bs));
            }
            f[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), dec.dmin, _mm512_mul_ps(f[r], dec.d));
            tot[r] = _mm512_fmadd_ps(f[r], _mm512_set1_ps(y[r]->d), tot[r]);
        }
    }
    KQ_UNROLL for (int r = 0; r < nr; r++) _mm512_storeu_ps(out + r * out_stride, tot[r]);
}

/* One activation row (a mat-vec), the 16 rows of a group: all 8 sub-blocks' chains
 * interleave; the scales stay integers until each sub-block's sum is converted (d is
 * applied once), and the mins meet the activation's 32-value sums, prepared per call as
 * int16 pairs bp[4i + t] = (B_2t, B_2t+1) for super-block i. */
KQ_INLINE void q4k_r16_matvec(int64_t nb, const struct q4k_r16_block *b,
                              const struct splash_q8_k_block *y, const int32_t *bp, float *out,
                              const int prefetch)
{
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8((char)0xF0);
    __m512 tot = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++, y++, bp += 4) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + Q4K_R16_PREFETCH + l, _MM_HINT_T1);
        }
        __m512i acc[8];
        KQ_UNROLL for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_si512();
        KQ_UNROLL for (int g = 0; g < 8; g++) KQ_UNROLL for (int p = 0; p < 4; p++)
        {
            const __m512i v = _mm512_loadu_si512(b->qs[8 * p + g]);
            acc[2 * p] = _mm512_dpbusd_epi32(acc[2 * p], _mm512_and_si512(v, lo4),
                                             kq_bcast4(y->qs + 64 * p + 4 * g));
            acc[2 * p + 1] = _mm512_dpbusd_epi32(acc[2 * p + 1], _mm512_and_si512(v, hi4),
                                                 kq_bcast4(y->qs + 64 * p + 32 + 4 * g));
        }
        __m512i v[4];
        kq_k4r16_fields(b->scales, v);
        /* even sub-blocks' sums are the levels', odd ones' 16 times theirs; the float
         * steps are q4k_r16_tile's, in its order */
        __m512 f = _mm512_setzero_ps();
        KQ_UNROLL for (int j = 0; j < 8; j++) f =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), kq_k4r16_scale(v, j, Q4K_R16_SCALE_F), f);
        __m512i ms = _mm512_setzero_si512();
        KQ_UNROLL for (int t = 0; t < 4; t++) ms =
            _mm512_dpwssd_epi32(ms, kq_k4r16_spread(v[2 + t / 2], 2 * (t % 2), 2 * (t % 2) + 1),
                                _mm512_set1_epi32(bp[t]));
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
        const __m512 s = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), dmin, _mm512_mul_ps(f, d));
        tot = _mm512_fmadd_ps(s, _mm512_set1_ps(y->d), tot);
    }
    _mm512_storeu_ps(out, tot);
}

#define Q4K_R16_CASE(NR)                                                                           \
    case NR:                                                                                       \
        q4k_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                                 \
        break;

void q4k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q4K_R16_ROWS * Q4K_R16_ROWS;
    const char *wb = w;
    /* a single activation row (the last one, after whole tiles) takes the mat-vec path */
    const int64_t j1 = n_act % KQ_MAX_NR == 1 && nb <= Q4K_R16_MATVEC_NB ? n_act - 1 : n_act;
    /* a call streaming its rows from memory prefetches ahead */
    const int stream = (size_t)n_full * w_stride > Q4K_R16_STREAM_BYTES;
    int32_t bp[4 * Q4K_R16_MATVEC_NB];
    if (j1 < n_act)
        kq_k4r16_pairs(
            (const struct splash_q8_k_block *)((const char *)act + (size_t)j1 * act_stride), nb,
            bp);
    /* group by group, every activation tile over the group's blocks while they are in L1/L2 */
    for (int64_t g = 0; g < n_full; g += Q4K_R16_ROWS) {
        const struct q4k_r16_block *b = (const struct q4k_r16_block *)(wb + (size_t)g * w_stride);
        for (int64_t j = 0; j < j1; j += KQ_MAX_NR) {
            const void *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (j1 - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(j1 - j)) {
                Q4K_R16_CASE(1)
                Q4K_R16_CASE(2)
                Q4K_R16_CASE(3)
                Q4K_R16_CASE(4)
                Q4K_R16_CASE(5)
                Q4K_R16_CASE(6)
                Q4K_R16_CASE(7)
            default:
                q4k_r16_tile(nb, b, a, act_stride, KQ_MAX_NR, o, out_stride, pf);
                break;
            }
        }
        if (j1 < n_act) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j1 * act_stride);
            float *o = out + (size_t)j1 * out_stride + (size_t)g;
            if (stream)
                q4k_r16_matvec(nb, b, y, bp, o, 1);
            else
                q4k_r16_matvec(nb, b, y, bp, o, 0);
        }
    }
    /* the rows after the last whole group are plain Q4_K rows */
    if (n_full < n_w)
        q4k_mul_q8k_avx512(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                           act_stride, n_act, out + n_full, out_stride);
}
