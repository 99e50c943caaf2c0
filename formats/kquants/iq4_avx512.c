/* AVX-512 VNNI rows of IQ4_XS and IQ4_NL. Weights decode to |level| (u8) and a mask of
 * negative levels (no level is zero); vpdpbusd multiplies |w| by the activation negated
 * under that mask. As in the AVX2 rows, the eight 32-value integer sums of each 256
 * values are computed in SIMD and the reference's float steps replayed in order.
 *
 * A mat-vec is bound by memory: its multi-row tiles prefetch into L2 the next tile's
 * bytes block by block (kq_prefetch_next_tile), in memory order; a lone row prefetches
 * 2 KiB ahead of itself. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/kq_simd.h"

/* 256 decoded weights: four groups of 64 (two 32-value sub-blocks each). */
struct iq4_dec512 {
    __m512i mag[4];
    __mmask64 neg[4];
};

/* Levels of two sub-blocks whose 16 nibble bytes each are at qa and qb. */
static inline void iq4_decode64(struct iq4_dec512 *dec, int m, const uint8_t *qa, const uint8_t *qb)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values));
    __m256i v = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)qb),
                                 _mm_loadu_si128((const __m128i *)qa));
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
    w = _mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(1, 1, 0, 0));       /* qa, qa, qb, qb */
    w = _mm512_mask_blend_epi64(0xcc, w, _mm512_srli_epi16(w, 4)); /* high nibbles in lanes 1, 3 */
    __m512i q = _mm512_shuffle_epi8(lut, _mm512_and_si512(w, _mm512_set1_epi8(0x0f)));
    dec->mag[m] = _mm512_abs_epi8(q);
    dec->neg[m] = _mm512_movepi8_mask(q);
}

/* The eight 32-value sums of w * a; act[m] holds the 64 activations of group m. */
static inline void iq4_sums512(const struct iq4_dec512 *dec, const __m512i act[4], int32_t sums[8])
{
    __m256i h[8];
    for (int m = 0; m < 4; m++) {
        __m512i a = _mm512_mask_sub_epi8(act[m], dec->neg[m], _mm512_setzero_si512(), act[m]);
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), dec->mag[m], a);
        h[2 * m] = _mm512_castsi512_si256(p);
        h[2 * m + 1] = _mm512_extracti64x4_epi64(p, 1);
    }
    _mm256_storeu_si256((__m256i *)sums, kq_reduce8(h));
}

static inline __m512i iq4_load_pair(const int8_t *a, const int8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* ---- IQ4_XS: (weight, activation) pairs as lanes ------------------------------
 *
 * The reference adds d4d8 * ls * sum over each 32 values to one float running sum,
 * in order; a vector whose 16 lanes are 16 (weight row, activation row) pairs repeats
 * those float steps lane by lane, bit for bit, 16 pairs at a time. The integer sums
 * come from vpdpbusd on levels + 128 (unsigned) against the signed activations; the
 * 128 * sum(a) this adds is the start value of the accumulator, which depends on the
 * activations only. A weight register of 64 code bytes (four sub-blocks) is used as
 * is: its low nibbles pair with activations [0..15] of each sub-block and its high
 * nibbles with [16..31], the activations being regrouped once per tile. The 32 sum
 * vectors of 16 pairs (four lanes per sub-block each) reduce to eight vectors of one
 * sub-block each, lanes = pairs, with two shuffle-and-add levels and a 128-bit
 * transpose. */

#define IQ4_LANES 16

/* One activation block regrouped: lo[h] lane k = a[32 (4h + k) + 0..15], hi[h] the
 * values 16..31 of the same sub-blocks; negc[h] = -128 * (sum of each lane's four). */
struct iq4_act {
    __m512i lo[2], hi[2], negc[2];
};

/* One weight block: levels + 128 of qs[64 h ..]: lo = low nibbles, hi = high ones. */
struct iq4_wts {
    __m512i lo[2], hi[2];
};

KQ_INLINE void iq4xs_act(const struct q8_k_block *y, struct iq4_act *o)
{
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    for (int h = 0; h < 2; h++) {
        const __m512i a = _mm512_loadu_si512(y->qs + 128 * h);
        const __m512i b = _mm512_loadu_si512(y->qs + 128 * h + 64);
        o->lo[h] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        o->hi[h] = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        o->negc[h] = _mm512_sub_epi32(
            _mm512_setzero_si512(),
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, o->lo[h]), k80,
                                o->hi[h]));
    }
}

