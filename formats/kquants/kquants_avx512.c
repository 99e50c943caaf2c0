/* AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K against Q8_K activations.
 *
 * Weights are unpacked to unsigned bytes once per super-block and kept in
 * registers while up to KQ_MAX_NR activation rows pass over them. Q5_K: per 64
 * values one maddubs (u8 x s8 -> pairs of int16) and one dpwssd against the
 * sub-block scales (int16 pairs -> int32). Q4_K and Q6_K: per 64 values one dpbusd
 * (sums of 4 products -> int32, small enough for int16), then per 128 values one
 * pack to int16 and one dpwssd against the scales. The int32 super-block sum is
 * exact; it is scaled by d_w * d_a in float once per super-block.
 *
 * A mat-vec (one activation row) runs KQ_TILE_NW weight rows at a time and is
 * bound by memory: the Q4_K and Q6_K tiles prefetch into L2 the next tile's bytes
 * as they go (kq_prefetch_next_tile), which the hardware prefetchers alone do not
 * keep far enough ahead of four interleaved row streams. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"

/* 32 int16 lanes: lanes 0..15 = s16[a], 16..31 = s16[b]. */
static inline __m512i kq_idx_pair(int a, int b)
{
    return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)a),
                                   _mm512_set1_epi16((short)b));
}

/* Scales (lanes 0..7) and mins (8..15) of a Q4_K/Q5_K block as int16. */
KQ_INLINE __m512i kq_k4_scales16(const uint8_t *packed)
{
    uint8_t sm[16];
    kq_k4_unpack(packed, sm);
    return _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)sm)));
}

/* Weight rows per register tile of the multi-activation-row (mat-mat) pass. */
#ifndef KQ_MM_NW
#define KQ_MM_NW 2
#endif

/* vec_dot and mul_rows from a mat-vec tile `tile` (as KQ_DEFINE_TILED_DOT_AND_MUL)
 * and a mat-mat tile `mm` taking KQ_MM_NW (or 1) weight rows and up to KQ_MAX_NR
 * activation rows; both give every pair the same operations. The mat-mat pass
 * regroups each activation tile once (act_at, into act_t on the stack, for rows of
 * up to KQ_MM_MAX_NB super-blocks) and runs every weight tile over it. */
#define KQ_MM_CASE(mm, NW, NR)                                                                     \
    case NR:                                                                                       \
        mm(n, wr, w_stride, NW, a, a_stride, NR, o, out_stride, pre);                              \
        break;
#define KQ_MM_SWITCH(mm, NW, nr)                                                                   \
    switch (nr) {                                                                                  \
        KQ_MM_CASE(mm, NW, 1)                                                                      \
        KQ_MM_CASE(mm, NW, 2)                                                                      \
        KQ_MM_CASE(mm, NW, 3)                                                                      \
        KQ_MM_CASE(mm, NW, 4)                                                                      \
        KQ_MM_CASE(mm, NW, 5)                                                                      \
        KQ_MM_CASE(mm, NW, 6)                                                                      \
        KQ_MM_CASE(mm, NW, 7)                                                                      \
    default:                                                                                       \
        mm(n, wr, w_stride, NW, a, a_stride, 8, o, out_stride, pre);                               \
        break;                                                                                     \
    }
/* Super-blocks per row up to which an activation tile is regrouped once per call
 * (on the stack) rather than once per weight tile. */
