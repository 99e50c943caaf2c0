/* AVX-512 VNNI kernel of IQ1_M_R16 (iq1m_r16.h) against Q8_K activations.
 *
 * Per sub-block ib and group l (8 values), 16 index bytes and the 16 rows' qh words widen
 * to 12-bit keys (grid index | delta sign << 11) of two vpgatherdq from a 4096-entry table
 * made once from the IQ1_S grid (the format's data): for grid value v and delta sign s
 * (+-1) its bytes hold 8 v + 9 + s, in 0..18, so unsigned. Row r's 8 values land in qword
 * r (rows 0..7 in one vector, 8..15 in the other), and vpdpbusd against the signed
 * activations (a qword broadcast from the Q8_K block) leaves in lanes 2r and 2r + 1 the
 * sums of row r's values 0..3 and 4..7. Over the two groups of a 16-value half (one 3-bit
 * scale) those lanes hold at most 8 * 18 * 128 < 2^15, so one vpdpwssd against the scale
 * (in each lane's low int16, 0 above) adds them, scaled, into a block sum. The 9 S each
 * half adds (S its activations' sum: a Q8_K bsum) comes off once per block as 9 times a
 * vpdpwssd chain of the 16 rows' scale pairs with the bsum pairs. What is left is
 * 8 sumi1 + sumi2 (the plain IQ1_M's grid sum and delta sum), exact in int32 and in float
 * (|.| <= 9 * 15 * 256 * 128 < 2^23).
 *
 * Float steps, per (weight row, activation row) pair and super-block: tot = tot + (d * d_a)
 * * float(bsum), then out = 0.125 * tot after the last block, as iq1m_r16_mul_q8k_ref. The
 * mat-vec is the tile with one activation row, so a pair gets the same bits whatever else
 * shares the call. */
#include <pthread.h>

#include "formats/kquants/iq1m_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#ifndef IQ1M_R16_NR
#define IQ1M_R16_NR 8 /* activation rows per tile */
#endif
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ1M_R16_PF
#define IQ1M_R16_PF 8192
#endif
#define IQ1M_R16_STREAM_BYTES (1u << 20)
/* Activation rows a mat-mat keeps in L2 while it passes over all the weight groups (a
 * multiple of IQ1M_R16_NR; 64 Q8_K rows of 4096 values are 300 KB): past it, the weights
 * are read once per chunk instead of the activations once per group. */
#ifndef IQ1M_R16_ACT_CHUNK
#define IQ1M_R16_ACT_CHUNK 64
#endif

/* key = grid index | negative delta << 11: the 8 bytes 8 v + 9 + s of grid point v. */
static uint64_t iq1m_r16_tab[4096];
static pthread_once_t iq1m_r16_tab_once = PTHREAD_ONCE_INIT;

static void iq1m_r16_tab_init(void)
{
    for (int k = 0; k < 4096; k++) {
        const uint64_t g = kq_iq1s_grid[k & 2047];
        const int s = k & 2048 ? -1 : 1;
        uint64_t v = 0;
        for (int j = 0; j < 8; j++)
            v |= (uint64_t)(uint8_t)(8 * (int8_t)(g >> 8 * j) + 9 + s) << 8 * j;
        iq1m_r16_tab[k] = v;
    }
}

