/* AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K against Q8_K activations.
 *
 * Weights are unpacked to unsigned bytes once per super-block and kept in
 * registers while up to KQ_MAX_NR activation rows pass over them: per 64 values
 * one maddubs (u8 x s8 -> pairs of int16) and one dpwssd against the sub-block
 * scales (int16 pairs -> int32). The int32 super-block sum is exact; it is
 * scaled by d_w * d_a in float once per super-block. */
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

/* ---- Q4_K ------------------------------------------------------------------ */

/* Q4_K tiles pair the activations with the weights' nibble layout instead of
 * reordering the weights: the low nibbles of qs[0..63] are values 0..31 and 64..95,
 * so the activation register for them is [a0..31 | a64..95], loaded once and shared
 * by every weight row of the tile. The scales unpack in SIMD from broadcast loads of
 * the 12 packed bytes. Per (weight, activation) pair and super-block, the even int32
 * lanes fold the scaled sums to 8 and the odd lanes take the mins' 8 products, so one
 * FMA with [d, -dmin, d, -dmin, ...] * d_a adds the super-block. Shuffles are kept few
 * (port 5 bounds these loops): loads broadcast, lanes blend. */

/* One Q4_K super-block of one weight row, decoded for the tile. */
struct kq_q4k_dec {
    __m512i w[4];  /* nibbles: lo(qs 0..63), hi(qs 0..63), lo(qs 64..127), hi(qs 64..127) */
    __m512i sc[4]; /* int16 sub-block scales matching w[p]: [s0|s2], [s1|s3], [s4|s6], [s5|s7] */
    __m512i mins;  /* int16 m_j at lanes 4j + 2, 4j + 3, zero elsewhere */
    __m512 dm;     /* [d, -dmin] repeated */
};

KQ_INLINE void kq_q4k_decode(const struct q4_k_block *x, struct kq_q4k_dec *o)
{
    /* the 6-bit fields, as bytes [sc0..3 | m0..3 | sc4..7 | m4..7]: words u0, u1 hold
     * sc0..3 and m0..3 in their low 6 bits and the top 2 bits of sc4..7, m4..7; u2
     * holds the low 4 bits of sc4..7 (low nibbles) and m4..7 (high nibbles) */
    /* broadcast loads, not shuffles */
    const __m128i v01 =
        _mm_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)x->scales));  /* u0 u1 u0 u1 */
    const __m128i v2 = _mm_broadcastd_epi32(_mm_loadu_si32(x->scales + 8)); /* u2 x 4 */
    const __m128i lo6 = _mm_blend_epi32(v01, _mm_srli_epi32(v01, 2), 0xC);
    const __m128i sm = _mm_or_si128(
        _mm_and_si128(lo6, _mm_set_epi32(0x30303030, 0x30303030, 0x3f3f3f3f, 0x3f3f3f3f)),
        _mm_and_si128(_mm_srlv_epi32(v2, _mm_set_epi32(4, 0, 0, 0)),
                      _mm_set_epi32(0x0f0f0f0f, 0x0f0f0f0f, 0, 0)));
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
    /* sc_j at int16 lane j (j < 4) or j + 4; m_j at j + 4 or j + 8 */
    o->sc[0] = _mm512_permutexvar_epi16(kq_idx_pair(0, 2), s16);
    o->sc[1] = _mm512_permutexvar_epi16(kq_idx_pair(1, 3), s16);
    o->sc[2] = _mm512_permutexvar_epi16(kq_idx_pair(8, 10), s16);
    o->sc[3] = _mm512_permutexvar_epi16(kq_idx_pair(9, 11), s16);
    o->mins = _mm512_maskz_permutexvar_epi16(0xCCCCCCCCu,
                                             _mm512_set_epi16(15, 15, 0, 0, 14, 14, 0, 0, 13, 13, 0,
                                                              0, 12, 12, 0, 0, 7, 7, 0, 0, 6, 6, 0,
                                                              0, 5, 5, 0, 0, 4, 4, 0, 0),
                                             s16);
    /* d, dmin as fp16 pairs with dmin's sign flipped */
    o->dm = _mm512_cvtph_ps(_mm256_xor_si256(_mm256_broadcastd_epi32(_mm_loadu_si32(x)),
                                             _mm256_set1_epi32((int)0x80000000u)));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v0 = _mm512_loadu_si512(x->qs), v1 = _mm512_loadu_si512(x->qs + 64);
    o->w[0] = _mm512_and_si512(v0, m4);
    o->w[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
    o->w[2] = _mm512_and_si512(v1, m4);
    o->w[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
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
    __m512i bs;   /* pair j of the 16-value sums at int16 lanes 4j + 2, 4j + 3 */
    __m512 d;
};

KQ_INLINE void kq_q4k_act_at(const void *act, size_t off, int64_t i, struct kq_q4k_act *o)
{
    const struct q8_k_block *y = (const struct q8_k_block *)((const char *)act + off) + i;
    o->a[0] = kq_act_split(y->qs);
    o->a[1] = kq_act_split(y->qs + 32);
    o->a[2] = kq_act_split(y->qs + 128);
    o->a[3] = kq_act_split(y->qs + 160);
    o->bs =
        _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)y->bsums)), 32);
    o->d = _mm512_set1_ps(y->d);
}