#define KQ_MM_MAX_NB 16
#define KQ_DEFINE_MM_DOT_AND_MUL(dot_fn, mul_fn, tile, mm, act_t, act_at)                          \
    void dot_fn(int64_t n, float *s, const void *w_row, const void *act_row)                       \
    {                                                                                              \
        tile(n, w_row, 0, 1, act_row, 0, 1, s, 0);                                                 \
    }                                                                                              \
    void mul_fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,           \
                size_t act_stride, int64_t n_act, float *out, size_t out_stride)                   \
    {                                                                                              \
        const char *wb = w;                                                                        \
        if (n_act == 1) {                                                                          \
            int64_t i = 0;                                                                         \
            for (; i + KQ_TILE_NW <= n_w; i += KQ_TILE_NW)                                         \
                tile(n, wb + i * w_stride, w_stride, KQ_TILE_NW, act, 0, 1, out + i, 0);           \
            for (; i < n_w; i++)                                                                   \
                tile(n, wb + i * w_stride, w_stride, 1, act, 0, 1, out + i, 0);                    \
            return;                                                                                \
        }                                                                                          \
        const int64_t nb = n / SPLASH_QK_K;                                                        \
        act_t buf[nb <= KQ_MM_MAX_NB && n_w > KQ_MM_NW ? KQ_MAX_NR * nb : 1];                      \
        for (int64_t j = 0; j < n_act; j += KQ_MAX_NR) {                                           \
            const int nr = n_act - j >= KQ_MAX_NR ? KQ_MAX_NR : (int)(n_act - j);                  \
            const void *a = (const char *)act + j * act_stride;                                    \
            size_t a_stride = act_stride;                                                          \
            const int pre = nb <= KQ_MM_MAX_NB && n_w > KQ_MM_NW;                                  \
            if (pre) {                                                                             \
                for (int r = 0; r < nr; r++)                                                       \
                    for (int64_t i = 0; i < nb; i++)                                               \
                        act_at(a, r *act_stride, i, &buf[r * nb + i]);                             \
                a = buf;                                                                           \
            }                                                                                      \
            for (int64_t i = 0; i < n_w; i += KQ_MM_NW) {                                          \
                const char *wr = wb + i * w_stride;                                                \
                float *o = out + j * out_stride + i;                                               \
                if (i + KQ_MM_NW <= n_w) {                                                         \
                    KQ_MM_SWITCH(mm, KQ_MM_NW, nr)                                                 \
                } else {                                                                           \
                    for (int64_t k = i; k < n_w; k++, wr += w_stride, o++)                         \
                        KQ_MM_SWITCH(mm, 1, nr)                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* ---- Q4_K ------------------------------------------------------------------ */

/* Q4_K tiles pair the activations with the weights' nibble layout instead of
 * reordering the weights: the low nibbles of qs[0..63] are values 0..31 and 64..95,
 * so the activation register for them is [a0..31 | a64..95], loaded once and shared
 * by every weight row of the tile. vpdpbusd sums 4 products per int32 lane (at most
 * 7680 in size), two packs to int16 and two vpmaddwd against the sub-block scales
 * give 16 int32 lanes; adjacent lanes are folded into the even ones and the odd ones
 * take the mins' 8 products with the (negated) activation sums, so one FMA with
 * [d, dmin, d, dmin, ...] * d_a adds the super-block. A tile's rows unpack their
 * scales and convert d, dmin together, a row's first 16 bytes per 128-bit lane; the
 * scales are spread by vpermb. */

/* One Q4_K super-block of one weight row, decoded for the tile. */
struct kq_q4k_dec {
    __m512i w[4];  /* nibbles: lo(qs 0..63), hi(qs 0..63), lo(qs 64..127), hi(qs 64..127) */
    __m512i sc[2]; /* int16 scales matching the packs of (w[0], w[1]) and (w[2], w[3]) */
    __m512i mins;  /* int16 m_j at lanes 4j + 2, 4j + 3 */
};

/* The 6-bit fields of up to 4 blocks, whose first 16 bytes (d, dmin, the 12 scale
 * bytes) are the 128-bit lanes of `head`, as bytes [sc0..3 | m0..3 | sc4..7 | m4..7]
 * of each lane: the scale words u0, u1 hold sc0..3 and m0..3 in their low 6 bits and
 * the top 2 bits of sc4..7, m4..7; u2 holds the low 4 bits of sc4..7 (low nibbles)
 * and m4..7 (high nibbles). */
KQ_INLINE __m512i kq_q4k_unpack_scales(__m512i head)
{
    const __m512i v01 = _mm512_shuffle_epi32(head, _MM_PERM_CBCB); /* u0 u1 u0 u1 */
    const __m512i v2 = _mm512_shuffle_epi32(head, _MM_PERM_DDDD);  /* u2 x 4 */
    const __m512i lo6 = _mm512_mask_blend_epi32(0xCCCC, v01, _mm512_srli_epi32(v01, 2));
    /* (a & 0x3f / 0x30) | (b & 0x0f) per the masks' lanes */
    return _mm512_ternarylogic_epi32(
        _mm512_and_si512(lo6, _mm512_broadcast_i32x4(
                                  _mm_set_epi32(0x30303030, 0x30303030, 0x3f3f3f3f, 0x3f3f3f3f))),
        _mm512_srlv_epi32(v2, _mm512_broadcast_i32x4(_mm_set_epi32(4, 0, 0, 0))),
        _mm512_broadcast_i32x4(_mm_set_epi32(0x0f0f0f0f, 0x0f0f0f0f, 0, 0)), 0xF8);
}

/* Decodes a block whose unpacked scales are the low 16 bytes of s8. */
KQ_INLINE void kq_q4k_decode_with(const struct q4_k_block *x, __m512i s8, struct kq_q4k_dec *o)
{
    /* int16 lane 8k + m of the pack of (w[0], w[1]) holds 4 values of sub-block
     * 2 (k / 2) + (m >= 4); sc_j is byte j (j < 4) or j + 4, m_j byte j + 4 or j + 8 */
    const __m512i idx01 = _mm512_set_epi16(3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1,
                                           1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
    const __mmask64 even = 0x5555555555555555ull;
    o->sc[0] = _mm512_maskz_permutexvar_epi8(even, idx01, s8);
    o->sc[1] =
        _mm512_maskz_permutexvar_epi8(even, _mm512_add_epi16(idx01, _mm512_set1_epi16(8)), s8);
    o->mins = _mm512_maskz_permutexvar_epi8(even,
                                            _mm512_set_epi16(15, 15, 0, 0, 14, 14, 0, 0, 13, 13, 0,
                                                             0, 12, 12, 0, 0, 7, 7, 0, 0, 6, 6, 0,
                                                             0, 5, 5, 0, 0, 4, 4, 0, 0),
                                            s8);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v0 = _mm512_loadu_si512(x->qs), v1 = _mm512_loadu_si512(x->qs + 64);
    o->w[0] = _mm512_and_si512(v0, m4);
    o->w[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
    o->w[2] = _mm512_and_si512(v1, m4);
    o->w[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
}

KQ_INLINE void kq_q4k_decode(const struct q4_k_block *x, struct kq_q4k_dec *o)
{
    kq_q4k_decode_with(
        x, kq_q4k_unpack_scales(_mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)x))), o);
}

/* [d, dmin] repeated, as floats */
KQ_INLINE __m512 kq_q4k_dm(const struct q4_k_block *x)
{
    return _mm512_cvtph_ps(_mm256_broadcastd_epi32(_mm_loadu_si32(x)));
}

/* 64 activations: 32 at p and 32 at p + 64 (two broadcast loads and a blend). */
KQ_INLINE __m512i kq_act_split(const int8_t *p)
{
    return _mm512_mask_broadcast_i64x4(
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)), 0xF0,
        _mm256_loadu_si256((const __m256i *)(p + 64)));
}

/* One Q8_K super-block regrouped for kq_q4k_step. */
struct kq_q4k_act {
    __m512i a[4]; /* [a0..31 | a64..95], [a32..63 | a96..127], then + 128 */
    __m512i bs;   /* minus pair j of the 16-value sums at int16 lanes 4j + 2, 4j + 3 */
    __m512 d;
};

KQ_INLINE void kq_q4k_act_at(const void *act, size_t off, int64_t i, struct kq_q4k_act *o)
{
    const struct splash_q8_k_block *y =
        (const struct splash_q8_k_block *)((const char *)act + off) + i;
    o->a[0] = kq_act_split(y->qs);
    o->a[1] = kq_act_split(y->qs + 32);
    o->a[2] = kq_act_split(y->qs + 128);
    o->a[3] = kq_act_split(y->qs + 160);
    o->bs = _mm512_sub_epi16(
        _mm512_setzero_si512(),
        _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)y->bsums)),
                          32));
    o->d = _mm512_set1_ps(y->d);
}

