/* AVX-512 VNNI kernel of IQ3_S_R16 (iq3s_r16.h) against Q8_K activations.
 *
 * The grid is looked up in registers, not gathered. Every IQ3_S grid value is odd and
 * below 16, so an entry's 4 values fit in two bytes of nibbles: plane A holds values 0
 * and 1 (low and high nibble), plane B values 2 and 3; each plane is a 512-byte table
 * (eight vectors). Four vpermi2b (each over 128 entries) and three blends (on the index
 * byte's top bit and on the 9th bits, which the layout keeps as ready 64-bit masks) look
 * a plane up for 64 indices at once. A 64-byte vector of indices (qs[h]: 4 indices of 16
 * rows) so gives, for each value t of the 4, lane r's 4 bytes = magnitude t of values
 * 16h + 4c + t, c = 0..3: one vpternlogd (and a shift for the high nibbles) makes it
 * 64 + magnitude, and a masked subtract from 128 under the sign mask sg[h][t] (also kept
 * ready) makes the negative weights 64 - magnitude (so every weight is 64 +- m, 49 .. 79,
 * unsigned). That is a vpdpbusd operand whose activations are the same 16 bytes
 * transposed 4 x 4, which each activation row's block gets once (one vpshufb per 64
 * bytes) into a small buffer. The 64 * (sum of the activations) this adds is taken off by
 * starting each 32-value sub-block's accumulator at -64 * (its two Q8_K bsums), so each
 * int32 lane ends at the exact signed sum, as the plain kernels compute it.
 *
 * Integer and float steps, per (weight row, activation row) pair and super-block, are
 * the plain reference's: bsum = sum over sub-blocks of sum * (2 scale + 1) (exact int32),
 * then tot = tot + (d * d_a) * float(bsum). The mat-vec is the tile with one activation
 * row, so a pair gets the same bits whatever else shares the call (and the scalar
 * reference's bits).
 *
 * Per super-block of a group (4096 weights) the decode (128 vpermi2b, 96 blends, 64
 * vpternlogd, 32 shifts, 64 masked subtracts) is shared by up to IQ3S_R16_NR activation
 * rows; each activation row adds 64 vpdpbusd, 4 vpshufb and 8 multiplies and adds of
 * the sub-block sums. */
#include "formats/kquants/iq3s_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ3S_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ3S_R16_PF
#define IQ3S_R16_PF 8192
#endif
#ifndef IQ3S_R16_STREAM_BYTES
#define IQ3S_R16_STREAM_BYTES (1u << 20)
#endif

/* The grid's two nibble planes: p[0] (values 0 | 1 << 4) and p[1] (values 2 | 3 << 4)
 * of the 512 entries, 8 vectors of 64 entries each (built per call). */
struct iq3s_r16_grid {
    __m512i p[2][8];
};

static void iq3s_r16_grid_tables(struct iq3s_r16_grid *g)
{
    _Alignas(64) uint8_t t[2][512];
    for (int e = 0; e < 512; e++) {
        const uint32_t v = kq_iq3s_grid[e];
        t[0][e] = (uint8_t)((v & 0xF) | (v >> 8 & 0xF) << 4);
        t[1][e] = (uint8_t)((v >> 16 & 0xF) | (v >> 24 & 0xF) << 4);
    }
    for (int p = 0; p < 2; p++)
        for (int v = 0; v < 8; v++)
            g->p[p][v] = _mm512_load_si512(t[p] + 64 * v);
}

/* One plane of the 64 9-bit indices (low bytes idx, bit 7 as mask m7, 9th bits m8). */
KQ_INLINE __m512i iq3s_r16_plane(const __m512i *p, const __m512i idx, const __mmask64 m7,
                                 const __mmask64 m8)
{
    const __m512i lo = _mm512_mask_blend_epi8(m7, _mm512_permutex2var_epi8(p[0], idx, p[1]),
                                              _mm512_permutex2var_epi8(p[2], idx, p[3]));
    const __m512i hi = _mm512_mask_blend_epi8(m7, _mm512_permutex2var_epi8(p[4], idx, p[5]),
                                              _mm512_permutex2var_epi8(p[6], idx, p[7]));
    return _mm512_mask_blend_epi8(m8, lo, hi);
}

/* The 8 weight vectors of sub-block ib: w[4 h' + t] holds 64 +- the magnitudes t of values
 * 32 ib + 16 h' + 4c + t (c = 0..3) of the 16 rows, one row per int32 lane. */
