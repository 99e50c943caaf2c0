/* AVX-512 VNNI kernel of IQ3_XXS_R16 (iq3xxs_r16.h) against Q8_K activations.
 *
 * The grid is looked up in registers, not gathered: byte t of the 256 grid entries is a
 * 256-byte table (four vectors), and two vpermi2b (each over 128 entries) and a blend on
 * the index's top bit look it up (biased by +64) for 64 indices at once. A 64-byte vector of
 * indices (qs[h]: 4 indices of 16 rows) so gives, for each t, lane r's 4 bytes = magnitude t (4 ..
 * 62) of values 16h + 4c + t, c = 0..3: a vpdpbusd operand whose activations are the same 16 bytes
 * transposed 4 x 4, which each activation row's block gets once (one vpshufb per 64 bytes) into a
 * small buffer.
 *
 * Signs: a sub-block's 16 sign-and-scale words (one per lane) become 4 sign bytes per
 * lane with one vpmultishiftqb (bytes at bit 7l of each word) and one vpermi2b into the
 * table of the 128 seven-bit groups with their parity bit; per 16 values one vpshufb
 * places the two sign bytes they need, and per t a vptestmb picks each byte's sign as a
 * mask, with which a masked subtract from 128 makes the negative weights 64 - magnitude
 * (so each weight is 64 +- magnitude, 2 .. 126, unsigned). The 64 * (sum of the activations) this
 * adds to a vpdpbusd is taken off by starting each 32-value sub-block's accumulator at -64 * (its
 * two Q8_K bsums), so each int32 lane ends at the exact signed sum, as the plain kernels compute
 * it.
 *
 * Integer and float steps, per (weight row, activation row) pair and super-block, are
 * the plain reference's: bsum = sum over sub-blocks of sum * (2 scale + 1) (exact int32),
 * then tot = tot + (d * d_a) * float(bsum), and the result 0.25 * tot. The mat-vec is
 * the tile with one activation row, so a pair gets the same bits whatever else shares
 * the call (and the scalar reference's bits).
 *
 * Per super-block of a group (4096 weights) the decode (128 vpermi2b, 64 blends, 8 sign
 * expansions, 64 tests and masked subtracts) is shared by up to IQ3XXS_R16_NR activation
 * rows; each activation row adds 64 vpdpbusd, 4 vpshufb and 8 multiplies and adds of the
 * sub-block sums. */
#include "formats/kquants/iq3xxs_r16.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

#define IQ3XXS_R16_NR 8 /* activation rows per tile */
/* A mat-vec streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads; in cache the prefetches would only cost issue slots. */
#ifndef IQ3XXS_R16_PF
#define IQ3XXS_R16_PF 8192
#endif
#define IQ3XXS_R16_STREAM_BYTES (1u << 20)

/* IQ3_XXS signs (format data): a 7-bit sign group and, as bit 7, its parity (the count
 * of negative values among 8 is even); kq_iq_signs8 as a 128-byte table for vpermi2b. */
static const uint8_t iq3xxs_r16_signs[128] __attribute__((aligned(64))) = {
    0x00, 0x81, 0x82, 0x03, 0x84, 0x05, 0x06, 0x87, 0x88, 0x09, 0x0A, 0x8B, 0x0C, 0x8D, 0x8E, 0x0F,
    0x90, 0x11, 0x12, 0x93, 0x14, 0x95, 0x96, 0x17, 0x18, 0x99, 0x9A, 0x1B, 0x9C, 0x1D, 0x1E, 0x9F,
    0xA0, 0x21, 0x22, 0xA3, 0x24, 0xA5, 0xA6, 0x27, 0x28, 0xA9, 0xAA, 0x2B, 0xAC, 0x2D, 0x2E, 0xAF,
    0x30, 0xB1, 0xB2, 0x33, 0xB4, 0x35, 0x36, 0xB7, 0xB8, 0x39, 0x3A, 0xBB, 0x3C, 0xBD, 0xBE, 0x3F,
    0xC0, 0x41, 0x42, 0xC3, 0x44, 0xC5, 0xC6, 0x47, 0x48, 0xC9, 0xCA, 0x4B, 0xCC, 0x4D, 0x4E, 0xCF,
    0x50, 0xD1, 0xD2, 0x53, 0xD4, 0x55, 0x56, 0xD7, 0xD8, 0x59, 0x5A, 0xDB, 0x5C, 0xDD, 0xDE, 0x5F,
    0x60, 0xE1, 0xE2, 0x63, 0xE4, 0x65, 0x66, 0xE7, 0xE8, 0x69, 0x6A, 0xEB, 0x6C, 0xED, 0xEE, 0x6F,
    0xF0, 0x71, 0x72, 0xF3, 0x74, 0xF5, 0xF6, 0x77, 0x78, 0xF9, 0xFA, 0x7B, 0xFC, 0x7D, 0x7E, 0xFF,
};