/* acc + one super-block's dot of a decoded weight row and an activation row; dm is
 * [d, dmin] * d_a repeated. */
KQ_INLINE __m512 kq_q4k_step(const struct kq_q4k_dec *d, const struct kq_q4k_act *a, __m512 dm,
                             __m512 acc)
{
    __m512i p[4];
    KQ_UNROLL for (int q = 0; q < 4; q++) p[q] =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), d->w[q], a->a[q]);
    const __m512i s =
        _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), d->sc[0]),
                            _mm512_packs_epi32(p[2], p[3]), d->sc[1]);
    /* even lanes: s[2t] + s[2t + 1]; odd lanes: -m_t * (sums of sub-block t) */
    const __m512i z = _mm512_dpwssd_epi32(
        _mm512_maskz_add_epi32(0x5555, s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB)), a->bs, d->mins);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), dm, acc);
}

KQ_INLINE void q4k_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                               const void *act, size_t act_stride, const int nr, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    __m512 acc[KQ_TILE_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    /* one activation row: its registers stay while each weight row is decoded and used
     * in turn; several: the one weight row stays while the activation rows pass */
    for (int64_t i = 0; i < nb; i++) {
        struct kq_q4k_act av;
        struct kq_q4k_dec dec;
        if (nw == 1) {
            const struct q4_k_block *x = (const struct q4_k_block *)w + i;
            kq_q4k_decode(x, &dec);
            const __m512 dm = kq_q4k_dm(x);
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                kq_q4k_act_at(act, r * act_stride, i, &av);
                acc[0][r] = kq_q4k_step(&dec, &av, _mm512_mul_ps(dm, av.d), acc[0][r]);
            }
        } else {
            kq_prefetch_next_tile(w, w_stride, nw, i, sizeof(struct q4_k_block));
            kq_q4k_act_at(act, 0, i, &av);
            /* the rows' first 16 bytes, one row per 128-bit lane: scales unpacked and
             * [d, dmin] * d_a converted for all rows at once, the latter read back
             * through memory as one broadcast load per row */
            const struct q4_k_block *x[KQ_TILE_NW];
            __m512i head = _mm512_setzero_si512();
            KQ_UNROLL for (int wi = 0; wi < nw; wi++)
            {
                x[wi] = (const struct q4_k_block *)((const char *)w + wi * w_stride) + i;
                head = _mm512_inserti32x4(head, _mm_loadu_si128((const __m128i *)x[wi]), wi);
            }
            const __m512i sm = kq_q4k_unpack_scales(head);
            _Static_assert(KQ_TILE_NW <= 4, "a Q4_K tile's rows fill one zmm's 128-bit lanes");
            double dm[4]; /* the float pairs */
            const __m512i lane0s =
                _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
            _mm256_storeu_pd(
                dm, _mm256_castps_pd(_mm256_mul_ps(_mm256_cvtph_ps(_mm512_castsi512_si128(
                                                       _mm512_permutexvar_epi32(lane0s, head))),
                                                   _mm512_castps512_ps256(av.d))));
            KQ_UNROLL for (int wi = 0; wi < nw; wi++)
            {
                kq_q4k_decode_with(x[wi], wi ? _mm512_shuffle_i32x4(sm, sm, 0x55 * wi) : sm, &dec);
                acc[wi][0] =
                    kq_q4k_step(&dec, &av, _mm512_castpd_ps(_mm512_set1_pd(dm[wi])), acc[wi][0]);
            }
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

/* Several activation rows: KQ_MM_NW weight rows are decoded once per super-block and
 * kept while each activation row is regrouped once and passes over all of them, so a
 * decode serves nr activation rows and an activation block serves nw weight rows.
 * Each pair's operations are those of q4k_tile_avx512 (bit for bit its vec_dot). */
KQ_INLINE void q4k_mm_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                                  const void *act, size_t act_stride, const int nr, float *out,
                                  size_t out_stride, const int pre)
{
    const int64_t nb = n / SPLASH_QK_K;
    __m512 acc[KQ_MM_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        struct kq_q4k_dec dec[KQ_MM_NW];
        __m512 dm[KQ_MM_NW];
        KQ_UNROLL for (int wi = 0; wi < nw; wi++)
        {
            const struct q4_k_block *x =
                (const struct q4_k_block *)((const char *)w + wi * w_stride) + i;
            kq_q4k_decode(x, &dec[wi]);
            dm[wi] = kq_q4k_dm(x);
        }
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            struct kq_q4k_act av;
            if (pre)
                av = ((const struct kq_q4k_act *)act)[r * nb + i];
            else
                kq_q4k_act_at(act, r * act_stride, i, &av);
            KQ_UNROLL for (int wi = 0; wi < nw; wi++) acc[wi][r] =
                kq_q4k_step(&dec[wi], &av, _mm512_mul_ps(dm[wi], av.d), acc[wi][r]);
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

KQ_DEFINE_MM_DOT_AND_MUL(q4k_dot_q8k_avx512, q4k_mul_q8k_avx512, q4k_tile_avx512,
                         q4k_mm_tile_avx512, struct kq_q4k_act, kq_q4k_act_at)

/* ---- Q5_K ------------------------------------------------------------------ */

KQ_INLINE void q5k_kernel_avx512(int64_t n, const void *w_row, const void *act, size_t act_stride,
                                 int nr, float *out, size_t out_stride)
{
    const struct q5_k_block *x = w_row;
    const int64_t nb = n / SPLASH_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(16);
    __m512i idx[4], bit[4];
    for (int p = 0; p < 4; p++) {
        idx[p] = kq_idx_pair(2 * p, 2 * p + 1);
        bit[p] =
            _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8((char)(1 << (2 * p))),
                                   _mm512_set1_epi8((char)(2 << (2 * p))));
    }
    const __m512i idx_m = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15,
                                           14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    __m512 acc[KQ_MAX_NR];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m512i s16 = kq_k4_scales16(x[i].scales);
        __m512i sc[4], w[4];
        for (int p = 0; p < 4; p++)
            sc[p] = _mm512_permutexvar_epi16(idx[p], s16);
        const __m256i mins = _mm512_castsi512_si256(_mm512_permutexvar_epi16(idx_m, s16));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x[i].qh));
        for (int h = 0; h < 2; h++) {
            const __m512i v = _mm512_loadu_si512(x[i].qs + 64 * h);
            const __m512i lo = _mm512_and_si512(v, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            w[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
            w[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
        }
        for (int p = 0; p < 4; p++)
            w[p] = _mm512_mask_add_epi8(w[p], _mm512_test_epi8_mask(qh, bit[p]), w[p], b16);
        const float dw = kq_h2f_fast(x[i].d), dmw = kq_h2f_fast(x[i].dmin);
        for (int r = 0; r < nr; r++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + r * act_stride) + i;
            __m512i isum = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++) {
                const __m512i a = _mm512_loadu_si512(y->qs + 64 * p);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w[p], a), sc[p]);
            }
            const __m256i mp =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dw * y->d), _mm512_cvtepi32_ps(isum), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(-dmw * y->d),
                                     _mm512_cvtepi32_ps(_mm512_zextsi256_si512(mp)), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

