/* AVX-512 VNNI kernel of IQ1_S_R16 (iq1s_r16.h) against Q8_K activations.
 *
 * Per sub-block ib and group l (8 values), 16 index bytes and the 16 rows' qh words widen
 * to the 11-bit indices of two vpgatherdq of grid points: the 8 values of 8 rows, row r's
 * in qword r (rows 0..7 in one vector, 8..15 in the other). The grid's values are -1, 0
 * and 1; one vpaddb makes them 0, 1, 2 (unsigned), and vpdpbusd takes them against the
 * signed activations (a qword broadcast straight from the Q8_K block), so lane 2r holds
 * row r's values 0..3 and lane 2r + 1 its values 4..7. The activations' sum this adds is
 * the Q8_K bsums, so nothing is computed for it per weight vector: a sub-block's pairs of
 * lanes are added (two vpermt2d) into p = lsum + S (S: the sub-block's activation sum), and
 * 8 p + (delta - 8) S = 8 lsum + delta S, times the 16 rows' scales 2 s + 1 (vpmulld), goes
 * into an int32 block sum 8 sumi + sumi1 (the plain IQ1_S's grid sum and delta sum).
 *
 * Everything up to the block sum is exact integer arithmetic (|8 sumi + sumi1| <= 8 * 15 *
 * 9 * 32 * 128 < 2^23, so its float is exact too). Float steps, per (weight row,
 * activation row) pair and super-block: tot = tot + (d * d_a) * float(bsum), then out =
 * 0.125 * tot after the last block, as iq1s_r16_mul_q8k_ref. The mat-vec is the tile with
 * one activation row, so a pair gets the same bits whatever else shares the call. */
#include "formats/kquants/iq1s_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ1S_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ1S_R16_PF
#define IQ1S_R16_PF 8192
#endif
#define IQ1S_R16_STREAM_BYTES (1u << 20)

/* 8 bytes at p broadcast to every qword lane (an embedded broadcast). */
KQ_INLINE __m512i iq1s_r16_bcast8(const int8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Lane r: the sum of lanes 2r and 2r + 1 of a (r < 8) or of b (r >= 8): rows 0..15. */
KQ_INLINE __m512i iq1s_r16_pairs(__m512i a, __m512i b, __m512i even, __m512i odd)
{
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
}

/* Index bits 8..10 of group l (qh bits 3l .. 3l + 2) in bits 8..10 of each lane. */
KQ_INLINE __m512i iq1s_r16_high(__m512i qh, const int l)
{
    const __m512i v = l == 3 ? _mm512_srli_epi32(qh, 1) : _mm512_slli_epi32(qh, 8 - 3 * l);
    return _mm512_and_si512(v, _mm512_set1_epi32(0x700));
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq1s_r16_tile(int64_t nb, const struct iq1s_r16_block *b, const char *act,
                             size_t act_stride, const int nr, float *out, size_t out_stride,
                             const int prefetch)
{
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i zero = _mm512_setzero_si512();
    __m512 tot[IQ1S_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ1S_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ1S_R16_NR];
        /* -7 S and -9 S of each sub-block (S its activations' sum), per activation row */
        _Alignas(32) int32_t c7[IQ1S_R16_NR][8], c9[IQ1S_R16_NR][8];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            y[r] = (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[r]->bsums),
                                                _mm256_set1_epi16(1));
            _mm256_store_si256((__m256i *)c7[r], _mm256_mullo_epi32(s, _mm256_set1_epi32(-7)));
            _mm256_store_si256((__m256i *)c9[r], _mm256_mullo_epi32(s, _mm256_set1_epi32(-9)));
        }
        __asm__ volatile("" ::: "memory");
        __m512i bsum[IQ1S_R16_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = zero;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const __m512i qh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)b->qh[ib]));
            /* the 16 rows' scales 2 s + 1 and delta signs */
            const __m512i ls = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi32(qh, 11), _mm512_set1_epi32(14)),
                _mm512_set1_epi32(1));
            const __mmask16 neg = _mm512_test_epi32_mask(qh, _mm512_set1_epi32(0x8000));
            __m512i acc[2][IQ1S_R16_NR];
            KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] =
                zero;
            KQ_UNROLL for (int l = 0; l < 4; l++)
            {
                const __m512i ix = _mm512_or_si512(
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b->qs[ib] + 16 * l))),
                    iq1s_r16_high(qh, l));
                KQ_UNROLL for (int h = 0; h < 2; h++)
                {
                    const __m256i ixh =
                        h ? _mm512_extracti64x4_epi64(ix, 1) : _mm512_castsi512_si256(ix);
                    const __m512i wv = _mm512_add_epi8(
                        _mm512_i32gather_epi64(ixh, (const void *)kq_iq1s_grid, 8), one);
                    KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] = _mm512_dpbusd_epi32(
                        acc[h][r], wv, iq1s_r16_bcast8(y[r]->qs + 32 * ib + 8 * l));
                }
            }
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const __m512i cs = _mm512_mask_blend_epi32(neg, _mm512_set1_epi32(c7[r][ib]),
                                                           _mm512_set1_epi32(c9[r][ib]));
                const __m512i t = _mm512_add_epi32(
                    _mm512_slli_epi32(iq1s_r16_pairs(acc[0][r], acc[1][r], even, odd), 3), cs);
                bsum[r] = _mm512_add_epi32(bsum[r], _mm512_mullo_epi32(t, ls));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
            _mm512_add_ps(tot[r], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)),
                                                _mm512_cvtepi32_ps(bsum[r])));
    }
    KQ_UNROLL for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(_mm512_set1_ps(0.125f), tot[r]));
}

#define IQ1S_R16_CASE(NR)                                                                          \
    case NR:                                                                                       \
        iq1s_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                                \
        break;

void iq1s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ1S_R16_ROWS * IQ1S_R16_ROWS;
    const char *wb = w;
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ1S_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ1S_R16_ROWS) {
        const struct iq1s_r16_block *b =
            (const struct iq1s_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq1s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 1);
            else
                iq1s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ1S_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ1S_R16_NR ? IQ1S_R16_NR : (int)(n_act - j)) {
                IQ1S_R16_CASE(1)
                IQ1S_R16_CASE(2)
                IQ1S_R16_CASE(3)
                IQ1S_R16_CASE(4)
                IQ1S_R16_CASE(5)
                IQ1S_R16_CASE(6)
                IQ1S_R16_CASE(7)
            default:
                iq1s_r16_tile(nb, b, a, act_stride, IQ1S_R16_NR, o, out_stride, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ1_S rows */
    if (n_full < n_w)
        iq1s_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                               act_stride, n_act, out + n_full, out_stride);
}
