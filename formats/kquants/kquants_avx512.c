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

KQ_INLINE void q4k_kernel_avx512(int64_t n, const void *w_row, const void *act, size_t act_stride,
                                 int nr, float *out, size_t out_stride)
{
    const struct q4_k_block *x = w_row;
    const int64_t nb = n / KQ_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i idx[4];
    for (int p = 0; p < 4; p++)
        idx[p] = kq_idx_pair(2 * p, 2 * p + 1);
    /* mins pair with bsums: [m0, m0, m1, m1, ..., m7, m7] */
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
        for (int h = 0; h < 2; h++) {
            const __m512i v = _mm512_loadu_si512(x[i].qs + 64 * h);
            const __m512i lo = _mm512_and_si512(v, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            w[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
            w[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
        }
        const float dw = kq_h2f_fast(x[i].d), dmw = kq_h2f_fast(x[i].dmin);
        for (int r = 0; r < nr; r++) {
            const struct q8_k_block *y = (const struct q8_k_block *)((const char *)act +
                                                                     r * act_stride) + i;
            __m512i isum = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++) {
                const __m512i a = _mm512_loadu_si512(y->qs + 64 * p);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w[p], a), sc[p]);
            }
            const __m256i mp = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dw * y->d), _mm512_cvtepi32_ps(isum), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(-dmw * y->d),
                                     _mm512_cvtepi32_ps(_mm512_zextsi256_si512(mp)), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r * out_stride] = _mm512_reduce_add_ps(acc[r]);
}

KQ_DEFINE_DOT_AND_MUL(q4k_dot_q8k_avx512, q4k_mul_q8k_avx512, q4k_kernel_avx512)

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
        bit[p] = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8((char)(1 << (2 * p))),
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
            const struct q8_k_block *y = (const struct q8_k_block *)((const char *)act +
                                                                     r * act_stride) + i;
            __m512i isum = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++) {
                const __m512i a = _mm512_loadu_si512(y->qs + 64 * p);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w[p], a), sc[p]);
            }
            const __m256i mp = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins);
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
    const __m512i sh01 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(0),
                                                 _mm512_set1_epi16(2));
    const __m512i sh23 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4),
                                                 _mm512_set1_epi16(6));
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
            const __m512i h01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hh, sh01), m2), 4);
            const __m512i h23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hh, sh23), m2), 4);
            w[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), h01);
            w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23);
        }
        const float dw = kq_h2f_fast(x[i].d);
        for (int r = 0; r < nr; r++) {
            const struct q8_k_block *y = (const struct q8_k_block *)((const char *)act +
                                                                     r * act_stride) + i;
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