KQ_INLINE void iq4xs_wts(const struct iq4_xs_block *x, struct iq4_wts *o)
{
    /* the IQ4_NL levels + 128, as unsigned bytes */
    const __m512i lut =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values)),
                         _mm512_set1_epi8((char)0x80));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512(x->qs + 64 * h);
        o->lo[h] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
        o->hi[h] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
}

/* Two vectors, each four lanes per sub-block, into one holding for each of the four
 * sub-blocks k [pairs of x's lanes, pairs of y's lanes]: out[4k + 2s + q] =
 * src_s[4k + 2q] + src_s[4k + 2q + 1]. Used twice, it leaves one lane per (pair, k). */
KQ_INLINE __m512i iq4_fold(__m512i x, __m512i y, __m512i ia, __m512i ib)
{
    return _mm512_add_epi32(_mm512_permutex2var_epi32(x, ia, y),
                            _mm512_permutex2var_epi32(x, ib, y));
}

/* Weight decode for pair lane l: on the fly for single-activation tiles, else cached. */
#define IQ4_W(l) (nr == 1 ? &wfly : &wd[(l) / nr])

KQ_INLINE void iq4xs_tile(int64_t n, const void *w, size_t w_stride, const int nw, const void *act,
                          size_t act_stride, const int nr, float *out, size_t out_stride)
{
    const int64_t nb = n / KQ_QK_K;
    const int np = nw * nr; /* pairs in use; lane l is (weight l / nr, activation l % nr) */
    const __mmask16 used = (__mmask16)((1u << np) - 1);
    int32_t woff[IQ4_LANES], aoff[IQ4_LANES];
    for (int l = 0; l < IQ4_LANES; l++) {
        woff[l] = l < np ? (int32_t)((size_t)(l / nr) * w_stride) : 0;
        aoff[l] = l < np ? (int32_t)((size_t)(l % nr) * act_stride) : 0;
    }
    const __m512i vwoff = _mm512_loadu_si512(woff), vaoff = _mm512_loadu_si512(aoff);
    /* iq4_fold index pairs: level 1 (lanes of two pairs), level 2 (two level-1 results) */
    int32_t e1a[16], e2a[16];
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 2; s++)
            for (int q = 0; q < 2; q++) {
                e1a[4 * k + 2 * s + q] = 16 * s + 4 * k + 2 * q;
                e2a[4 * k + 2 * q + s] = 16 * q + 4 * k + 2 * s;
            }
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i i1a = _mm512_loadu_si512(e1a), i1b = _mm512_add_epi32(i1a, one);
    const __m512i i2a = _mm512_loadu_si512(e2a), i2b = _mm512_add_epi32(i2a, one);
    __m512 sumf = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const struct iq4_xs_block *x0 = (const struct iq4_xs_block *)w + i;
        const struct q8_k_block *y0 = (const struct q8_k_block *)act + i;
        struct iq4_act ad[KQ_MAX_NR];
        struct iq4_wts wd[IQ4_LANES], wfly;
        KQ_UNROLL for (int r = 0; r < nr; r++)
            iq4xs_act((const struct q8_k_block *)((const char *)y0 + r * act_stride), &ad[r]);
        if (nr == 1 && nw > 1)
            kq_prefetch_next_tile(w, w_stride, nw, i, sizeof(struct iq4_xs_block));
        if (nr > 1) {
            for (int wi = 0; wi < nw; wi++)
                iq4xs_wts((const struct iq4_xs_block *)((const char *)x0 + wi * w_stride), &wd[wi]);
        }
        /* per half h: D[h][t] holds, for lanes 4t..4t+3, the sums of sub-blocks 4h..4h+3 */
        __m512i d[2][4];
        for (int t = 0; t < 4; t++) {
            __m512i c[2][2];
            for (int u = 0; u < 2; u++) {
                __m512i p[2][2];
                for (int s = 0; s < 2; s++) {
                    const int l = 4 * t + 2 * u + s;
                    if (l >= np) {
                        p[s][0] = p[s][1] = _mm512_setzero_si512();
                        continue;
                    }
                    const struct iq4_act *a = &ad[l % nr];
                    if (nr == 1) {
                        const struct iq4_xs_block *x =
                            (const struct iq4_xs_block *)((const char *)x0 + l * w_stride);
                        if (nw == 1) {
                            _mm_prefetch((const char *)x + 2 * KQ_PREFETCH, _MM_HINT_T0);
                            _mm_prefetch((const char *)x + 2 * KQ_PREFETCH + 64, _MM_HINT_T0);
                        }
                        iq4xs_wts(x, &wfly);
                    }
                    const struct iq4_wts *wt = IQ4_W(l);
                    for (int h = 0; h < 2; h++)
                        p[s][h] = _mm512_dpbusd_epi32(
                            _mm512_dpbusd_epi32(a->negc[h], wt->lo[h], a->lo[h]), wt->hi[h],
                            a->hi[h]);
                }
                for (int h = 0; h < 2; h++)
                    c[h][u] = iq4_fold(p[0][h], p[1][h], i1a, i1b);
            }
            for (int h = 0; h < 2; h++)
                d[h][t] = iq4_fold(c[h][0], c[h][1], i2a, i2b);
        }
        /* scales: d and scales_h (bytes 0..3), scales_l (bytes 4..7) of each lane's block */
        const __m512i sh = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), used, vwoff, x0, 1);
        const __m512i sl =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), used, vwoff, x0->scales_l, 1);
        const __m512 da = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), used, vaoff, &y0->d, 1);
        const __m512 d4d8 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(sh)), da);
        for (int h = 0; h < 2; h++) {
            const __m512i e0 = _mm512_shuffle_i64x2(d[h][0], d[h][1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e1 = _mm512_shuffle_i64x2(d[h][0], d[h][1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i e2 = _mm512_shuffle_i64x2(d[h][2], d[h][3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e3 = _mm512_shuffle_i64x2(d[h][2], d[h][3], _MM_SHUFFLE(3, 2, 3, 2));
            __m512i sums[4];
            sums[0] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
            sums[1] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
            sums[2] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
            sums[3] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
            for (int k4 = 0; k4 < 4; k4++) {
                const int k = 4 * h + k4;
                /* ls = scales_l nibble k | scales_h bits 2k, 2k + 1 as bits 4, 5 */
                const __m512i ls = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi32(sl, 4 * k), _mm512_set1_epi32(0x0f)),
                    _mm512_and_si512(_mm512_srli_epi32(sh, 12 + 2 * k), _mm512_set1_epi32(0x30)));
                const __m512 dl = _mm512_mul_ps(
                    d4d8, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
                sumf = _mm512_add_ps(sumf, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(sums[k4])));
            }
        }
    }
    float res[IQ4_LANES];
    _mm512_storeu_ps(res, sumf);
    for (int l = 0; l < np; l++)
        out[(l % nr) * out_stride + l / nr] = res[l];
}

/* Lanes hold byte offsets of weight and activation rows as int32. */
#define IQ4_MAX_STRIDE ((size_t)INT32_MAX / IQ4_LANES)

void iq4xs_mul_rows_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *a, size_t a_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    const char *wb = w, *ab = a;
    int64_t i = 0;
    if (n_act == 1 && w_stride <= IQ4_MAX_STRIDE) {
        for (; i + 16 <= n_w; i += 16)
            iq4xs_tile(n, wb + i * w_stride, w_stride, 16, a, 0, 1, out + i, 0);
        if (i + 8 <= n_w) {
            iq4xs_tile(n, wb + i * w_stride, w_stride, 8, a, 0, 1, out + i, 0);
            i += 8;
        }
        if (i + 4 <= n_w) {
            iq4xs_tile(n, wb + i * w_stride, w_stride, 4, a, 0, 1, out + i, 0);
            i += 4;
        }
    }
    if (n_act == 1) {
        for (; i < n_w; i++)
            iq4xs_tile(n, wb + i * w_stride, 0, 1, a, 0, 1, out + i, 0);
        return;
    }
    /* several activation rows: two weight rows by up to eight activation rows */
    const int two = w_stride <= IQ4_MAX_STRIDE && a_stride <= IQ4_MAX_STRIDE;
    for (int64_t j = 0; j < n_act; j += KQ_MAX_NR) {
        const int nr = n_act - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(n_act - j);
        const char *aj = ab + j * a_stride;
        float *oj = out + j * out_stride;
        for (i = 0; i < n_w; i += 2) {
            const char *wr = wb + i * w_stride;
            if (two && i + 1 < n_w) {
                switch (nr) {
                case 1:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 1, oj + i, out_stride);
                    break;
                case 2:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 2, oj + i, out_stride);
                    break;
                case 3:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 3, oj + i, out_stride);
                    break;
                case 4:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 4, oj + i, out_stride);
                    break;
                case 5:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 5, oj + i, out_stride);
                    break;
                case 6:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 6, oj + i, out_stride);
                    break;
                case 7:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 7, oj + i, out_stride);
                    break;
                default:
                    iq4xs_tile(n, wr, w_stride, 2, aj, a_stride, 8, oj + i, out_stride);
                    break;
                }
            } else {
                for (int r = 0; r < nr; r++)
                    iq4xs_tile(n, wr, 0, 1, aj + r * a_stride, 0, 1, oj + r * out_stride + i, 0);
                i--; /* one weight row done */
            }
        }
    }
}

