/* AVX-512 VNNI kernel of Q5_K_R16 (q5k_r16.h) against Q8_K activations.
 *
 * Per sub-block (32 values of the 16 rows of a group) five vector loads give its eight
 * quads as 8u, ready for vpdpbusd: five ANDs with 0xF8 for quads 0..4 and, for quads
 * 5..7, seven vpermb lookups of the spare low bits ORed together (two ORs, a ternlog). Each
 * weight register then serves every activation row of the tile: one vpdpbusd against 4
 * activations broadcast from memory adds the 16 rows' partial sums of 4 inputs in 16
 * int32 lanes. A sub-block's integer sum (8 times the levels', at most 32 * 248 * 128
 * < 2^24, exact as a float) takes one convert and one FMA with the rows' sc_j / 8
 * (exact) into the super-block's float sum, then scaled by d; the mins take vpdpwssd of
 * the rows' int16 m_j against the activation's sums, one convert and one FMA with dmin;
 * the super-block sum is scaled by the activation's d once. The mat-vec path
 * (q5k_r16_matvec) and the tiles take the same float steps in the same order, so every
 * (weight row, activation row) pair gets the same bits whatever else shares the call.
 * Measured in cache (64 rows of 4096, rdtsc): a mat-vec takes ~3x fewer cycles than
 * the plain Q5_K kernel, tiles of 8 activation rows ~4x (~70 int8 MACs per cycle). */
#include "formats/kquants/k4_r16_simd.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"
#include "formats/kquants/q5k_r16.h"

/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads, every line; in cache the prefetches would only cost issue slots. A
 * call over more than STREAM_BYTES is taken to stream. */
#ifndef Q5K_R16_PREFETCH
#define Q5K_R16_PREFETCH 8192
#endif
#ifndef Q5K_R16_PF_STEP
#define Q5K_R16_PF_STEP 64 /* bytes between prefetched lines */
#endif
#define Q5K_R16_STREAM_BYTES (16u << 10)

/* Super-blocks per row up to which a mat-vec prepares its activation sums on the stack. */
#define Q5K_R16_MATVEC_NB 512

/* Sub-block scales: sc_j / 8, as the quads are 8u. */
#define Q5K_R16_SCALE_F 1.0f / 8, 1.0f / 8

/* 64-byte lookup tables for vpermb of a quad vector: entry i depends on the spare bits
 * i & 7 only, so each is one 8-byte pattern. Stream bit 3k + b is V_k's bit b; quad
 * 5 + m is stream bits 5m .. 5m + 4, wanted as 8u (bits 3..7). */
#define Q5K_R16_LUT(expr)                                                                          \
    _mm512_set1_epi64((long long)(Q5K_R16_B(expr, 0) | Q5K_R16_B(expr, 1) << 8 |                   \
                                  Q5K_R16_B(expr, 2) << 16 | Q5K_R16_B(expr, 3) << 24 |            \
                                  Q5K_R16_B(expr, 4) << 32 | Q5K_R16_B(expr, 5) << 40 |            \
                                  Q5K_R16_B(expr, 6) << 48 | Q5K_R16_B(expr, 7) << 56))
#define Q5K_R16_B(expr, i) ((unsigned long long)(expr(i) & 0xFF))
#define Q5K_R16_Q5A(i) (((i)&7) << 3)        /* V0 bits 0..2: u5 bits 0..2 */
#define Q5K_R16_Q5B(i) (((i)&3) << 6)        /* V1 bits 0..1: u5 bits 3..4 */
#define Q5K_R16_Q6A(i) (((i) >> 2 & 1) << 3) /* V1 bit 2: u6 bit 0 */
#define Q5K_R16_Q6B(i) (((i)&7) << 4)        /* V2 bits 0..2: u6 bits 1..3 */
#define Q5K_R16_Q6C(i) (((i)&1) << 7)        /* V3 bit 0: u6 bit 4 */
#define Q5K_R16_Q7A(i) (((i) >> 1 & 3) << 3) /* V3 bits 1..2: u7 bits 0..1 */
#define Q5K_R16_Q7B(i) (((i)&7) << 5)        /* V4 bits 0..2: u7 bits 2..4 */