KQ_INLINE void iq3s_r16_decode(const struct iq3s_r16_block *b, const int ib,
                               const struct iq3s_r16_grid *g, __m512i w[8])
{
    const __m512i c128 = _mm512_set1_epi8((char)0x80), c0f = _mm512_set1_epi8(0x0F),
                  c40 = _mm512_set1_epi8(0x40);
    KQ_UNROLL for (int hh = 0; hh < 2; hh++)
    {
        const int h = 2 * ib + hh;
        const __m512i idx = _mm512_loadu_si512(b->qs[h]);
        const __mmask64 m7 = _mm512_movepi8_mask(idx), m8 = _cvtu64_mask64(b->qh[h]);
        const __m512i pa = iq3s_r16_plane(g->p[0], idx, m7, m8),
                      pb = iq3s_r16_plane(g->p[1], idx, m7, m8);
        __m512i m[4];
        /* (x & 0x0F) | 0x40 */
        m[0] = _mm512_ternarylogic_epi32(pa, c0f, c40, 0xEA);
        m[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(pa, 4), c0f, c40, 0xEA);
        m[2] = _mm512_ternarylogic_epi32(pb, c0f, c40, 0xEA);
        m[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(pb, 4), c0f, c40, 0xEA);
        /* 64 + m, or 128 - (64 + m) = 64 - m where the value is negative */
        KQ_UNROLL for (int t = 0; t < 4; t++) w[4 * hh + t] =
            _mm512_mask_sub_epi8(m[t], _cvtu64_mask64(b->sg[h][t]), c128, m[t]);
    }
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq3s_r16_tile(int64_t nb, const struct iq3s_r16_block *b, const char *act,
                             size_t act_stride, const int nr, float *out, size_t out_stride,
                             const struct iq3s_r16_grid *g, const int prefetch)
{
    /* byte 4t + c of each 16 from byte 4c + t */
    const __m512i tr =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    __m512 tot[IQ3S_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ3S_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ3S_R16_NR];
        /* -64 * (the activations' sum) of each sub-block, and the activations with each
         * 16 transposed 4 x 4, per activation row */
        _Alignas(32) int32_t init[IQ3S_R16_NR][8];
        _Alignas(64) int8_t at[IQ3S_R16_NR][SPLASH_QK_K];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            y[r] = (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            _mm256_store_si256((__m256i *)init[r],
                               _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[r]->bsums),
                                                 _mm256_set1_epi16(-64)));
            KQ_UNROLL for (int v = 0; v < 4; v++) _mm512_store_si512(
                at[r] + 64 * v, _mm512_shuffle_epi8(_mm512_loadu_si512(y[r]->qs + 64 * v), tr));
        }
        __asm__ volatile("" ::: "memory");
        const __m512i scv = _mm512_loadu_si512(b->sc);
        __m512i bsum[IQ3S_R16_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = _mm512_setzero_si512();
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            __m512i w[8];
            iq3s_r16_decode(b, ib, g, w);
            /* 2 * scale + 1 */
            const __m512i s4 =
                _mm512_and_si512(_mm512_srli_epi32(scv, 4 * ib), _mm512_set1_epi32(15));
            const __m512i ls = _mm512_or_si512(_mm512_add_epi32(s4, s4), _mm512_set1_epi32(1));
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const int8_t *a = at[r] + 32 * ib;
                __m512i acc0 = _mm512_set1_epi32(init[r][ib]), acc1 = _mm512_setzero_si512();
                KQ_UNROLL for (int q = 0; q < 8; q += 2)
                {
                    acc0 = _mm512_dpbusd_epi32(acc0, w[q], kq_bcast4(a + 4 * q));
                    acc1 = _mm512_dpbusd_epi32(acc1, w[q + 1], kq_bcast4(a + 4 * q + 4));
                }
                bsum[r] =
                    _mm512_add_epi32(bsum[r], _mm512_mullo_epi32(_mm512_add_epi32(acc0, acc1), ls));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
            _mm512_add_ps(tot[r], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[r]->d)),
                                                _mm512_cvtepi32_ps(bsum[r])));
    }
    KQ_UNROLL for (int r = 0; r < nr; r++) _mm512_storeu_ps(out + r * out_stride, tot[r]);
}

#define IQ3S_R16_CASE(NR)                                                                          \
    case NR:                                                                                       \
        iq3s_r16_tile(nb, b, a, act_stride, NR, o, out_stride, &grid, pf);                         \
        break;

void iq3s_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ3S_R16_ROWS * IQ3S_R16_ROWS;
    const char *wb = w;
    struct iq3s_r16_grid grid;
    iq3s_r16_grid_tables(&grid);
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ3S_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ3S_R16_ROWS) {
        const struct iq3s_r16_block *b = (const struct iq3s_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq3s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, &grid, 1);
            else
                iq3s_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, &grid, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ3S_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ3S_R16_NR ? IQ3S_R16_NR : (int)(n_act - j)) {
                IQ3S_R16_CASE(1)
                IQ3S_R16_CASE(2)
                IQ3S_R16_CASE(3)
                IQ3S_R16_CASE(4)
                IQ3S_R16_CASE(5)
                IQ3S_R16_CASE(6)
                IQ3S_R16_CASE(7)
            default:
                iq3s_r16_tile(nb, b, a, act_stride, IQ3S_R16_NR, o, out_stride, &grid, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ3_S rows */
    if (n_full < n_w)
        iq3s_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                               act_stride, n_act, out + n_full, out_stride);
}
