/* AVX-512 VNNI kernels for Q4_0 and Q8_0 against Q8_0 activations.
 *
 * Two 32-value blocks per 512-bit register. dpbusd multiplies unsigned by
 * signed bytes, so activations are biased to a + 128 (one xor) and the
 * accumulator starts at -128 * sum(w), computed once per weight block pair and
 * shared by every activation row. Block sums are exact int32, scaled per lane
 * by d_w * d_a. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"

/* [dw0 x 8 lanes, dw1 x 8 lanes] style vectors from two scalars. */
KQ_INLINE __m512 kq_pair_ps(float a, float b)
{
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));
}

KQ_INLINE __m512i kq_q8_0_pair(const struct splash_q8_0_block *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)),
                              _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
}

/* The shared body: w holds signed weight bytes of blocks i, i+1 with scales
 * dw0, dw1. */
#define KQ_LEGACY_PAIR_BODY()                                                                      \
    do {                                                                                           \
        const __m512i negc = _mm512_sub_epi32(                                                     \
            _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, w));          \
        for (int r = 0; r < nr; r++) {                                                             \
            const struct splash_q8_0_block *y =                                                    \
                (const struct splash_q8_0_block *)((const char *)act + r * act_stride) + i;        \
            const __m512i u = _mm512_xor_si512(kq_q8_0_pair(y), k80);                              \
            const __m512i t = _mm512_dpbusd_epi32(negc, u, w);                                     \
            const __m512 d = kq_pair_ps(dw0 * kq_h2f_fast(y[0].d), dw1 * kq_h2f_fast(y[1].d));     \
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), d, acc[r]);                            \
        }                                                                                          \
    } while (0)

/* Q8_0 tiles keep the weights signed and bias them instead: dpbusd(w + 128, a) =
 * w . a + 128 sum(a), and the correction -128 sum(a) depends on the activations only,
 * so one dpbusd per activation pair serves every weight row of the tile. The fp16
 * scales of 16 blocks are gathered at once; one product vector d_w * d_a per 16 blocks
 * and (weight row, activation row) gives each pair's lanes through a permute. A
 * mat-vec tile prefetches into L2, 16 blocks at a time, the next tile's bytes in
 * memory order (kq_prefetch_next_tile); a lone row prefetches KQ_PREFETCH bytes ahead. */

/* The fp16 scales d of 16 consecutive Q8_0 blocks (lanes >= nblk zero) as floats. */
KQ_INLINE __m512 kq_q8_0_d16(const struct splash_q8_0_block *b, __mmask16 m)
{
    const __m512i off =
        _mm512_set_epi32(15 * 34, 14 * 34, 13 * 34, 12 * 34, 11 * 34, 10 * 34, 9 * 34, 8 * 34,
                         7 * 34, 6 * 34, 5 * 34, 4 * 34, 3 * 34, 2 * 34, 34, 0);
    /* each lane reads d and the first two bytes of qs: inside the block */
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, off, &b->d, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}

/* Values of blocks b[0], b[1] (or b[0] and zeros) in one register. */
KQ_INLINE __m512i kq_q8_0_load(const struct splash_q8_0_block *b, int both)
{
    return both ? kq_q8_0_pair(b)
                : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)b->qs));
}

#define KQ_W8(wi) ((const struct splash_q8_0_block *)((const char *)w + (wi)*w_stride))
#define KQ_A8(r) ((const struct splash_q8_0_block *)((const char *)act + (r)*act_stride))