/* 64 + byte t of the 256 grid entries, for t = 0..3, as 4 x 4 vectors (built per call). */
struct iq3xxs_r16_grid {
    __m512i t[4][4];
};

KQ_INLINE void iq3xxs_r16_grid_tables(struct iq3xxs_r16_grid *g)
{
    KQ_UNROLL for (int t = 0; t < 4; t++) KQ_UNROLL for (int v = 0; v < 4; v++)
    {
        const __m512i *p = (const __m512i *)(kq_iq3xxs_grid + 64 * v);
        __m128i q[4];
        KQ_UNROLL for (int c = 0; c < 4; c++) q[c] =
            _mm_add_epi8(_mm512_cvtepi32_epi8(_mm512_srli_epi32(_mm512_loadu_si512(p + c), 8 * t)),
                         _mm_set1_epi8(64));
        g->t[t][v] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(q[0]), q[1], 1)),
            _mm256_inserti128_si256(_mm256_castsi128_si256(q[2]), q[3], 1), 1);
    }
}

/* The 8 weight vectors of sub-block ib: w[4 h' + t] holds 64 +- the magnitudes t of values
 * 32 ib + 16 h' + 4c + t (c = 0..3) of the 16 rows, one row per int32 lane. */
KQ_INLINE void iq3xxs_r16_decode(const struct iq3xxs_r16_block *b, const int ib,
                                 const struct iq3xxs_r16_grid *g, const __m512i st0,
                                 const __m512i st1, __m512i w[8])
{
    /* byte l of each word: its bits 7l .. 7l + 7 (vpermi2b reads the low 7) */
    const __m512i shifts = _mm512_set1_epi64(0x352E2720150E0700ll);
    /* vpshufb: sign bytes 2h', 2h', 2h' + 1, 2h' + 1 of its own word to a word's 4 bytes */
    const __m512i base = _mm512_set_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0, 0x0C0C0C0C,
                                          0x08080808, 0x04040404, 0, 0x0C0C0C0C, 0x08080808,
                                          0x04040404, 0, 0x0C0C0C0C, 0x08080808, 0x04040404, 0);
    const __m512i c128 = _mm512_set1_epi8((char)0x80);
    const __m512i aux = _mm512_loadu_si512(b->aux[ib]);
    const __m512i sg =
        _mm512_permutex2var_epi8(st0, _mm512_multishift_epi64_epi8(shifts, aux), st1);
    KQ_UNROLL for (int h = 0; h < 2; h++)
    {
        const __m512i idx = _mm512_loadu_si512(b->qs[2 * ib + h]);
        const __mmask64 top = _mm512_movepi8_mask(idx);
        const __m512i sb = _mm512_shuffle_epi8(
            sg, _mm512_add_epi32(base, _mm512_set1_epi32(h ? 0x03030202 : 0x01010000)));
        KQ_UNROLL for (int t = 0; t < 4; t++)
        {
            const __m512i m =
                _mm512_mask_blend_epi8(/* 64 + magnitude */
                                       top, _mm512_permutex2var_epi8(g->t[t][0], idx, g->t[t][1]),
                                       _mm512_permutex2var_epi8(g->t[t][2], idx, g->t[t][3]));
            /* value 4c + t of the 16: sign bit t (c even) or 4 + t (c odd) of its byte */
            const __mmask64 neg =
                _mm512_test_epi8_mask(sb, _mm512_set1_epi32((int)(0x10011001u << t)));
            /* 64 + m, or 128 - (64 + m) = 64 - m */
            w[4 * h + t] = _mm512_mask_sub_epi8(m, neg, c128, m);
        }
    }
}