/* The eight quads (8u) of sub-block j of a block. */
KQ_INLINE void q5k_r16_quads(const struct q5k_r16_block *b, int j, __m512i w[8])
{
    const __m512i f8 = _mm512_set1_epi8((char)0xF8);
    const __m512i v0 = _mm512_loadu_si512(b->qs[j][0]), v1 = _mm512_loadu_si512(b->qs[j][1]),
                  v2 = _mm512_loadu_si512(b->qs[j][2]), v3 = _mm512_loadu_si512(b->qs[j][3]),
                  v4 = _mm512_loadu_si512(b->qs[j][4]);
    w[0] = _mm512_and_si512(v0, f8);
    w[1] = _mm512_and_si512(v1, f8);
    w[2] = _mm512_and_si512(v2, f8);
    w[3] = _mm512_and_si512(v3, f8);
    w[4] = _mm512_and_si512(v4, f8);
    /* the ternlog 0xFE is a | b | c; vpermb reads only the index's low 6 bits */
    w[5] = _mm512_or_si512(_mm512_permutexvar_epi8(v0, Q5K_R16_LUT(Q5K_R16_Q5A)),
                           _mm512_permutexvar_epi8(v1, Q5K_R16_LUT(Q5K_R16_Q5B)));
    w[6] = _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(v1, Q5K_R16_LUT(Q5K_R16_Q6A)),
                                     _mm512_permutexvar_epi8(v2, Q5K_R16_LUT(Q5K_R16_Q6B)),
                                     _mm512_permutexvar_epi8(v3, Q5K_R16_LUT(Q5K_R16_Q6C)), 0xFE);
    w[7] = _mm512_or_si512(_mm512_permutexvar_epi8(v3, Q5K_R16_LUT(Q5K_R16_Q7A)),
                           _mm512_permutexvar_epi8(v4, Q5K_R16_LUT(Q5K_R16_Q7B)));
}

KQ_INLINE void q5k_r16_prefetch(const struct q5k_r16_block *b)
{
    KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += Q5K_R16_PF_STEP)
        _mm_prefetch((const char *)b + Q5K_R16_PREFETCH + l, _MM_HINT_T1);
}

/* The 16 rows of one group against NR activation rows (rows at act + r * act_stride):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void q5k_r16_tile(int64_t nb, const struct q5k_r16_block *b, const void *act,
                            size_t act_stride, const int nr, float *out, size_t out_stride,
                            const int prefetch)
{
    __m512 tot[KQ_MAX_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        /* the first tile over weights streaming from memory fetches ahead, so the loads
         * overlap its arithmetic; later tiles find the group in L1/L2 */
        if (prefetch)
            q5k_r16_prefetch(b);
        struct kq_k4r16_dec dec;
        kq_k4r16_decode(b->scales, b->d, b->dmin, Q5K_R16_SCALE_F, &dec);
        const struct splash_q8_k_block *y[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) y[r] =
            (const struct splash_q8_k_block *)((const char *)act + r * act_stride) + i;
        __m512 f[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) f[r] = _mm512_setzero_ps();
        for (int j = 0; j < 8; j++) {
            __m512i w[8];
            q5k_r16_quads(b, j, w);
            /* few activation rows: two chains per row (even and odd quads) */
            __m512i acc[2][KQ_MAX_NR];
            KQ_UNROLL for (int r = 0; r < nr; r++) acc[0][r] = acc[1][r] = _mm512_setzero_si512();
            KQ_UNROLL for (int t = 0; t < 8; t++) KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const int h = nr <= 4 ? t & 1 : 0;
                acc[h][r] =
                    _mm512_dpbusd_epi32(acc[h][r], w[t], kq_bcast4(y[r]->qs + 32 * j + 4 * t));
            }
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const __m512i a = nr <= 4 ? _mm512_add_epi32(acc[0][r], acc[1][r]) : acc[0][r];
                f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), dec.s[j], f[r]);
            }
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
 * interleave; the mins meet the activation's 32-value sums, prepared per call as int16
 * pairs bp[4i + t] = (B_2t, B_2t+1) for super-block i. The float steps are
 * q5k_r16_tile's, in its order. */