/* Blocks p, p + 1 of group g (only p when !both) for every pair of the tile. */
#define KQ_Q8_0_PAIR_STEP(p, both)                                                                 \
    do {                                                                                           \
        const __m512i ip = _mm512_add_epi32(pair0, _mm512_set1_epi32(p));                          \
        __m512i wu[KQ_TILE_NW];                                                                    \
        KQ_UNROLL for (int wi = 0; wi < nw; wi++)                                                  \
        {                                                                                          \
            if (nw == 1)                                                                           \
                _mm_prefetch((const char *)(KQ_W8(wi) + g + (p)) + KQ_PREFETCH, _MM_HINT_T0);      \
            wu[wi] = _mm512_xor_si512(kq_q8_0_load(KQ_W8(wi) + g + (p), both), k80);               \
        }                                                                                          \
        KQ_UNROLL for (int r = 0; r < nr; r++)                                                     \
        {                                                                                          \
            const __m512i a = kq_q8_0_load(KQ_A8(r) + g + (p), both);                              \
            const __m512i negc = _mm512_sub_epi32(                                                 \
                _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, a));      \
            KQ_UNROLL for (int wi = 0; wi < nw; wi++)                                              \
            {                                                                                      \
                const __m512i t = _mm512_dpbusd_epi32(negc, wu[wi], a);                            \
                acc[wi][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t),                                \
                                             _mm512_permutexvar_ps(ip, sc[wi][r]), acc[wi][r]);    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

KQ_INLINE void q8_0_tile_avx512(int64_t n, const void *w, size_t w_stride, const int nw,
                                const void *act, size_t act_stride, const int nr, float *out,
                                size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK8_0;
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    const __m512i pair0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[KQ_TILE_NW][KQ_MAX_NR];
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++) acc[wi][r] =
        _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += 16) {
        const int nblk = nb - g < 16 ? (int)(nb - g) : 16;
        const __mmask16 m = (__mmask16)((1u << nblk) - 1);
        __m512 sc[KQ_TILE_NW][KQ_MAX_NR], da[KQ_MAX_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) da[r] = kq_q8_0_d16(KQ_A8(r) + g, m);
        KQ_UNROLL for (int wi = 0; wi < nw; wi++)
        {
            const __m512 dw = kq_q8_0_d16(KQ_W8(wi) + g, m);
            KQ_UNROLL for (int r = 0; r < nr; r++) sc[wi][r] = _mm512_mul_ps(dw, da[r]);
        }
        if (nw > 1)
            kq_prefetch_next_tile(w, w_stride, nw, g / 16, 16 * sizeof(struct splash_q8_0_block));
        if (nblk == 16) {
            _Pragma("GCC unroll 8") for (int p = 0; p < 16; p += 2) KQ_Q8_0_PAIR_STEP(p, 1);
        } else {
            for (int p = 0; p < nblk; p += 2)
                KQ_Q8_0_PAIR_STEP(p, p + 1 < nblk);
        }
    }
    KQ_UNROLL for (int wi = 0; wi < nw; wi++) KQ_UNROLL for (int r = 0; r < nr; r++)
        out[r * out_stride + wi] = _mm512_reduce_add_ps(acc[wi][r]);
}

KQ_DEFINE_TILED_DOT_AND_MUL(q8_0_dot_q8_0_avx512, q8_0_mul_q8_0_avx512, q8_0_tile_avx512)

KQ_INLINE void q4_0_kernel_avx512(int64_t n, const void *w_row, const void *act, size_t act_stride,
                                  int nr, float *out, size_t out_stride)
{
    const struct q4_0_block *x = w_row;
    const int64_t nb = n / KQ_QK4_0;
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m512i k8 = _mm512_set1_epi8(8);
    __m512 acc[KQ_MAX_NR];
    for (int r = 0; r < nr; r++)
        acc[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i q =
            _mm256_loadu2_m128i((const __m128i *)x[i + 1].qs, (const __m128i *)x[i].qs);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        /* [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1]: values 0..31 of each block */
        const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        const __m512i w = _mm512_sub_epi8(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), k8);
        const float dw0 = kq_h2f_fast(x[i].d), dw1 = kq_h2f_fast(x[i + 1].d);
        KQ_LEGACY_PAIR_BODY();
    }
    for (int r = 0; r < nr; r++) {
        float s = _mm512_reduce_add_ps(acc[r]);
        if (i < nb) {
            const struct splash_q8_0_block *y =
                (const struct splash_q8_0_block *)((const char *)act + r * act_stride) + i;
            int sumi = 0;
            for (int j = 0; j < KQ_QK4_0 / 2; j++)
                sumi += ((x[i].qs[j] & 0xF) - 8) * y->qs[j] +
                        ((x[i].qs[j] >> 4) - 8) * y->qs[j + KQ_QK4_0 / 2];
            s += sumi * (kq_h2f_fast(x[i].d) * kq_h2f_fast(y->d));
        }
        out[r * out_stride] = s;
    }
}

KQ_DEFINE_DOT_AND_MUL(q4_0_dot_q8_0_avx512, q4_0_mul_q8_0_avx512, q4_0_kernel_avx512)
