/* AVX-512 VNNI kernel for Q3_K_R16 (q3k_r16.h) against Q8_K activations.
 *
 * Per pair of sub-blocks (32 values of all 16 rows of a group) three vector loads give
 * the eight quads' levels: six ANDs take 4u (bits 2..4, sub-block A) and 32u (bits
 * 5..7, sub-block B) in place; for the fourth quads three vpermb lookups gather the bit
 * pairs 0..1 of the three vectors into bits 2..7 of one (ORed by a ternlog), which two
 * more ANDs split the same way. Each activation row then runs four vpdpbusd per
 * sub-block against broadcast 4-byte groups of its activations, starting from
 * -4 F * (the sub-block's activation sum) (F = 4 for A, 32 for B), so each int32 lane
 * ends at F * sum (u - 4) a = F * sum q a exactly (|x| < 2^19). One conversion and one
 * FMA with the 16 rows' scales (B's divided by 8, exact) add it to the block's float
 * sum, 4 * sum sc q a, which is scaled by d * d_a / 4 once per block. The 16 rows'
 * 6-bit scales are decoded once per block for all activation rows of a tile: three
 * loads, shifts and ternlogs put the 6-bit fields in bits 0..5 of 256 bytes, one vpermb
 * per 64 maps them to t - 32. Output lanes are the group's 16 rows, so a tile stores 16
 * results with one vector store per activation row. Every tile size takes the same float
 * steps in the same order, so a (weight row, activation row) pair gets the same bits
 * whatever else shares the call. */
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_simd.h"
#include "formats/kquants/q3k_r16.h"

KQ_DECL_MUL(q3k_r16_mul_q8k_avx512);

#define Q3K_R16_NR 8  /* activation rows per tile (8 measured faster than 4..6) */
#define Q3K_R16_KC 64 /* blocks per float partial sum */
/* Bytes ahead of the current block that a call streaming its weights prefetches into
 * L2; a call over more than STREAM_BYTES of weights is taken to stream. */
#ifndef Q3K_R16_PF
#define Q3K_R16_PF 8192
#endif
#define Q3K_R16_STREAM_BYTES (16u << 10)

/* t - 32 for every 6-bit t (vpermb reads only the index's low 6 bits) */
static const int8_t q3k_r16_lut[64] __attribute__((aligned(64))) = {
    -32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17,
    -16, -15, -14, -13, -12, -11, -10, -9,  -8,  -7,  -6,  -5,  -4,  -3,  -2,  -1,
    0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,
    16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,
};

/* The block's 256 scales as floats, sub-block s at g[s]; B sub-blocks (odd s) divided
 * by 8 (exact), for their levels read as 32u against A's 4u. */
KQ_INLINE void q3k_r16_scales(const uint8_t *b, __m512 g[16])
{
    _Alignas(64) int8_t sc[256];
    const __m512i l0 = _mm512_loadu_si512(b + Q3K_R16_LO),
                  l1 = _mm512_loadu_si512(b + Q3K_R16_LO + 64),
                  h = _mm512_loadu_si512(b + Q3K_R16_HI);
    const __m512i m = _mm512_set1_epi8(0x0F), lut = _mm512_load_si512(q3k_r16_lut);
    /* 0xE4: c ? a : b, the low nibble from lo and bits 4..5 from hi; bits 6..7 are
     * ignored by the lookup */
    const __m512i v0 = _mm512_ternarylogic_epi32(l0, _mm512_slli_epi16(h, 4), m, 0xE4);
    const __m512i v1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l0, 4),
                                                 _mm512_slli_epi16(h, 2), m, 0xE4);
    const __m512i v2 = _mm512_ternarylogic_epi32(l1, h, m, 0xE4);
    const __m512i v3 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l1, 4),
                                                 _mm512_srli_epi16(h, 2), m, 0xE4);
    _mm512_store_si512(sc, _mm512_permutexvar_epi8(v0, lut));
    _mm512_store_si512(sc + 64, _mm512_permutexvar_epi8(v1, lut));
    _mm512_store_si512(sc + 128, _mm512_permutexvar_epi8(v2, lut));
    _mm512_store_si512(sc + 192, _mm512_permutexvar_epi8(v3, lut));
    KQ_UNROLL for (int s = 0; s < 16; s++)
    {
        const __m128i v = _mm_load_si128((const __m128i *)(sc + 16 * s));
        const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
        g[s] = s & 1 ? _mm512_mul_ps(f, _mm512_set1_ps(0.125f)) : f;
    }
}

/* Blocks [i0, i1) of one group against nr activation rows (at act, act_stride apart):
 * out[r * out_stride + 0..15] gets (first) or adds the 16 rows' dot products. init holds
 * -4 F * bsums of the chunk's blocks, [r][i - i0][sub-block]. */
