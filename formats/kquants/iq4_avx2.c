/* AVX2 rows of IQ4_XS (Q8_K activations) and IQ4_NL (Q8_0 activations). The reference
 * scales every 32-value sum in float, so the kernels produce the eight 32-value integer
 * sums with SIMD and replay the reference's float steps in order. */
#include "formats/kquants/iq_avx2.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"

/* The 32 values of 16 packed nibble bytes (low nibbles first) as signed levels. */
static inline __m256i iq4_levels32(const uint8_t *qs)
{
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kq_iq4nl_values));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    return _mm256_shuffle_epi8(lut, idx);
}

static inline void iq4_store32(struct kq_dec256 *dec, int k, __m256i q)
{
    _mm256_store_si256((__m256i *)(dec->mag + 32 * k), _mm256_abs_epi8(q));
    _mm256_store_si256((__m256i *)(dec->sgn + 32 * k), q);
}

static inline void iq4xs_block(const void *wb, const uint8_t *const ab[], int nr, float sumf[])
{
    const struct iq4_xs_block *x = wb;
    struct kq_dec256 dec;
    float ls[8];
    for (int ib = 0; ib < 8; ib++) {
        iq4_store32(&dec, ib, iq4_levels32(x->qs + 16 * ib));
        int l = ((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                (((x->scales_h >> 2 * ib) & 3) << 4);
        ls[ib] = (float)(l - 32);
    }
    const float xd = _cvtsh_ss(x->d);
    if (nr == 1) { /* one row: the eight sums of one reduction, scalar float steps */
        const struct splash_q8_k_block *y = (const struct splash_q8_k_block *)ab[0];
        const int8_t *q8[8];
        int32_t sums[8];
        for (int k = 0; k < 8; k++)
            q8[k] = y->qs + 32 * k;
        kq_dec_dot_sub32(&dec, q8, sums);
        const float d4d8 = xd * y->d;
        float s = sumf[0];
        for (int k = 0; k < 8; k++)
            s += d4d8 * ls[k] * (float)sums[k];
        sumf[0] = s;
        return;
    }
    /* several rows: one lane per row, the same float steps in each lane */
    float yd[8] = {0};
    const int8_t *q8[8];
    for (int r = 0; r < nr; r++) {
        yd[r] = ((const struct splash_q8_k_block *)ab[r])->d;
        q8[r] = ((const struct splash_q8_k_block *)ab[r])->qs;
    }
    const __m256 d4d8 = _mm256_mul_ps(_mm256_set1_ps(xd), _mm256_loadu_ps(yd));
    __m256 s = _mm256_loadu_ps(sumf);
    for (int k = 0; k < 8; k++) {
        __m256 sk = _mm256_cvtepi32_ps(kq_dot32_rows(dec.mag + 32 * k, dec.sgn + 32 * k, q8, nr));
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(d4d8, _mm256_set1_ps(ls[k])), sk));
        for (int r = 0; r < nr; r++)
            q8[r] += 32;
    }
    _mm256_storeu_ps(sumf, s);
}

KQ_IQ_DEFINE_ROWS(iq4xs, q8k, avx2, SPLASH_QK_K, sizeof(struct iq4_xs_block),
                  sizeof(struct splash_q8_k_block), iq4xs_block, kq_finish_id)

/* IQ4_NL: eight 32-value blocks at a time (the tail one by one); a Q8_0 block per block.
 * sumf has 8 entries; entries r >= nr are scratch. */
static inline void iq4nl_blocks(const struct iq4_nl_block *x, int nblk,
                                const struct splash_q8_0_block *const y[], int nr, float sumf[])
{
    struct kq_dec256 dec;
    float xd[8];
    for (int k = 0; k < nblk; k++) {
        iq4_store32(&dec, k, iq4_levels32(x[k].qs));
        xd[k] = _cvtsh_ss(x[k].d);
    }
    if (nr == 1) {
        const __m256i ones = _mm256_set1_epi16(1);
        int32_t sums[8];
        if (nblk == 8) {
            const int8_t *q8[8];
            for (int k = 0; k < 8; k++)
                q8[k] = y[0][k].qs;
            kq_dec_dot_sub32(&dec, q8, sums);
        } else {
            for (int k = 0; k < nblk; k++)
                sums[k] = kq_hsum_i32(_mm256_madd_epi16(
                    kq_dot32_i16(dec.mag + 32 * k, dec.sgn + 32 * k, y[0][k].qs), ones));
        }
        float s = sumf[0];
        for (int k = 0; k < nblk; k++)
            s += _cvtsh_ss(y[0][k].d) * xd[k] * (float)sums[k];
        sumf[0] = s;
        return;
    }
    __m256 s = _mm256_loadu_ps(sumf);
    for (int k = 0; k < nblk; k++) {
        const int8_t *q8[8];
        uint16_t yd[8] = {0};
        for (int r = 0; r < nr; r++) {
            q8[r] = y[r][k].qs;
            yd[r] = y[r][k].d;
        }
        __m256 sk = _mm256_cvtepi32_ps(kq_dot32_rows(dec.mag + 32 * k, dec.sgn + 32 * k, q8, nr));
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)yd));
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(xd[k])), sk));
    }
    _mm256_storeu_ps(sumf, s);
}

void iq4nl_mul_rows_q80_avx2(int64_t n, const void *w, size_t w_stride, int64_t n_w,
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
                iq4nl_blocks(wr + b, nblk, y, nr, sumf);
                for (int r = 0; r < nr; r++)
                    y[r] += nblk;
                b += nblk;
            }
            for (int r = 0; r < nr; r++)
                out[(size_t)(j0 + r) * out_stride + (size_t)i] = sumf[r];
        }
    }
}

void iq4nl_dot_q80_avx2(int64_t n, float *s, const void *w_row, const void *act_row)
{
    iq4nl_mul_rows_q80_avx2(n, w_row, 0, 1, act_row, 0, 1, s, 1);
}