KQ_INLINE void kq_q4k_decode_at(const void *w, size_t off, int64_t i, struct kq_q4k_dec *o)
{
    const struct q4_k_block *x = (const struct q4_k_block *)((const char *)w + off) + i;
    _mm_prefetch((const char *)x + KQ_PREFETCH, _MM_HINT_T0);
    _mm_prefetch((const char *)x + KQ_PREFETCH + 64, _MM_HINT_T0);
    kq_q4k_decode(x, o);
}

/* acc + one super-block's dot of a decoded weight row and an activation row. */
KQ_INLINE __m512 kq_q4k_step(const struct kq_q4k_dec *d, const struct kq_q4k_act *a, __m512 acc)
{
    __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(d->w[0], a->a[0]), d->sc[0]);
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->w[1], a->a[1]), d->sc[1]);
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->w[2], a->a[2]), d->sc[2]);
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->w[3], a->a[3]), d->sc[3]);
    const __m512i z = _mm512_mask_blend_epi32(0xAAAA, _mm512_add_epi32(s, _mm512_srli_epi64(s, 32)),
                                              _mm512_madd_epi16(a->bs, d->mins));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), _mm512_mul_ps(d->dm, a->d), acc);
}

KQ_INLINE void q4k_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                               const void *act, size_t act_stride, const int nr, float *out,
                               size_t out_stride)
{
    const int64_t nb = n / KQ_QK_K;
    __m512 acc[KQ_TILE_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    /* one activation row: its registers stay while each weight row is decoded and used
     * in turn; several: the one weight row stays while the activation rows pass */
    for (int64_t i = 0; i < nb; i++) {
        struct kq_q4k_act av;
        struct kq_q4k_dec dec;
        if (nw == 1) {
            kq_q4k_decode_at(w, 0, i, &dec);
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                kq_q4k_act_at(act, r * act_stride, i, &av);
                acc[0][r] = kq_q4k_step(&dec, &av, acc[0][r]);
            }
        } else {
            kq_q4k_act_at(act, 0, i, &av);
            KQ_UNROLL for (int wi = 0; wi < nw; wi++)
            {
                kq_q4k_decode_at(w, wi * w_stride, i, &dec);
                acc[wi][0] = kq_q4k_step(&dec, &av, acc[wi][0]);
            }
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

KQ_DEFINE_TILED_DOT_AND_MUL(q4k_dot_q8k_avx512, q4k_mul_q8k_avx512, q4k_tile_avx512)

/* ---- Q5_K ------------------------------------------------------------------ */

KQ_INLINE void q5k_kernel_avx512(int64_t n, const void *w_row, const void *act, size_t act_stride,
                                 int nr, float *out, size_t out_stride)
{
    const struct q5_k_block *x = w_row;
    const int64_t nb = n / KQ_QK_K;
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
            const struct q8_k_block *y =
                (const struct q8_k_block *)((const char *)act + r * act_stride) + i;
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

/* Levels are used unsigned (0..63); the -32 offset comes back through the
 * activation block sums: sum (q - 32) a = sum q a - 32 sum a, per 16 values. */
KQ_INLINE void q6k_kernel_avx512(int64_t n, const void *w_row, const void *act, size_t act_stride,
                                 int nr, float *out, size_t out_stride)
{
    const struct q6_k_block *x = w_row;
    const int64_t nb = n / KQ_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    /* high-bit shifts: bytes 0..31 by c0, 32..63 by c1 (16-bit lanes) */
    const __m512i sh01 =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(0), _mm512_set1_epi16(2));
    const __m512i sh23 =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(6));
    __m512i idx[4];
    for (int q = 0; q < 4; q++) {
        short e[32];
        for (int l = 0; l < 32; l++)
            e[l] = (short)(4 * q + l / 8);
        idx[q] = _mm512_loadu_si512(e);
    }
    __m512 acc[KQ_MAX_NR];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i sc256 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m512i sc512 = _mm512_castsi256_si512(sc256);
        __m512i sc[4], w[4];
        for (int q = 0; q < 4; q++)
            sc[q] = _mm512_permutexvar_epi16(idx[q], sc512);
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(x[i].ql + 64 * h);
            const __m512i hh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h)));
            const __m512i h01 =
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hh, sh01), m2), 4);
            const __m512i h23 =
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hh, sh23), m2), 4);
            w[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), h01);
            w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23);
        }
        const float dw = kq_h2f_fast(x[i].d);
        for (int r = 0; r < nr; r++) {
            const struct q8_k_block *y =
                (const struct q8_k_block *)((const char *)act + r * act_stride) + i;
            __m512i isum = _mm512_setzero_si512();
            for (int q = 0; q < 4; q++) {
                const __m512i a = _mm512_loadu_si512(y->qs + 64 * q);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w[q], a), sc[q]);
            }
            const __m256i corr =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc256);
            isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dw * y->d), _mm512_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

KQ_DEFINE_DOT_AND_MUL(q6k_dot_q8k_avx512, q6k_mul_q8k_avx512, q6k_kernel_avx512)