KQ_INLINE void q3k_r16_tile(const uint8_t *grp, int64_t i0, int64_t i1, const char *act,
                            size_t act_stride, const int nr, float *out, size_t out_stride,
                            int first, const int prefetch)
{
    /* -4 F per sub-block: F = 4 (A, even) or 32 (B, odd), as shifts of the sums */
    const __m512i shifts = _mm512_set_epi32(7, 4, 7, 4, 7, 4, 7, 4, 7, 4, 7, 4, 7, 4, 7, 4);
    _Alignas(64) int32_t init[Q3K_R16_NR][16];
    const __m512i ma = _mm512_set1_epi8(0x1C), mb = _mm512_set1_epi8((char)0xE0);
    const __m512i lut0 = _mm512_set1_epi32(0x0C080400);       /* byte i: (i & 3) << 2 */
    const __m512i lut1 = _mm512_set1_epi32(0x30201000);       /* (i & 3) << 4 */
    const __m512i lut2 = _mm512_set1_epi32((int)0xC0804000u); /* (i & 3) << 6 */
    __m512 tot[Q3K_R16_NR];
    KQ_UNROLL for (int r = 0; r < nr; r++) tot[r] = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i++) {
        const uint8_t *b = grp + i * Q3K_R16_BYTES;
        if (prefetch) {
            KQ_UNROLL for (int l = 0; l < Q3K_R16_BYTES; l += 64)
                _mm_prefetch((const char *)b + Q3K_R16_PF + l, _MM_HINT_T1);
        }
        KQ_UNROLL for (int r = 0; r < nr; r++)
        {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)(act + r * act_stride) + i;
            const __m512i bs =
                _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)y->bsums));
            _mm512_store_si512(init[r], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                         _mm512_sllv_epi32(bs, shifts)));
        }
        __m512 g[16];
        q3k_r16_scales(b, g);
        __m512 f[Q3K_R16_NR];
        KQ_UNROLL for (int r = 0; r < nr; r++) f[r] = _mm512_setzero_ps();
        for (int p = 0; p < 8; p++) {
            const uint8_t *q = b + Q3K_R16_QS + 192 * p;
            const __m512i s0 = _mm512_loadu_si512(q), s1 = _mm512_loadu_si512(q + 64),
                          s2 = _mm512_loadu_si512(q + 128);
            const __m512i x = _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(s0, lut0),
                                                        _mm512_permutexvar_epi8(s1, lut1),
                                                        _mm512_permutexvar_epi8(s2, lut2), 0xFE);
            const __m512i a0 = _mm512_and_si512(s0, ma), a1 = _mm512_and_si512(s1, ma),
                          a2 = _mm512_and_si512(s2, ma), a3 = _mm512_and_si512(x, ma);
            const __m512i b0 = _mm512_and_si512(s0, mb), b1 = _mm512_and_si512(s1, mb),
                          b2 = _mm512_and_si512(s2, mb), b3 = _mm512_and_si512(x, mb);
            KQ_UNROLL for (int r = 0; r < nr; r++)
            {
                const int8_t *y =
                    ((const struct splash_q8_k_block *)(act + r * act_stride) + i)->qs + 32 * p;
                const int32_t *in = init[r] + 2 * p;
                __m512i ca = _mm512_set1_epi32(in[0]), cb = _mm512_set1_epi32(in[1]);
                ca = _mm512_dpbusd_epi32(ca, a0, kq_bcast4(y));
                cb = _mm512_dpbusd_epi32(cb, b0, kq_bcast4(y + 16));
                ca = _mm512_dpbusd_epi32(ca, a1, kq_bcast4(y + 4));
                cb = _mm512_dpbusd_epi32(cb, b1, kq_bcast4(y + 20));
                ca = _mm512_dpbusd_epi32(ca, a2, kq_bcast4(y + 8));
                cb = _mm512_dpbusd_epi32(cb, b2, kq_bcast4(y + 24));
                ca = _mm512_dpbusd_epi32(ca, a3, kq_bcast4(y + 12));
                cb = _mm512_dpbusd_epi32(cb, b3, kq_bcast4(y + 28));
                f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ca), g[2 * p], f[r]);
                f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cb), g[2 * p + 1], f[r]);
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + Q3K_R16_D)));
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

#define Q3K_R16_CASE(NR)                                                                           \
    case NR:                                                                                       \
        q3k_r16_tile(grp, i0, i0 + kc, a, act_stride, NR, o, out_stride, i0 == 0, pf);             \
        break;

void q3k_r16_mul_q8k_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                            const void *act, size_t act_stride, int64_t n_act, float *out,
                            size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_w / Q3K_R16_ROWS;
    /* a call streaming its rows from memory prefetches ahead in its first tile */
    const int stream = (size_t)n_groups * Q3K_R16_ROWS * w_stride > Q3K_R16_STREAM_BYTES;
    /* group by group, every activation tile over the group's blocks while they are in
     * L1/L2, so the weights stream from memory once whatever the number of activation
     * rows; the float sums restart every Q3K_R16_KC blocks whatever the tiling */
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *grp = (const uint8_t *)w + g * Q3K_R16_ROWS * w_stride;
        for (int64_t j = 0; j < n_act; j += Q3K_R16_NR) {
            const int nr = n_act - j >= Q3K_R16_NR ? Q3K_R16_NR : (int)(n_act - j);
            const char *a = (const char *)act + j * act_stride;
            float *o = out + j * out_stride + g * Q3K_R16_ROWS;
            const int pf = stream && j == 0;
            for (int64_t i0 = 0; i0 < nb; i0 += Q3K_R16_KC) {
                const int64_t kc = nb - i0 < Q3K_R16_KC ? nb - i0 : Q3K_R16_KC;
                switch (nr) {
                    Q3K_R16_CASE(1)
                    Q3K_R16_CASE(2)
                    Q3K_R16_CASE(3)
                    Q3K_R16_CASE(4)
                    Q3K_R16_CASE(5)
                    Q3K_R16_CASE(6)
                    Q3K_R16_CASE(7)
                default:
                    q3k_r16_tile(grp, i0, i0 + kc, a, act_stride, Q3K_R16_NR, o, out_stride,
                                 i0 == 0, pf);
                    break;
                }
            }
        }
    }
    /* the matrix's last rows, fewer than a group, in the plain layout */
    if (n_w > n_groups * Q3K_R16_ROWS)
        q3k_mul_q8k_avx2(n, (const char *)w + n_groups * Q3K_R16_ROWS * w_stride, w_stride,
                         n_w - n_groups * Q3K_R16_ROWS, act, act_stride, n_act,
                         out + n_groups * Q3K_R16_ROWS, out_stride);
}
