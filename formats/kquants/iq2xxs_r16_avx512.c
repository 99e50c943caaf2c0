/* AVX-512 VNNI kernel of IQ2_XXS_R16 (iq2xxs_r16.h) against Q8_K activations.
 *
 * Per sub-block ib and group l (8 values), eight index bytes widen to the indices of one
 * vpgatherdq of grid points: the 8 values of 8 rows, row r's in qword r (rows 0..7 in
 * vector A, 8..15 in B). One vpermi2b of the sub-block's 64 sign bytes (a 128-entry
 * table: the 7 stored bits and their parity) gives 64 full sign bytes whose consecutive
 * 8-byte runs are the byte masks of those vectors; a masked subtraction from zero makes
 * the weights signed (|w| <= 43). vpdpbusd takes them against the activations + 128
 * (unsigned, xor 0x80, a qword broadcast), so lane 2r holds row r's values 0..3 and lane
 * 2r+1 its values 4..7; the 128 * (sum of the weights) this adds is summed once per
 * weight vector (a vpdpbusd against 0x80 bytes), shared by all activation rows, and taken
 * off at the block's end. A sub-block's pairs of lanes are added (two vpermt2d), times the
 * 16 rows' scales 2 s + 1 (vpmulld), into an int32 block sum.
 *
 * Everything up to the block sum is exact integer arithmetic (|bsum| < 8 * 31 * 32 * 255 *
 * 43 < 2^31). Float steps, per (weight row, activation row) pair and super-block:
 * tot = fma(float(bsum), d * d_a, tot), then out = tot * 0.125 after the last block. The
 * mat-vec is the tile with one activation row, so a pair gets the same bits whatever
 * else shares the call. */
#include "formats/kquants/iq2xxs_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ2XXS_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ2XXS_R16_PF
#define IQ2XXS_R16_PF 8192
#endif
#define IQ2XXS_R16_STREAM_BYTES (1u << 20)

/* IQ2_XXS's 7 stored sign bits completed with their even parity as the eighth: byte i is
 * i | parity(i) << 7 (the sign groups the format defines, as kq_iq_signs8). */
#define IQ2XXS_R16_PAR(i)                                                                          \
    (((i) ^ (i) >> 1 ^ (i) >> 2 ^ (i) >> 3 ^ (i) >> 4 ^ (i) >> 5 ^ (i) >> 6) & 1)
#define IQ2XXS_R16_S1(i) (uint8_t)((i) | IQ2XXS_R16_PAR(i) << 7)
#define IQ2XXS_R16_S4(i)                                                                           \
    IQ2XXS_R16_S1(i), IQ2XXS_R16_S1((i) + 1), IQ2XXS_R16_S1((i) + 2), IQ2XXS_R16_S1((i) + 3)
#define IQ2XXS_R16_S16(i)                                                                          \
    IQ2XXS_R16_S4(i), IQ2XXS_R16_S4((i) + 4), IQ2XXS_R16_S4((i) + 8), IQ2XXS_R16_S4((i) + 12)
static const uint8_t iq2xxs_r16_signs[128] __attribute__((aligned(64))) = {
    IQ2XXS_R16_S16(0),  IQ2XXS_R16_S16(16), IQ2XXS_R16_S16(32), IQ2XXS_R16_S16(48),
    IQ2XXS_R16_S16(64), IQ2XXS_R16_S16(80), IQ2XXS_R16_S16(96), IQ2XXS_R16_S16(112),
};

