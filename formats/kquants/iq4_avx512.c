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

KQ_INLINE void iq4xs_act(const struct splash_q8_k_block *y, struct iq4_act *o)
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

/* The IQ4_NL levels + 128 (unsigned bytes) at every index whose low four bits are the
 * code, so vpermb looks codes up without masking off the bits above them. */
KQ_INLINE __m512i iq4_lut64(void)
{
    return _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values)),
        _mm512_set1_epi8((char)0x80));
}

/* vpermb reads bits 0..5 of each index byte: the low nibble as is, and after a 16-bit
 * shift by 4 the high nibble (bits 4, 5 then hold the next byte's bits, which the
 * repeated table ignores). */
KQ_INLINE void iq4xs_wts(const struct iq4_xs_block *x, __m512i lut, struct iq4_wts *o)
{
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512(x->qs + 64 * h);
        o->lo[h] = _mm512_permutexvar_epi8(v, lut);
        o->hi[h] = _mm512_permutexvar_epi8(_mm512_srli_epi32(v, 4), lut);
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
    const int64_t nb = n / SPLASH_QK_K;
    const int np = nw * nr; /* pairs in use; lane l is (weight l / nr, activation l % nr) */
    const __mmask16 used = (__mmask16)((1u << np) - 1);
    int32_t woff[IQ4_LANES], aoff[IQ4_LANES];
    for (int l = 0; l < IQ4_LANES; l++) {
        woff[l] = l < np ? (int32_t)((size_t)(l / nr) * w_stride) : 0;
        aoff[l] = l < np ? (int32_t)((size_t)(l % nr) * act_stride) : 0;
    }
    const __m512i vaoff = _mm512_loadu_si512(aoff);
    /* each lane's 8-byte block header (d, scales_h, scales_l) is gathered as a qword */
    const __m256i woff_lo = _mm256_loadu_si256((const __m256i *)woff);
    const __m256i woff_hi = _mm256_loadu_si256((const __m256i *)(woff + 8));
    const __mmask8 used_lo = (__mmask8)used, used_hi = (__mmask8)(used >> 8);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lut = iq4_lut64();
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
        const struct splash_q8_k_block *y0 = (const struct splash_q8_k_block *)act + i;
        struct iq4_act ad[KQ_MAX_NR];
        struct iq4_wts wd[IQ4_LANES], wfly;
        KQ_UNROLL for (int r = 0; r < nr; r++)
            iq4xs_act((const struct splash_q8_k_block *)((const char *)y0 + r * act_stride),
                      &ad[r]);
        if (nr == 1 && nw > 1)
            kq_prefetch_next_tile(w, w_stride, nw, i, sizeof(struct iq4_xs_block));
        if (nr > 1) {
            for (int wi = 0; wi < nw; wi++)
                iq4xs_wts((const struct iq4_xs_block *)((const char *)x0 + wi * w_stride), lut,
                          &wd[wi]);
        }
        /* per half h: D[h][t] holds, for lanes 4t..4t+3, the sums of sub-blocks 4h..4h+3 */
        __m512i d[2][4];
        KQ_UNROLL for (int t = 0; t < 4; t++) {
            __m512i c[2][2];
            KQ_UNROLL for (int u = 0; u < 2; u++) {
                __m512i p[2][2];
                KQ_UNROLL for (int s = 0; s < 2; s++) {
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
                        iq4xs_wts(x, lut, &wfly);
                    }
                    const struct iq4_wts *wt = IQ4_W(l);
                    KQ_UNROLL for (int h = 0; h < 2; h++)
                        p[s][h] = _mm512_dpbusd_epi32(
                            _mm512_dpbusd_epi32(a->negc[h], wt->lo[h], a->lo[h]), wt->hi[h],
                            a->hi[h]);
                }
                KQ_UNROLL for (int h = 0; h < 2; h++)
                    c[h][u] = iq4_fold(p[0][h], p[1][h], i1a, i1b);
            }
            KQ_UNROLL for (int h = 0; h < 2; h++)
                d[h][t] = iq4_fold(c[h][0], c[h][1], i2a, i2b);
        }
        /* scales: d and scales_h (sh), scales_l (sl) of each lane's block */
        const __m512i q0 = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), used_lo, woff_lo, x0, 1);
        const __m512i q1 = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), used_hi, woff_hi, x0, 1);
        const __m512i sh = _mm512_permutex2var_epi32(q0, even, q1);
        const __m512i sl = _mm512_permutex2var_epi32(q0, odd, q1);
        const __m512 da = nr == 1 ? _mm512_set1_ps(y0->d)
                                  : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), used, vaoff, &y0->d, 1);
        const __m512 d4d8 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(sh)), da);
        KQ_UNROLL for (int h = 0; h < 2; h++) {
            const __m512i e0 = _mm512_shuffle_i64x2(d[h][0], d[h][1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e1 = _mm512_shuffle_i64x2(d[h][0], d[h][1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i e2 = _mm512_shuffle_i64x2(d[h][2], d[h][3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e3 = _mm512_shuffle_i64x2(d[h][2], d[h][3], _MM_SHUFFLE(3, 2, 3, 2));
            __m512i sums[4];
            sums[0] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
            sums[1] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
            sums[2] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
            sums[3] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
            KQ_UNROLL for (int k4 = 0; k4 < 4; k4++) {
                const int k = 4 * h + k4;
                /* ls = scales_l nibble k | scales_h bits 2k, 2k + 1 as bits 4, 5 */
                const __m512i ls = _mm512_and_si512(
                    _mm512_ternarylogic_epi32(_mm512_srli_epi32(sl, 4 * k),
                                              _mm512_srli_epi32(sh, 12 + 2 * k),
                                              _mm512_set1_epi32(0x0f), 0xe4),
                    _mm512_set1_epi32(0x3f));
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

/* ---- IQ4_XS mat-vec: one activation row, lanes = 16 weight rows ---------------------
 *
 * The same lanes-as-pairs float steps, with the integer side cut to what a single
 * activation row needs: groups of four rows reduce their 4-lane sub-block sums with
 * two unpack-and-add levels (no index vectors, no register copies), and a 128-bit
 * transpose leaves one vector per sub-block with lanes = rows. */

/* Half h of rows 4g..4g+3 at x (stride w_stride): 128-bit lane k of the result holds
 * the sums of sub-block 4h + k of the four rows, row t in dword t. */
KQ_INLINE __m512i iq4xs_mv_group(const char *x, size_t w_stride, const int h,
                                 const struct iq4_act *a, __m512i lut)
{
    __m512i p[4];
    KQ_UNROLL for (int t = 0; t < 4; t++) {
        const struct iq4_xs_block *b = (const struct iq4_xs_block *)(x + t * w_stride);
        const __m512i v = _mm512_loadu_si512(b->qs + 64 * h);
        const __m512i lo = _mm512_permutexvar_epi8(v, lut);
        /* (a variable shift: GCC spills v to fold an immediate shift's load) */
        const __m512i hi = _mm512_permutexvar_epi8(_mm512_srlv_epi32(v, _mm512_set1_epi32(4)), lut);
        p[t] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a->negc[h], lo, a->lo[h]), hi, a->hi[h]);
    }
    /* per 128-bit lane: [r0 q0+q2, r1 q0+q2, r0 q1+q3, r1 q1+q3], likewise r2, r3 */
    const __m512i s01 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    const __m512i s23 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* Sub-scales minus 32 of each lane's block as signed bytes: byte j of even[] is that of
 * sub-block 2j, of odd[] sub-block 2j + 1. sh holds d and scales_h, sl scales_l. */
KQ_INLINE void iq4xs_mv_scales(__m512i sh, __m512i sl, __m512i *even, __m512i *odd)
{
    /* scales_h bytes b0, b1 to [b0, b0, b1, b1], nibble j of scales_h then in byte j's
     * bits 4..7: (b << 4) in bytes 0, 2, b in bytes 1, 3 */
    const __m512i dup = _mm512_set4_epi32(0x0f0f0e0e, 0x0b0b0a0a, 0x07070606, 0x03030202);
    const __m512i t = _mm512_shuffle_epi8(sh, dup);
    const __m512i hn = _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, _mm512_slli_epi16(t, 4), t);
    const __m512i m0f = _mm512_set1_epi8(0x0f), k32 = _mm512_set1_epi8(32);
    /* bits 4, 5 from hn (then hn >> 2), bits 0..3 from sl (then sl >> 4) */
    const __m512i he = _mm512_and_si512(hn, _mm512_set1_epi8(0x30));
    const __m512i ho = _mm512_and_si512(_mm512_srli_epi32(hn, 2), _mm512_set1_epi8(0x30));
    *even = _mm512_sub_epi8(_mm512_ternarylogic_epi32(sl, he, m0f, 0xe4), k32);
    *odd = _mm512_sub_epi8(_mm512_ternarylogic_epi32(_mm512_srli_epi32(sl, 4), ho, m0f, 0xe4), k32);
}

/* Signed byte j of each lane of v as int32. */
KQ_INLINE __m512i iq4_byte_i32(__m512i v, const int j)
{
    return _mm512_srai_epi32(j == 3 ? v : _mm512_slli_epi32(v, 24 - 8 * j), 24);
}

/* 4 ng weight rows (ng = 1, 2, 4) against nb blocks of one activation row, acts its
 * blocks regrouped; each lane's running sum starts at 0 (first) or at its out value. */
KQ_INLINE void iq4xs_mv_tile(int64_t nb, const void *w, size_t w_stride, const int ng,
                             const struct splash_q8_k_block *act, const struct iq4_act *acts,
                             float *out, int first)
{
    const int nw = 4 * ng;
    const __mmask16 used = (__mmask16)((1u << nw) - 1);
    int32_t woff[IQ4_LANES];
    for (int l = 0; l < IQ4_LANES; l++)
        woff[l] = l < nw ? (int32_t)((size_t)l * w_stride) : 0;
    const __m256i woff_lo = _mm256_loadu_si256((const __m256i *)woff);
    const __m256i woff_hi = _mm256_loadu_si256((const __m256i *)(woff + 8));
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lut = iq4_lut64();
    __m512 sumf = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(used, out);
    for (int64_t i = 0; i < nb; i++) {
        const char *x0 = (const char *)((const struct iq4_xs_block *)w + i);
        const struct splash_q8_k_block *y = act + i;
        const struct iq4_act *a = &acts[i];
        if (ng > 1)
            kq_prefetch_next_tile(w, w_stride, nw, i, sizeof(struct iq4_xs_block));
        else {
            _mm_prefetch(x0 + KQ_PREFETCH, _MM_HINT_T0);
            _mm_prefetch(x0 + KQ_PREFETCH + 64, _MM_HINT_T0);
        }
        /* d, scales_h (sh) and scales_l (sl) of each row's block */
        const __m512i q0 = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), (__mmask8)used,
                                                       woff_lo, x0, 1);
        const __m512i q1 = ng > 2 ? _mm512_i32gather_epi64(woff_hi, x0, 1) : _mm512_setzero_si512();
        const __m512i sh = _mm512_permutex2var_epi32(q0, even, q1);
        const __m512i sl = _mm512_permutex2var_epi32(q0, odd, q1);
        const __m512 d4d8 =
            _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(sh)), _mm512_set1_ps(y->d));
        __m512i ls[2];
        iq4xs_mv_scales(sh, sl, &ls[0], &ls[1]);
        KQ_UNROLL for (int h = 0; h < 2; h++) {
            __m512i d[4];
            KQ_UNROLL for (int g = 0; g < 4; g++)
                d[g] = g < ng ? iq4xs_mv_group(x0 + 4 * g * w_stride, w_stride, h, a, lut)
                              : _mm512_setzero_si512();
            /* sums[k] = sub-block 4h + k of every row, lanes = rows */
            const __m512i e0 = _mm512_shuffle_i64x2(d[0], d[1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e1 = _mm512_shuffle_i64x2(d[0], d[1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i e2 = _mm512_shuffle_i64x2(d[2], d[3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i e3 = _mm512_shuffle_i64x2(d[2], d[3], _MM_SHUFFLE(3, 2, 3, 2));
            __m512i sums[4];
            sums[0] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
            sums[1] = _mm512_shuffle_i64x2(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
            sums[2] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
            sums[3] = _mm512_shuffle_i64x2(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
            KQ_UNROLL for (int k4 = 0; k4 < 4; k4++) {
                const int k = 4 * h + k4;
                const __m512 dl =
                    _mm512_mul_ps(d4d8, _mm512_cvtepi32_ps(iq4_byte_i32(ls[k % 2], k / 2)));
                sumf = _mm512_add_ps(sumf, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(sums[k4])));
            }
        }
    }
    _mm512_mask_storeu_ps(out, used, sumf);
}


/* Lanes hold byte offsets of weight and activation rows as int32. */
#define IQ4_MAX_STRIDE ((size_t)INT32_MAX / IQ4_LANES)

/* Activation blocks a mat-vec regroups at once (on the stack: 384 bytes each); longer
 * rows go in column chunks, each lane's running sum carried through out. */
#define IQ4_MV_CHUNK 64

/* Weight rows i0 .. n_w - 1 (tiles of 16, 8, 4) against one activation row. */
static int64_t iq4xs_mat_vec(int64_t n, const char *w, size_t w_stride, int64_t n_w,
                             const struct splash_q8_k_block *y, float *out)
{
    struct iq4_act acts[IQ4_MV_CHUNK];
    const int64_t nb = n / SPLASH_QK_K;
    int64_t i = 0;
    for (int64_t c = 0; c < nb; c += IQ4_MV_CHUNK) {
        const int64_t nc = nb - c < IQ4_MV_CHUNK ? nb - c : IQ4_MV_CHUNK;
        const char *wc = w + c * (int64_t)sizeof(struct iq4_xs_block);
        for (int64_t b = 0; b < nc; b++)
            iq4xs_act(y + c + b, &acts[b]);
        for (i = 0; i + 16 <= n_w; i += 16)
            iq4xs_mv_tile(nc, wc + i * w_stride, w_stride, 4, y + c, acts, out + i, c == 0);
        if (i + 8 <= n_w) {
            iq4xs_mv_tile(nc, wc + i * w_stride, w_stride, 2, y + c, acts, out + i, c == 0);
            i += 8;
        }
        if (i + 4 <= n_w) {
            iq4xs_mv_tile(nc, wc + i * w_stride, w_stride, 1, y + c, acts, out + i, c == 0);
            i += 4;
        }
    }
    return i;
}

void iq4xs_mul_rows_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                               const void *a, size_t a_stride, int64_t n_act, float *out,
                               size_t out_stride)
{
    const char *wb = w, *ab = a;
    int64_t i = 0;
    if (n_act == 1 && w_stride <= IQ4_MAX_STRIDE && n_w >= 4)
        i = iq4xs_mat_vec(n, wb, w_stride, n_w, a, out);
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
                                   const struct splash_q8_0_block *const y[], int nr, float sumf[])
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
            const struct splash_q8_0_block *y[8];
            for (int r = 0; r < nr; r++)
                y[r] = (const struct splash_q8_0_block *)((const uint8_t *)a +
                                                          (size_t)(j0 + r) * a_stride);
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