KQ_DEFINE_DOT_AND_MUL(q5k_dot_q8k_avx512, q5k_mul_q8k_avx512, q5k_kernel_avx512)

/* ---- Q6_K ------------------------------------------------------------------ */

/* Q6_K: 64 weights per register in their natural order, unsigned levels 0..63
 * (two ops each: a vpermb lookup places the two high bits, a ternlog merges them
 * with the nibble). vpdpbusd sums 4 products per int32 lane, starting from
 * -32 * (sum of those 4 activations), so each lane holds sum (q - 32) a exactly
 * (|x| <= 16384); two packs to int16 and two vpmaddwd against the sub-block
 * scales give the super-block's int32 lanes. The -32 terms depend on the
 * activations only: a mat-vec tile computes them once per super-block for all its
 * weight rows (the mat-mat pass, for each weight row and activation row). */

/* One Q8_K super-block for kq_q6k_step: its 4 registers and their lanes' offsets. */
struct kq_q6k_act {
    __m512i a[4];
    __m512i c[4]; /* -32 * sums of 4 activations, per int32 lane of a[q] */
    __m512 d;
};

KQ_INLINE void kq_q6k_act_at(const void *act, size_t off, int64_t i, struct kq_q6k_act *o)
{
    const struct splash_q8_k_block *y =
        (const struct splash_q8_k_block *)((const char *)act + off) + i;
    const __m512i m32 = _mm512_set1_epi8(32);
    KQ_UNROLL for (int q = 0; q < 4; q++)
    {
        o->a[q] = _mm512_loadu_si512(y->qs + 64 * q);
        o->c[q] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                   _mm512_dpbusd_epi32(_mm512_setzero_si512(), m32, o->a[q]));
    }
    o->d = _mm512_set1_ps(y->d);
}