/* 8 bytes at p broadcast to every qword lane (an embedded broadcast). */
KQ_INLINE __m512i iq2xxs_r16_bcast8(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Lane r: the sum of lanes 2r and 2r + 1 of a (r < 8) or of b (r >= 8): rows 0..15. */
KQ_INLINE __m512i iq2xxs_r16_pairs(__m512i a, __m512i b, __m512i even, __m512i odd)
{
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq2xxs_r16_tile(int64_t nb, const struct iq2xxs_r16_block *b, const char *act,
                               size_t act_stride, const int nr, float *out, size_t out_stride,
                               const int prefetch)
{
    const __m512i tlo = _mm512_load_si512(iq2xxs_r16_signs);
    const __m512i thi = _mm512_load_si512(iq2xxs_r16_signs + 64);
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i zero = _mm512_setzero_si512();
    __m512 tot[IQ2XXS_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ2XXS_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ2XXS_R16_NR];
        /* the activations + 128, unsigned */
        _Alignas(64) uint8_t au[IQ2XXS_R16_NR][SPLASH_QK_K];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            y[r] = (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            KQ_UNROLL for (int c = 0; c < SPLASH_QK_K; c += 64) _mm512_store_si512(
                au[r] + c, _mm512_xor_si512(_mm512_loadu_si512(y[r]->qs + c), x80));
        }
        /* read the broadcasts back from memory rather than through shuffles */
        __asm__ volatile("" ::: "memory");
        __m512i bsum[IQ2XXS_R16_NR], csum = zero;
        KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = zero;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const __m512i sgv = _mm512_loadu_si512(b->sg[ib]);
            _Alignas(64) uint64_t sm[8];
            _mm512_store_si512(sm, _mm512_permutex2var_epi8(tlo, sgv, thi));
            /* the scales 2 s + 1 of the 16 rows from the sign bytes' top bits */
            const __mmask64 km = _mm512_movepi8_mask(sgv);
            __m512i ls = _mm512_set1_epi32(1);
            KQ_UNROLL for (int l = 0; l < 4; l++) ls =
                _mm512_mask_add_epi32(ls, (__mmask16)(km >> 16 * l), ls, _mm512_set1_epi32(2 << l));
            __m512i acc[2][IQ2XXS_R16_NR], corr[2] = {zero, zero};
            KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] =
                zero;
            KQ_UNROLL for (int l = 0; l < 4; l++) KQ_UNROLL for (int h = 0; h < 2; h++)
            {
                const __m256i ix = _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(b->idx[ib] + 16 * l + 8 * h)));
                const __m512i mag = _mm512_i32gather_epi64(ix, (const void *)kq_iq2xxs_grid, 8);
                const __m512i w =
                    _mm512_mask_sub_epi8(mag, _cvtu64_mask64(sm[2 * l + h]), zero, mag);
                corr[h] = _mm512_dpbusd_epi32(corr[h], x80, w);
                KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] =
                    _mm512_dpbusd_epi32(acc[h][r], iq2xxs_r16_bcast8(au[r] + 32 * ib + 8 * l), w);
            }
            csum = _mm512_add_epi32(
                csum, _mm512_mullo_epi32(iq2xxs_r16_pairs(corr[0], corr[1], even, odd), ls));
            KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = _mm512_add_epi32(
                bsum[r], _mm512_mullo_epi32(iq2xxs_r16_pairs(acc[0][r], acc[1][r], even, odd), ls));
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(bsum[r], csum)),
                            _mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)), tot[r]);
    }
    KQ_UNROLL for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(tot[r], _mm512_set1_ps(0.125f)));
}

#define IQ2XXS_R16_CASE(NR)                                                                        \
    case NR:                                                                                       \
        iq2xxs_r16_tile(nb, b, a, act_stride, NR, o, out_stride, pf);                              \
        break;

void iq2xxs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *act, size_t act_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ2XXS_R16_ROWS * IQ2XXS_R16_ROWS;
    const char *wb = w;
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ2XXS_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ2XXS_R16_ROWS) {
        const struct iq2xxs_r16_block *b =
            (const struct iq2xxs_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq2xxs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 1);
            else
                iq2xxs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ2XXS_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ2XXS_R16_NR ? IQ2XXS_R16_NR : (int)(n_act - j)) {
                IQ2XXS_R16_CASE(1)
                IQ2XXS_R16_CASE(2)
                IQ2XXS_R16_CASE(3)
                IQ2XXS_R16_CASE(4)
                IQ2XXS_R16_CASE(5)
                IQ2XXS_R16_CASE(6)
                IQ2XXS_R16_CASE(7)
            default:
                iq2xxs_r16_tile(nb, b, a, act_stride, IQ2XXS_R16_NR, o, out_stride, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ2_XXS rows */
    if (n_full < n_w)
        iq2xxs_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                                 act_stride, n_act, out + n_full, out_stride);
}
