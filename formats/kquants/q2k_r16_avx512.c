/* AVX-512 VNNI kernel of Q2_K_R16 (q2k_r16.h) against Q8_K activations.
 *
 * A group block's qs[t] holds 4 inputs of 16 rows per bit pair, one row per int32 lane.
 * Masked to one bit pair (bits 0-1, or 2-3 for 4 times the level; bits 4-7 after one
 * 16-bit shift by 4), a vpdpbusd against 4 activations broadcast adds the 16 rows'
 * partial sums of 4 inputs; four of them give a sub-block's 16-value sums, at most
 * 16 * 12 * 128 < 2^15 in magnitude, so one vpdpwssd with the rows' scales as int16
 * pairs (sc, 0) adds sc * sum to the block's integer total (the high half of each lane,
 * the sum's sign, meets the 0). Sub-blocks of levels taken at bits 0-1 take 4 sc, those
 * at bits 2-3 sc, so the total is 4 sum sc q a (< 2^23, exact as a float). The mins
 * take vpdpwssd of 16 m (two per lane, the scale bytes masked in place or after a
 * 16-bit shift by 8) against two adjacent Q8_K block sums broadcast from memory.
 *
 * Everything but the last steps is integer, so the float steps per (weight row,
 * activation row) pair and block are always the same few, the scalar row's (ggml's
 * generic order): d_a d times the total / 4 minus d_a dmin times the mins' total / 16,
 * added to the row's sum; a pair gets the scalar row's bits whatever else shares the
 * call. (Scaling the difference by d_a once, as before, put the tiny MoE Q2_K model's
 * position 0 0.023 off its golden logits; this order puts it 4e-7 off.) The rows' scales are decoded
 * once per block for all activation rows of a tile (up to KQ_MAX_NR), and so are the
 * masked levels; more activation rows take the group's blocks a few at a time, every
 * tile over them while they are in L1. A mat-vec is the tile of one activation row,
 * prefetching ahead when it streams its weights from memory. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"
#include "formats/kquants/q2k_r16.h"

/* A call streaming its rows from memory prefetches (into L2) this far ahead of the
 * block it reads, every line, in its first activation tile; in cache the prefetches
 * would only cost issue slots. A call over more than STREAM_BYTES is taken to stream:
 * the engine hands each thread pieces of tens of KB of decode matrices that never stay
 * in cache between tokens. */
#define Q2K_R16_PREFETCH 8192
#define Q2K_R16_STREAM_BYTES (16u << 10)
/* Blocks per pass when several activation tiles share a group: 8 blocks of the group
 * (10.5 KB) and of 8 activation rows (18.7 KB) stay in L1 for every tile. */
#define Q2K_R16_KC 8

/* Byte p of every int32 lane, zero-extended to the lane. */
KQ_INLINE __m512i q2k_r16_spread(__m512i v, int p)
{
    /* vpshufb indexes within 128-bit lanes; 0x80 gives a zero byte */
    const uint32_t w0 = 0x80808000u | (uint32_t)p;
    return _mm512_shuffle_epi8(
        v, _mm512_set4_epi32((int)(w0 + 12), (int)(w0 + 8), (int)(w0 + 4), (int)w0));
}

/* nb blocks of the 16 rows of one group against nr activation rows (at act, act_stride
 * apart): out[r * out_stride + l] gets (first) or adds dot(row l, activation row r) over
 * those blocks, each block's term added to the running sum as it comes, so a row's sum
 * takes the same steps however its blocks are split between calls. */
