/* AVX-512 VNNI kernel for Q6_K_R16 (q6k_r16.h) against Q8_K activations.
 *
 * Per sub-block (16 values of all 16 rows of a group) three vector loads give the four
 * quads' 4u: three ANDs and, for the fourth quad, three vpermb lookups placing the bit
 * pairs and one ternlog ORing them. Each activation row then runs four vpdpbusd against
 * broadcast 4-byte groups of its activations, starting from -128 * (the sub-block's
 * activation sum), so each int32 lane ends at 4 * sum (u - 32) a exactly (|x| < 2^19);
 * one conversion and one FMA with the 16 rows' scales add it to the block's float sums.
 * Per block each activation row's sums are scaled once by d * d_a / 4. Output lanes are
 * the group's 16 rows, so a tile stores 16 results with one vector store per activation
 * row. Up to Q6K_R16_NR activation rows share each decoded sub-block. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"
#include "formats/kquants/q6k_r16.h"

KQ_DECL_MUL(q6k_r16_mul_q8k_avx512);

#define Q6K_R16_NR 8  /* activation rows per tile */
#define Q6K_R16_KC 64 /* blocks per float partial sum */
/* Bytes ahead of the current block that a mat-vec prefetches into L2. */
#ifndef Q6K_R16_PF
#define Q6K_R16_PF 8192
#endif

/* The fourth quad of a sub-block: bit pairs 0-1 of s0, s1, s2 to bits 2-3, 4-5, 6-7 by
 * 64-byte lookups (vpermb reads only the index's low 6 bits), ORed. */
KQ_INLINE __m512i q6k_r16_quad3(__m512i s0, __m512i s1, __m512i s2)
{
    const __m512i lut0 = _mm512_set1_epi32(0x0C080400); /* byte i: (i & 3) << 2 */
    const __m512i lut1 = _mm512_set1_epi32(0x30201000); /* (i & 3) << 4 */
    const __m512i lut2 = _mm512_set1_epi32((int)0xC0804000u); /* (i & 3) << 6 */
    return _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(s0, lut0),
                                     _mm512_permutexvar_epi8(s1, lut1),
                                     _mm512_permutexvar_epi8(s2, lut2), 0xFE);
}

/* Blocks [i0, i1) of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + 0..15] gets (first) or adds the 16 rows' dot products. Each
 * block's -128 * bsums start the rows' sub-block sums (prepared per block: a tile then
 * serves any activation rows in any order). */