/* The 16 rows of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + l] = dot(row l, activation row r). */
KQ_INLINE void iq3xxs_r16_tile(int64_t nb, const struct iq3xxs_r16_block *b, const char *act,
                               size_t act_stride, const int nr, float *out, size_t out_stride,
                               const struct iq3xxs_r16_grid *g, const int prefetch)
{
    const __m512i st0 = _mm512_load_si512(iq3xxs_r16_signs),
                  st1 = _mm512_load_si512(iq3xxs_r16_signs + 64);
    /* byte 4t + c of each 16 from byte 4c + t */
    const __m512i tr =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    __m512 tot[IQ3XXS_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, b++) {
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + IQ3XXS_R16_PF + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[IQ3XXS_R16_NR];
        /* -64 * (the activations' sum) of each sub-block, and the activations with each
         * 16 transposed 4 x 4, per activation row */
        _Alignas(32) int32_t init[IQ3XXS_R16_NR][8];
        _Alignas(64) int8_t at[IQ3XXS_R16_NR][SPLASH_QK_K];
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
        __m512i bsum[IQ3XXS_R16_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) bsum[r] = _mm512_setzero_si512();
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            __m512i w[8];
            iq3xxs_r16_decode(b, ib, g, st0, st1, w);
            const __m512i ls = _mm512_or_si512(
                _mm512_srli_epi32(_mm512_loadu_si512(b->aux[ib]), 27), _mm512_set1_epi32(1));
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
    KQ_UNROLL for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + r * out_stride, _mm512_mul_ps(_mm512_set1_ps(0.25f), tot[r]));
}

#define IQ3XXS_R16_CASE(NR)                                                                        \
    case NR:                                                                                       \
        iq3xxs_r16_tile(nb, b, a, act_stride, NR, o, out_stride, &grid, pf);                       \
        break;

void iq3xxs_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *act, size_t act_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ3XXS_R16_ROWS * IQ3XXS_R16_ROWS;
    const char *wb = w;
    struct iq3xxs_r16_grid grid;
    iq3xxs_r16_grid_tables(&grid);
    /* a call over more rows than L2 holds streams them from memory: its first tile
     * prefetches ahead, later tiles find the group in L2 */
    const int stream = (size_t)n_full * w_stride > IQ3XXS_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in L2 */
    for (int64_t g = 0; g < n_full; g += IQ3XXS_R16_ROWS) {
        const struct iq3xxs_r16_block *b =
            (const struct iq3xxs_r16_block *)(wb + (size_t)g * w_stride);
        if (n_act == 1) {
            if (stream)
                iq3xxs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, &grid, 1);
            else
                iq3xxs_r16_tile(nb, b, act, act_stride, 1, out + g, out_stride, &grid, 0);
            continue;
        }
        for (int64_t j = 0; j < n_act; j += IQ3XXS_R16_NR) {
            const char *a = (const char *)act + (size_t)j * act_stride;
            float *o = out + (size_t)j * out_stride + (size_t)g;
            const int pf = stream && j == 0;
            switch (n_act - j >= IQ3XXS_R16_NR ? IQ3XXS_R16_NR : (int)(n_act - j)) {
                IQ3XXS_R16_CASE(1)
                IQ3XXS_R16_CASE(2)
                IQ3XXS_R16_CASE(3)
                IQ3XXS_R16_CASE(4)
                IQ3XXS_R16_CASE(5)
                IQ3XXS_R16_CASE(6)
                IQ3XXS_R16_CASE(7)
            default:
                iq3xxs_r16_tile(nb, b, a, act_stride, IQ3XXS_R16_NR, o, out_stride, &grid, pf);
                break;
            }
        }
    }
    /* the rows after the last whole group are plain IQ3_XXS rows */
    if (n_full < n_w)
        iq3xxs_mul_rows_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act,
                                 act_stride, n_act, out + n_full, out_stride);
}