void iq4xs_dot_q8k_avx512(int64_t n, float *s, const void *w_row, const void *act_row)
{
    iq4xs_tile(n, w_row, 0, 1, act_row, 0, 1, s, 0);
}

/* IQ4_NL: eight blocks at a time; a shorter tail pads with zero sums it never adds. */
static inline void iq4nl_blocks512(const struct iq4_nl_block *x, int nblk,
                                   const struct q8_0_block *const y[], int nr, float sumf[])
{
    struct iq4_dec512 dec;
    float xd[8];
    for (int m = 0; m < 4; m++) {
        int k0 = 2 * m < nblk ? 2 * m : 0, k1 = 2 * m + 1 < nblk ? 2 * m + 1 : k0;
        iq4_decode64(&dec, m, x[k0].qs, x[k1].qs);
    }
    for (int k = 0; k < nblk; k++)
        xd[k] = _cvtsh_ss(x[k].d);
    for (int r = 0; r < nr; r++) {
        __m512i act[4];
        int32_t sums[8];
        for (int m = 0; m < 4; m++) {
            int k0 = 2 * m < nblk ? 2 * m : 0, k1 = 2 * m + 1 < nblk ? 2 * m + 1 : k0;
            act[m] = iq4_load_pair(y[r][k0].qs, y[r][k1].qs);
        }
        iq4_sums512(&dec, act, sums);
        float s = sumf[r];
        for (int k = 0; k < nblk; k++)
            s += _cvtsh_ss(y[r][k].d) * xd[k] * (float)sums[k];
        sumf[r] = s;
    }
}