KQ_INLINE void q2k_r16_tile(int64_t nb, const struct q2k_r16_block *b, const char *act,
                            size_t act_stride, const int nr, float *out, size_t out_stride,
                            const int first, const int prefetch)
{
    const __m512i m03 = _mm512_set1_epi8(0x03), m0c = _mm512_set1_epi8(0x0C),
                  m0f = _mm512_set1_epi8(0x0F), mmin = _mm512_set1_epi32(0x00F000F0);
    __m512 tot[KQ_MAX_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + r * out_stride);
    for (int64_t i = 0; i < nb; i++, b++) {
        /* the first tile over weights streaming from memory fetches ahead, so the loads
         * overlap its arithmetic; later tiles find the group in L1/L2 */
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < (int)sizeof *b; l += 64)
                _mm_prefetch((const char *)b + Q2K_R16_PREFETCH + l, _MM_HINT_T1);
        }
        const struct splash_q8_k_block *y[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) y[r] =
            (const struct splash_q8_k_block *)(act + r * act_stride) + i;
        __m512i tq[KQ_MAX_NR], tm[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            tq[r] = _mm512_setzero_si512();
            tm[r] = _mm512_setzero_si512();
        }
        /* qs[8h + 4gh + gg], bit pair k: inputs 128h + 32k + 16gh + 4gg .. + 3, of
         * sub-block j = 8h + 2k + gh, whose scale is byte Q2K_R16_SUB(j % 4) of
         * scales[j / 4] */
        KQ_UNROLL for (int h = 0; h < 2; h++)
        {
            const __m512i ma = _mm512_and_si512(_mm512_loadu_si512(b->scales[2 * h]), m0f);
            const __m512i mb = _mm512_and_si512(_mm512_loadu_si512(b->scales[2 * h + 1]), m0f);
            const __m512i ma4 = _mm512_slli_epi32(ma, 2), mb4 = _mm512_slli_epi32(mb, 2);
            KQ_UNROLL for (int gh = 0; gh < 2; gh++)
            {
                __m512i v[4], u[4];
                KQ_UNROLL for (int gg = 0; gg < 4; gg++)
                {
                    v[gg] = _mm512_loadu_si512(b->qs[8 * h + 4 * gh + gg]);
                    u[gg] = _mm512_srli_epi16(v[gg], 4);
                }
                KQ_UNROLL for (int k = 0; k < 4; k++)
                {
                    const __m512i src = k == 0 ? ma4 : k == 1 ? ma : k == 2 ? mb4 : mb;
                    const __m512i sc = q2k_r16_spread(src, Q2K_R16_SUB((k & 1) * 2 + gh));
                    __m512i w[4];
                    KQ_UNROLL for (int gg = 0; gg < 4; gg++) w[gg] =
                        _mm512_and_si512(k < 2 ? v[gg] : u[gg], k & 1 ? m0c : m03);
                    const int a0 = 128 * h + 32 * k + 16 * gh;
                    KQ_UNROLL for (int r = 0; r < nr; r++)
                    {
                        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0],
                                                          kq_bcast4(y[r]->qs + a0));
                        acc = _mm512_dpbusd_epi32(acc, w[1], kq_bcast4(y[r]->qs + a0 + 4));
                        acc = _mm512_dpbusd_epi32(acc, w[2], kq_bcast4(y[r]->qs + a0 + 8));
                        acc = _mm512_dpbusd_epi32(acc, w[3], kq_bcast4(y[r]->qs + a0 + 12));
                        tq[r] = _mm512_dpwssd_epi32(tq[r], acc, sc);
                    }
                }
            }
        }
        /* mins: the low bytes of a lane's halves are sub-blocks 4q, 4q + 1, the high
         * bytes 4q + 2, 4q + 3 */
        KQ_UNROLL for (int q = 0; q < 4; q++)
        {
            const __m512i s = _mm512_loadu_si512(b->scales[q]);
            const __m512i lo = _mm512_and_si512(s, mmin);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(s, 8), mmin);
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                tm[r] = _mm512_dpwssd_epi32(tm[r], lo, kq_bcast4(y[r]->bsums + 4 * q));
                tm[r] = _mm512_dpwssd_epi32(tm[r], hi, kq_bcast4(y[r]->bsums + 4 * q + 2));
            }
        }
        /* the scalar row's float steps (ggml's generic Q2_K dot, which the golden MoE
         * logits were made with): dall = d_a d, dmin = d_a dmin, then
         * sum + (dall isum - dmin summs), each rounded on its own; isum and summs are the
         * integer totals without their factors 4 and 16 (exact shifts) */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            const __m512 da = _mm512_set1_ps(y[r]->d);
            const __m512 isum = _mm512_cvtepi32_ps(_mm512_srai_epi32(tq[r], 2));
            const __m512 summs = _mm512_cvtepi32_ps(_mm512_srai_epi32(tm[r], 4));
            const __m512 s = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(da, dw), isum),
                                           _mm512_mul_ps(_mm512_mul_ps(da, mw), summs));
            tot[r] = _mm512_add_ps(tot[r], s);
        }
    }
    KQ_UNROLL for (int r = 0; r < nr; r++) _mm512_storeu_ps(out + r * out_stride, tot[r]);
}

#define Q2K_R16_CASE(NR)                                                                           \
    case NR:                                                                                       \
        q2k_r16_tile(kc, b, a, act_stride, NR, o, out_stride, i0 == 0, pf);                        \
        break;

void q2k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q2K_R16_ROWS * Q2K_R16_ROWS;
    const char *wb = w;
    /* a call streaming its rows from memory prefetches ahead */
    const int stream = (size_t)n_full * w_stride > Q2K_R16_STREAM_BYTES;
    /* one activation tile reads each block once: no need to split the row */
    const int64_t kc_max = n_act > KQ_MAX_NR ? Q2K_R16_KC : nb;
    /* group by group, every activation tile over a few of the group's blocks while they
     * are in L1 */
    for (int64_t g = 0; g < n_full; g += Q2K_R16_ROWS) {
        const struct q2k_r16_block *grp = (const struct q2k_r16_block *)(wb + (size_t)g * w_stride);
        for (int64_t i0 = 0; i0 < nb; i0 += kc_max) {
            const int64_t kc = nb - i0 < kc_max ? nb - i0 : kc_max;
            const struct q2k_r16_block *b = grp + i0;
            for (int64_t j = 0; j < n_act; j += KQ_MAX_NR) {
                const char *a = (const char *)act + (size_t)j * act_stride +
                                (size_t)i0 * sizeof(struct splash_q8_k_block);
                float *o = out + (size_t)j * out_stride + (size_t)g;
                const int pf = stream && j == 0;
                switch (n_act - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(n_act - j)) {
                    Q2K_R16_CASE(1)
                    Q2K_R16_CASE(2)
                    Q2K_R16_CASE(3)
                    Q2K_R16_CASE(4)
                    Q2K_R16_CASE(5)
                    Q2K_R16_CASE(6)
                    Q2K_R16_CASE(7)
                default:
                    q2k_r16_tile(kc, b, a, act_stride, KQ_MAX_NR, o, out_stride, i0 == 0, pf);
                    break;
                }
            }
        }
    }
    /* the rows after the last whole group are plain Q2_K rows */
    if (n_full < n_w)
        q2k_mul_q8k_avx2(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act, act_stride,
                         n_act, out + n_full, out_stride);
}
