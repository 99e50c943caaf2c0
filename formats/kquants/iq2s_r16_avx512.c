/* AVX-512 VNNI kernel of IQ2_S_R16 (iq2s_r16.h) against Q8_K activations.
 *
 * Per sub-block ib and group l (8 values), the 16 rows' low index bytes widen to dwords
 * and take their two qh bits in one vpternlogd; each half is the index vector of one
 * vpgatherdq of grid points from the 8 KiB IQ2_S grid: the 8 values of 8 rows, row r's in
 * qword r (rows 0..7 in vector A, 8..15 in B). The 8 sign bytes stored beside the index
 * bytes are, read as one 64-bit mask, the byte mask of that vector: a masked subtraction
 * from zero makes the weights signed (|w| <= 43). vpdpbusd takes them against the
 * activations + 128 (unsigned, xor 0x80, a qword broadcast), so lane 2r holds row r's
 * values 0..3 and lane 2r+1 its values 4..7; the 128 * (sum of the weights) this adds is
 * summed once per weight vector (a vpdpbusd against 0x80 bytes), shared by all activation
 * rows, and taken off at the block's end. Each 16-value half of a sub-block (groups 0-1,
 * 2-3, one 4-bit scale each) has its pairs of lanes added (two vpermt2d), times the 16
 * rows' scales 2 s + 1 (vpmulld), into an int32 block sum.
 *
 * Everything up to the block sum is exact integer arithmetic (|bsum| < 16 * 31 * 16 * 255
 * * 43 < 2^31). Float steps, per (weight row, activation row) pair and super-block:
 * tot = fma(float(bsum), d * d_a, tot), then out = tot * 0.125 after the last block. The
 * mat-vec is the tile with one activation row, so a pair gets the same bits whatever
 * else shares the call. */
#include "formats/kquants/iq2s_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ2S_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ2S_R16_PF
#define IQ2S_R16_PF 8192
#endif
#define IQ2S_R16_STREAM_BYTES (1u << 20)

/* 8 bytes at p broadcast to every qword lane (an embedded broadcast). */
KQ_INLINE __m512i iq2s_r16_bcast8(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Lane r: the sum of lanes 2r and 2r + 1 of a (r < 8) or of b (r >= 8): rows 0..15. */
KQ_INLINE __m512i iq2s_r16_pairs(__m512i a, __m512i b, __m512i even, __m512i odd)
{
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq2s_r16_tile(int64_t nb, const struct iq2s_r16_block *b, const char *act,
                             size_t act_stride, const int nr, float *out, size_t out_stride,
                             const int prefetch)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i m300 = _mm512_set1_epi32(0x300);
    const __m512i m1e = _mm512_set1_epi32(0x1e);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i zero = _mm512_setzero_si512();
    __m512 tot[IQ2S_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ2S_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ2S_R16_NR];
        /* the activations + 128, unsigned */
        _Alignas(64) uint8_t au[IQ2S_R16_NR][SPLASH_QK_K];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            y[r] = (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            KQ_UNROLL for (int c = 0; c < SPLASH_QK_K; c += 64) _mm512_store_si512(
                au[r] + c, _mm512_xor_si512(_mm512_loadu_si512(y[r]->qs + c), x80));
        }
        /* read the broadcasts back from memory rather than through shuffles */
        __asm__ volatile("" ::: "memory");
        __m512i bsum[IQ2S_R16_NR], csum = zero;
        KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = zero;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qh[ib]));
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->sc[ib]));
            /* the 16 rows' scales 2 s + 1 of the two halves: (x & 0x1e) | 1 */
            const __m512i ls[2] = {
                _mm512_ternarylogic_epi32(_mm512_slli_epi32(sc, 1), m1e, one, 0xea),
                _mm512_ternarylogic_epi32(_mm512_srli_epi32(sc, 3), m1e, one, 0xea),
            };
            KQ_UNROLL for (int k = 0; k < 2; k++)
            {
                __m512i acc[2][IQ2S_R16_NR], corr[2] = {zero, zero};
                KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++)
                    acc[h][r] = zero;
                KQ_UNROLL for (int l = 2 * k; l < 2 * k + 2; l++)
                {
                    /* the 10-bit indices: low byte | (qh << (8 - 2 l)) & 0x300 */
                    const __m512i ix =
                        _mm512_ternarylogic_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                      (const __m128i *)(b->idx[ib] + 16 * l))),
                                                  _mm512_slli_epi32(qh, 8 - 2 * l), m300, 0xf8);
                    KQ_UNROLL for (int h = 0; h < 2; h++)
                    {
                        const __m256i ixh =
                            h ? _mm512_extracti64x4_epi64(ix, 1) : _mm512_castsi512_si256(ix);
                        const __m512i mag =
                            _mm512_i32gather_epi64(ixh, (const void *)kq_iq2s_grid, 8);
                        uint64_t sm;
                        memcpy(&sm, b->sg[ib] + 16 * l + 8 * h, 8);
                        const __m512i wv = _mm512_mask_sub_epi8(mag, _cvtu64_mask64(sm), zero, mag);
                        corr[h] = _mm512_dpbusd_epi32(corr[h], x80, wv);
                        KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] = _mm512_dpbusd_epi32(
                            acc[h][r], iq2s_r16_bcast8(au[r] + 32 * ib + 8 * l), wv);
                    }
                }
                csum = _mm512_add_epi32(
                    csum, _mm512_mullo_epi32(iq2s_r16_pairs(corr[0], corr[1], even, odd), ls[k]));
                KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = _mm512_add_epi32(
                    bsum[r],
                    _mm512_mullo_epi32(iq2s_r16_pairs(acc[0][r], acc[1][r], even, odd), ls[k]));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(bsum[r], csum)),
                            _mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)), tot[r]);
    }
    KQ_UNROLL for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(tot[r], _mm512_set1_ps(0.125f)));
}

#define IQ2S_R16_CASE(NR)                                                                          \
    case NR:                                                                                       \
        iq2s_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                                \
        break;

void iq2s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ2S_R16_ROWS * IQ2S_R16_ROWS;
    const char *wb = w;
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ2S_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ2S_R16_ROWS) {
        const struct iq2s_r16_block *b = (const struct iq2s_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq2s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 1);
            else
                iq2s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ2S_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ2S_R16_NR ? IQ2S_R16_NR : (int)(n_act - j)) {
                IQ2S_R16_CASE(1)
                IQ2S_R16_CASE(2)
                IQ2S_R16_CASE(3)
                IQ2S_R16_CASE(4)
                IQ2S_R16_CASE(5)
                IQ2S_R16_CASE(6)
                IQ2S_R16_CASE(7)
            default:
                iq2s_r16_tile(nb, b, a, act_stride, IQ2S_R16_NR, o, out_stride, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ2_S rows */
    if (n_full < n_w)
        iq2s_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                               act_stride, n_act, out + n_full, out_stride);
}
