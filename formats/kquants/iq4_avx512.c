/* AVX-512 VNNI rows of IQ4_XS and IQ4_NL. Weights decode to |level| (u8) and a mask of
 * negative levels (no level is zero); vpdpbusd multiplies |w| by the activation negated
 * under that mask. As in the AVX2 rows, the eight 32-value integer sums of each 256
 * values are computed in SIMD and the reference's float steps replayed in order. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"

/* 256 decoded weights: four groups of 64 (two 32-value sub-blocks each). */
struct iq4_dec512 {
    __m512i mag[4];
    __mmask64 neg[4];
};

/* Levels of two sub-blocks whose 16 nibble bytes each are at qa and qb. */
static inline void iq4_decode64(struct iq4_dec512 *dec, int m, const uint8_t *qa,
                                const uint8_t *qb)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kq_iq4nl_values));
    __m256i v = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)qb),
                                 _mm_loadu_si128((const __m128i *)qa));
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
    w = _mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(1, 1, 0, 0)); /* qa, qa, qb, qb */
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

static inline void iq4xs_block512(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq4_xs_block *x = wb;
    struct iq4_dec512 dec;
    float ls[8];
    for (int m = 0; m < 4; m++)
        iq4_decode64(&dec, m, x->qs + 32 * m, x->qs + 32 * m + 16);
    for (int ib = 0; ib < 8; ib++) {
        int l = ((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                (((x->scales_h >> 2 * ib) & 3) << 4);
        ls[ib] = (float)(l - 32);
    }
    const float xd = _cvtsh_ss(x->d);
    for (int r = 0; r < nr; r++) {
        const struct q8_k_block *y = (const struct q8_k_block *)ab[r];
        __m512i act[4];
        int32_t sums[8];
        for (int m = 0; m < 4; m++)
            act[m] = _mm512_loadu_si512((const void *)(y->qs + 64 * m));
        iq4_sums512(&dec, act, sums);
        const float d4d8 = xd * y->d;
        float s = sumf[r];
        for (int k = 0; k < 8; k++)
            s += d4d8 * ls[k] * (float)sums[k];
        sumf[r] = s;
    }
}

KQ_IQ_DEFINE_ROWS(iq4xs, q8k, avx512, KQ_QK_K, sizeof(struct iq4_xs_block),
                  sizeof(struct q8_k_block), iq4xs_block512, kq_finish_id)

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
                y[r] = (const struct q8_0_block *)((const uint8_t *)a +
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