/* One Q6_K super-block of one weight row, decoded. */
struct kq_q6k_dec {
    __m512i w[4];  /* levels 0..63 of values 64q .. 64q + 63 */
    __m512i sc[2]; /* int16 scales matching the packs of (w[0], w[1]) and (w[2], w[3]) */
    __m512 dw;     /* d, broadcast */
};

KQ_INLINE void kq_q6k_decode(const struct q6_k_block *x, struct kq_q6k_dec *o)
{
    /* bytes j < 32 of a register take qh bits 0-1 (4-5 for the high nibbles), bytes
     * j >= 32 bits 2-3 (6-7): shifting the upper half's qh right by 2 makes both the
     * same; the two bits go to bits 4-5 by a lookup (low nibbles) or a mask (high) */
    const __m512i sh =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    const __m512i lut = _mm512_set1_epi32(0x30201000); /* byte i: (i & 3) << 4 */
    const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    KQ_UNROLL for (int h = 0; h < 2; h++)
    {
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i hh = _mm512_srlv_epi16(
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h))), sh);
        /* (a & c) | b */
        o->w[2 * h] = _mm512_ternarylogic_epi32(l, _mm512_permutexvar_epi8(hh, lut), m0f, 0xEC);
        o->w[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4),
                                                    _mm512_and_si512(hh, m30), m0f, 0xEC);
    }
    /* int16 lane 8k + m of the pack of (w[2h], w[2h + 1]) holds 4 values of sub-block
     * 8h + k (m < 4) or 8h + 4 + k */
    const __m512i s16 =
        _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)));
    const __m512i idx = _mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2, 5, 5, 5, 5,
                                         1, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0, 0);
    o->sc[0] = _mm512_permutexvar_epi16(idx, s16);
    o->sc[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16(8)), s16);
    /* d is the last of the 4 fp16 at scales + 10 */
    o->dw = _mm512_permutexvar_ps(
        _mm512_set1_epi32(3),
        _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(x->scales + 10)))));
}