KQ_INLINE void q6k_r16_tile(const uint8_t *grp, int64_t i0, int64_t i1, const char *act,
                            size_t act_stride, const int nr, float *out, size_t out_stride,
                            int first, const int prefetch)
{
    const __m512i mfc = _mm512_set1_epi8((char)0xFC);
    __m512 tot[Q6K_R16_NR];
    _Alignas(64) int32_t init[Q6K_R16_NR][16];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i++) {
        const uint8_t *b = grp + i * Q6K_R16_BYTES;
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            const __m512i bs =
                _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)y->bsums));
            _mm512_store_si512(init[r], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                         _mm512_slli_epi32(bs, 7)));
        }
        __m512 f[Q6K_R16_NR];
        for (int s = 0; s < 16; s++) {
            const uint8_t *q = b + Q6K_R16_QS + 192 * s;
            /* the first tile over streaming weights fetches ahead; later tiles find the
             * group in L1/L2 */
            if (prefetch && Q6K_R16_PF) {
                const char *p = (const char *)b + Q6K_R16_PF + (Q6K_R16_BYTES / 16) * s;
                _mm_prefetch(p, _MM_HINT_T1);
                _mm_prefetch(p + 64, _MM_HINT_T1);
                _mm_prefetch(p + 128, _MM_HINT_T1);
                _mm_prefetch(p + 192, _MM_HINT_T1);
            }
            const __m512i s0 = _mm512_loadu_si512(q), s1 = _mm512_loadu_si512(q + 64),
                          s2 = _mm512_loadu_si512(q + 128);
            const __m512i u0 = _mm512_and_si512(s0, mfc), u1 = _mm512_and_si512(s1, mfc),
                          u2 = _mm512_and_si512(s2, mfc), u3 = q6k_r16_quad3(s0, s1, s2);
            const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                _mm_loadu_si128((const __m128i *)(b + Q6K_R16_SCALES + 16 * s))));
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const int8_t *a =
                    ((const struct splash_q8_k_block *)(act + r * act_stride) + i)->qs + 16 * s;
                __m512i acc = _mm512_set1_epi32(init[r][s]);
                acc = _mm512_dpbusd_epi32(acc, u0, kq_bcast4(a));
                acc = _mm512_dpbusd_epi32(acc, u1, kq_bcast4(a + 4));
                acc = _mm512_dpbusd_epi32(acc, u2, kq_bcast4(a + 8));
                acc = _mm512_dpbusd_epi32(acc, u3, kq_bcast4(a + 12));
                const __m512 v = _mm512_cvtepi32_ps(acc);
                f[r] = s ? _mm512_fmadd_ps(v, sc, f[r]) : _mm512_mul_ps(v, sc);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + Q6K_R16_D)));
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            const float da = ((const struct splash_q8_k_block *)(act + r * act_stride) + i)->d;
            tot[r] = _mm512_fmadd_ps(f[r], _mm512_mul_ps(dw, _mm512_set1_ps(0.25f * da)), tot[r]);
        }
    }
    KQ_UNROLL for (int r = 0; r < nr; r++)
    {
        float *o = out + r * out_stride;
        _mm512_storeu_ps(o, first ? tot[r] : _mm512_add_ps(_mm512_loadu_ps(o), tot[r]));
    }
}

#define Q6K_R16_CASE(NR)                                                                           \
    case NR:                                                                                       \
        q6k_r16_tile(grp, i0, i0 + kc, a, act_stride, NR, o, out_stride, i0 == 0, pf);             \
        break;

void q6k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                            const void *act, size_t act_stride, int64_t n_act, float *out,
                            size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_w / Q6K_R16_ROWS;
    /* group by group, every activation tile over the group's blocks while they are in
     * L1/L2, so the weights stream from memory once whatever the number of activation
     * rows; the float sums restart every Q6K_R16_KC blocks whatever the tiling, so each
     * (weight row, activation row) pair gets the same bits in any batch */
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *grp = (const uint8_t *)w + g * Q6K_R16_ROWS * w_stride;
        for (int64_t j = 0; j < n_act; j += Q6K_R16_NR) {
            const int nr = n_act - j >= Q6K_R16_NR ? Q6K_R16_NR : (int)(n_act - j);
            const char *a = (const char *)act + j * act_stride;
            float *o = out + j * out_stride + g * Q6K_R16_ROWS;
            const int pf = j == 0;
            for (int64_t i0 = 0; i0 < nb; i0 += Q6K_R16_KC) {
                const int64_t kc = nb - i0 < Q6K_R16_KC ? nb - i0 : Q6K_R16_KC;
                switch (nr) {
                    Q6K_R16_CASE(1)
                    Q6K_R16_CASE(2)
                    Q6K_R16_CASE(3)
                    Q6K_R16_CASE(4)
                    Q6K_R16_CASE(5)
                    Q6K_R16_CASE(6)
                    Q6K_R16_CASE(7)
                default:
                    q6k_r16_tile(grp, i0, i0 + kc, a, act_stride, Q6K_R16_NR, o, out_stride,
                                 i0 == 0, pf);
                    break;
                }
            }
        }
    }
    /* the matrix's last rows, fewer than a group, in the plain layout */
    if (n_w > n_groups * Q6K_R16_ROWS)
        q6k_mul_q8k_avx512(n, (const char *)w + n_groups * Q6K_R16_ROWS * w_stride, w_stride,
                           n_w - n_groups * Q6K_R16_ROWS, act, act_stride, n_act,
                           out + n_groups * Q6K_R16_ROWS, out_stride);
}