/* 8 bytes at p broadcast to every qword lane. */
KQ_INLINE __m512i iq1m_r16_bcast8(const int8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* Lane r: the sum of lanes 2r and 2r + 1 of a (r < 8) or of b (r >= 8): rows 0..15. */
KQ_INLINE __m512i iq1m_r16_pairs(__m512i a, __m512i b, __m512i even, __m512i odd)
{
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
}

/* Group l's qh nibble (index bits 8..10, delta sign) in bits 8..11 of each lane. */
KQ_INLINE __m512i iq1m_r16_high(__m512i qh, const int l)
{
    const __m512i v = l == 3   ? _mm512_srli_epi32(qh, 4)
                      : l == 2 ? qh
                               : _mm512_slli_epi32(qh, 8 - 4 * l);
    return _mm512_and_si512(v, _mm512_set1_epi32(0xF00));
}

/* (2 s + 1) of the 3-bit scale at bit sh of each lane. */
KQ_INLINE __m512i iq1m_r16_scale(__m512i sc, const int sh)
{
    const __m512i v = sh == 0 ? _mm512_slli_epi32(sc, 1) : _mm512_srli_epi32(sc, sh - 1);
    return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(14)), _mm512_set1_epi32(1));
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq1m_r16_tile(int64_t nb, const struct iq1m_r16_block *b, const char *act,
                             size_t act_stride, const int nr, float *out, size_t out_stride,
                             const int prefetch)
{
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i dup0 = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i dup1 =
        _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m512i zero = _mm512_setzero_si512();
    __m512 tot[IQ1M_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ1M_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ1M_R16_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) y[r] =
            (const struct splash_q8_k_block *)(act + r * act_stride) + i;
        __m512i sc[4];
        KQ_UNROLL for (int k = 0; k < 4; k++) sc[k] =
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)b->sc[k]));
        /* the 16 rows' fp16 d from the scale words' top nibbles */
        const __m512i dbits = _mm512_or_si512(
            _mm512_or_si512(_mm512_srli_epi32(sc[0], 12),
                            _mm512_and_si512(_mm512_srli_epi32(sc[1], 8), _mm512_set1_epi32(0xF0))),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(sc[2], 4), _mm512_set1_epi32(0xF00)),
                            _mm512_and_si512(sc[3], _mm512_set1_epi32(0xF000))));
        const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dbits));
        __m512i ls32[SPLASH_QK_K / 32];
        __m512i bsum[2][IQ1M_R16_NR];
        KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++) bsum[h][r] =
            zero;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const __m512i scw = sc[ib >> 1];
            const __m512i ls[2] = {
                ib & 1 ? iq1m_r16_scale(scw, 6) : iq1m_r16_scale(scw, 0),
                ib & 1 ? iq1m_r16_scale(scw, 9) : iq1m_r16_scale(scw, 3),
            };
            ls32[ib] = _mm512_or_si512(ls[0], _mm512_slli_epi32(ls[1], 16));
            const __m512i qh =
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)b->qh[ib]));
            KQ_UNROLL for (int s = 0; s < 2; s++)
            {
                const __m512i lsp[2] = {_mm512_permutexvar_epi32(dup0, ls[s]),
                                        _mm512_permutexvar_epi32(dup1, ls[s])};
                __m512i acc[2][IQ1M_R16_NR];
                KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++)
                    acc[h][r] = zero;
                KQ_UNROLL for (int l = 2 * s; l < 2 * s + 2; l++)
                {
                    const __m512i key = _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                            (const __m128i *)(b->qs[ib] + 16 * l))),
                                                        iq1m_r16_high(qh, l));
                    KQ_UNROLL for (int h = 0; h < 2; h++)
                    {
                        const __m256i kh =
                            h ? _mm512_extracti64x4_epi64(key, 1) : _mm512_castsi512_si256(key);
                        const __m512i wv =
                            _mm512_i32gather_epi64(kh, (const void *)iq1m_r16_tab, 8);
                        KQ_UNROLL for (int r = 0; r < nr; r++) acc[h][r] = _mm512_dpbusd_epi32(
                            acc[h][r], wv, iq1m_r16_bcast8(y[r]->qs + 32 * ib + 8 * l));
                    }
                }
                KQ_UNROLL for (int h = 0; h < 2; h++) KQ_UNROLL for (int r = 0; r < nr; r++)
                    bsum[h][r] = _mm512_dpwssd_epi32(bsum[h][r], acc[h][r], lsp[h]);
            }
        }
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            /* sum over the block's halves of scale times bsum, for the 9 S to take off */
            __m512i corr = zero;
            KQ_UNROLL for (int ib = 0; ib < SPLASH_QK_K / 32; ib++)
            {
                int32_t pair;
                memcpy(&pair, y[r]->bsums + 2 * ib, 4);
                corr = _mm512_dpwssd_epi32(corr, ls32[ib], _mm512_set1_epi32(pair));
            }
            const __m512i t = _mm512_sub_epi32(iq1m_r16_pairs(bsum[0][r], bsum[1][r], even, odd),
                                               _mm512_add_epi32(_mm512_slli_epi32(corr, 3), corr));
            tot[r] = _mm512_add_ps(tot[r], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)),
                                                         _mm512_cvtepi32_ps(t)));
        }
    }
    KQ_UNROLL for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(_mm512_set1_ps(0.125f), tot[r]));
}

/* tiles of fewer rows than IQ1M_R16_NR at the end of the activation rows (cases past
 * IQ1M_R16_NR - 1 are never taken) */
#define IQ1M_R16_CASE(NR)                                                                          \
    case NR:                                                                                       \
        iq1m_r16_tile(nb, b, a, act_stride, NR < IQ1M_R16_NR ? NR : IQ1M_R16_NR, o, out_stride,    \
                      pf);                                                                         \
        break;

void iq1m_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    pthread_once(&iq1m_r16_tab_once, iq1m_r16_tab_init);
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ1M_R16_ROWS * IQ1M_R16_ROWS;
    const char *wb = w;
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ1M_R16_STREAM_BYTES;
    if (n_act == 1) {
        for (int64_t g = 0; g < n_full; g += IQ1M_R16_ROWS) {
            const struct iq1m_r16_block *b =
                (const struct iq1m_r16_block *)(wb + (size_t)g * w_stride);
            if (stream)
                iq1m_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 1);
            else
                iq1m_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, 0);
        }
    }
    /* chunks of activation rows small enough to stay in L2; per chunk, group by group,
     * every activation tile over the group's blocks while they are in L1/L2 */
    for (int64_t j0 = 0; n_act > 1 && j0 < n_act; j0 += IQ1M_R16_ACT_CHUNK) {
        const int64_t j1 = n_act - j0 > IQ1M_R16_ACT_CHUNK ? j0 + IQ1M_R16_ACT_CHUNK : n_act;
        for (int64_t g = 0; g < n_full; g += IQ1M_R16_ROWS) {
            const struct iq1m_r16_block *b =
                (const struct iq1m_r16_block *)(wb + (size_t)g * w_stride);
            for (int64_t j = j0; j < j1; j += IQ1M_R16_NR) {
                const char *a = (const char *)act + (size_t)j * act_stride;
                float *o = out + (size_t)j * out_stride + (size_t)g;
                const int pf = stream && j == j0;
                switch (j1 - j >= IQ1M_R16_NR ? IQ1M_R16_NR : (int)(j1 - j)) {
                    IQ1M_R16_CASE(1)
                    IQ1M_R16_CASE(2)
                    IQ1M_R16_CASE(3)
                    IQ1M_R16_CASE(4)
                    IQ1M_R16_CASE(5)
                    IQ1M_R16_CASE(6)
                    IQ1M_R16_CASE(7)
                default:
                    iq1m_r16_tile(nb, b, a, act_stride, IQ1M_R16_NR, o, out_stride, pf);
                    break;
                }
            }
        }
    }
    /* the rows after the last whole group are plain IQ1_M rows */
    if (n_full < n_w)
        iq1m_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                               act_stride, n_act, out + n_full, out_stride);
}