KQ_INLINE void kq_q6k_decode_at(const void *w, size_t off, int64_t i, struct kq_q6k_dec *o)
{
    kq_q6k_decode((const struct q6_k_block *)((const char *)w + off) + i, o);
}

/* acc + one super-block's dot of a decoded weight row and an activation row. */
KQ_INLINE __m512 kq_q6k_step(const struct kq_q6k_dec *d, const struct kq_q6k_act *a, __m512 acc)
{
    __m512i p[4];
    KQ_UNROLL for (int q = 0; q < 4; q++) p[q] = _mm512_dpbusd_epi32(a->c[q], d->w[q], a->a[q]);
    const __m512i s =
        _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), d->sc[0]),
                            _mm512_packs_epi32(p[2], p[3]), d->sc[1]);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d->dw, a->d), acc);
}

KQ_INLINE void q6k_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                               const void *act, size_t act_stride, const int nr, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    __m512 acc[KQ_TILE_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        struct kq_q6k_act av;
        struct kq_q6k_dec dec;
        if (nw == 1) {
            kq_q6k_decode_at(w, 0, i, &dec);
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                kq_q6k_act_at(act, r * act_stride, i, &av);
                acc[0][r] = kq_q6k_step(&dec, &av, acc[0][r]);
            }
        } else {
            kq_prefetch_next_tile(w, w_stride, nw, i, sizeof(struct q6_k_block));
            kq_q6k_act_at(act, 0, i, &av);
            KQ_UNROLL for (int wi = 0; wi < nw; wi++)
            {
                kq_q6k_decode_at(w, wi * w_stride, i, &dec);
                acc[wi][0] = kq_q6k_step(&dec, &av, acc[wi][0]);
            }
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

/* Several activation rows, as q4k_mm_tile_avx512: the activations' -32 offsets are
 * computed once per super-block for all KQ_MM_NW weight rows. */
KQ_INLINE void q6k_mm_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                                  const void *act, size_t act_stride, const int nr, float *out,
                                  size_t out_stride, const int pre)
{
    const int64_t nb = n / SPLASH_QK_K;
    __m512 acc[KQ_MM_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        struct kq_q6k_dec dec[KQ_MM_NW];
        KQ_UNROLL for (int wi = 0; wi < nw; wi++) kq_q6k_decode_at(w, wi * w_stride, i, &dec[wi]);
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            struct kq_q6k_act av;
            if (pre)
                av = ((const struct kq_q6k_act *)act)[r * nb + i];
            else
                kq_q6k_act_at(act, r * act_stride, i, &av);
            KQ_UNROLL for (int wi = 0; wi < nw; wi++) acc[wi][r] =
                kq_q6k_step(&dec[wi], &av, acc[wi][r]);
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

KQ_DEFINE_MM_DOT_AND_MUL(q6k_dot_q8k_avx512, q6k_mul_q8k_avx512, q6k_tile_avx512,
                         q6k_mm_tile_avx512, struct kq_q6k_act, kq_q6k_act_at)