void iq4nl_mul_rows_q80_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *a, size_t a_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / KQ_QK4_NL;
    for (int64_t i = 0; i < n_w; i++) {
        const struct iq4_nl_block *wr =
            (const struct iq4_nl_block *)((const uint8_t *)w + (size_t)i * w_stride);
        for (int64_t j0 = 0; j0 < n_act; j0 += 8) {
            const int nr = n_act - j0 < 8 ? (int)(n_act - j0) : 8;
            float sumf[8] = {0};
            const struct q8_0_block *y[8];
            for (int r = 0; r < nr; r++)
                y[r] =
                    (const struct q8_0_block *)((const uint8_t *)a + (size_t)(j0 + r) * a_stride);
            for (int64_t b = 0; b < nb;) {
                int nblk = nb - b >= 8 ? 8 : (int)(nb - b);
                iq4nl_blocks512(wr + b, nblk, y, nr, sumf);
                for (int r = 0; r < nr; r++)
                    y[r] += nblk;
                b += nblk;
            }
            for (int r = 0; r < nr; r++)
                out[(size_t)(j0 + r) * out_stride + (size_t)i] = sumf[r];
        }
    }
}

void iq4nl_dot_q80_avx512(int64_t n, float *s, const void *w_row, const void *act_row)
{
    iq4nl_mul_rows_q80_avx512(n, w_row, 0, 1, act_row, 0, 1, s, 1);
}