KQ_INLINE void q5k_r16_matvec(int64_t nb, const struct q5k_r16_block *b,
                              const struct splash_q8_k_block *y, const int32_t *bp, float *out,
                              const int prefetch)
{
    __m512 tot = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++, y++, bp += 4) {
        if (prefetch)
            q5k_r16_prefetch(b);
        /* two sub-blocks at a time, two chains each (even and odd quads), so four
         * vpdpbusd chains interleave in program order */
        __m512i acc[8];
        KQ_UNROLL for (int j = 0; j < 8; j += 2)
        {
            __m512i w0[8], w1[8], a[2][2];
            q5k_r16_quads(b, j, w0);
            q5k_r16_quads(b, j + 1, w1);
            a[0][0] = a[0][1] = a[1][0] = a[1][1] = _mm512_setzero_si512();
            KQ_UNROLL for (int t = 0; t < 8; t++)
            {
                a[0][t & 1] =
                    _mm512_dpbusd_epi32(a[0][t & 1], w0[t], kq_bcast4(y->qs + 32 * j + 4 * t));
                a[1][t & 1] =
                    _mm512_dpbusd_epi32(a[1][t & 1], w1[t], kq_bcast4(y->qs + 32 * j + 32 + 4 * t));
            }
            acc[j] = _mm512_add_epi32(a[0][0], a[0][1]);
            acc[j + 1] = _mm512_add_epi32(a[1][0], a[1][1]);
        }
        __m512i v[4];
        kq_k4r16_fields(b->scales, v);
        __m512 f = _mm512_setzero_ps();
        KQ_UNROLL for (int j = 0; j < 8; j++) f =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), kq_k4r16_scale(v, j, Q5K_R16_SCALE_F), f);
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

#define Q5K_R16_CASE(NR)                                                                           \
    case NR:                                                                                       \
        q5k_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                                 \
        break;

void q5k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q5K_R16_ROWS * Q5K_R16_ROWS;
    const char *wb = w;
    /* a single activation row (the last one, after whole tiles) takes the mat-vec path */
    const int64_t j1 = n_act % KQ_MAX_NR == 1 && nb <= Q5K_R16_MATVEC_NB ? n_act - 1 : n_act;
    /* a call streaming its rows from memory prefetches ahead */
    const int stream = (size_t)n_full * w_stride > Q5K_R16_STREAM_BYTES;
    int32_t bp[4 * Q5K_R16_MATVEC_NB];
    if (j1 < n_act && n_full)
        kq_k4r16_pairs(
            (const struct splash_q8_k_block *)((const char *)act + (size_t)j1 * act_stride), nb,
            bp);
    /* group by group, every activation tile over the group's blocks while they are in L1/L2 */
    for (int64_t g = 0; g < n_full; g += Q5K_R16_ROWS) {
        const struct q5k_r16_block *b = (const struct q5k_r16_block *)(wb + (size_t)g * w_stride);
        for (int64_t j = 0; j < j1; j += KQ_MAX_NR) {
            const void *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (j1 - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(j1 - j)) {
                Q5K_R16_CASE(1)
                Q5K_R16_CASE(2)
                Q5K_R16_CASE(3)
                Q5K_R16_CASE(4)
                Q5K_R16_CASE(5)
                Q5K_R16_CASE(6)
                Q5K_R16_CASE(7)
            default:
                q5k_r16_tile(nb, b, a, act_stride, KQ_MAX_NR, o, out_stride, pf);
                break;
            }
        }
        if (j1 < n_act) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j1 * act_stride);
            float *o = out + (size_t)j1 * out_stride + (size_t)g;
            if (stream)
                q5k_r16_matvec(nb, b, y, bp, o, 1);
            else
                q5k_r16_matvec(nb, b, y, bp, o, 0);
        }
    }
    /* the rows after the last whole group are plain Q5_K rows */
    if (n_full < n_w)
        q5k_mul_q8k_avx512(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                           act_stride, n_act, out + n_full, out_stride);
}
