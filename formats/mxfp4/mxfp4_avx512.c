/* AVX-512 VNNI MXFP4 x Q8_0 rows, four blocks per 512-bit vector.
 *
 * The four blocks' 16 code bytes fill one register; its low nibbles are values 0..15
 * of each block and its high nibbles values 16..31, so the activations are loaded in
 * that order instead ([a_b[0..15]] then [a_b[16..31]] for blocks b..b+3), once per
 * tile and shared by all its weight rows. A byte shuffle maps codes to the doubled
 * E2M1 values plus 128 (unsigned, for vpdpbusd); the bias's 128 * sum(a) is subtracted
 * through the accumulator's start value, which depends on the activations only.
 * Each lane then holds four products of one block: block scales (E8M0 of 16 weight
 * blocks, gathered, times the gathered fp16 activation scales) are spread over the
 * lanes by one permute, and one FMA per four blocks accumulates.
 *
 * mul_rows gives one activation row four weight rows at a time and more activation
 * rows one weight row at a time; every (weight, activation) pair goes through the
 * same operations in every tile, so vec_dot and mul_rows agree bit for bit. A
 * mat-vec is bound by memory: its four-row tiles prefetch into L2, group by group,
 * the next tile's bytes in memory order (the hardware prefetchers alone do not keep
 * far enough ahead of four interleaved row streams); a lone row prefetches PREFETCH
 * bytes ahead of itself. */
#include <immintrin.h>

#include "formats/mxfp4/mxfp4.h"

#define INLINE static inline __attribute__((always_inline))
#define TILE_NW 4
#define PREFETCH 1024

/* Doubled E2M1 values plus 128 per code. */
static const uint8_t mxfp4_x2_biased[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                            128, 127, 126, 125, 124, 122, 120, 116};

/* 2^(e - 128) of the E8M0 bytes in the low byte of each lane (mxfp4_e8m0_half): exact,
 * 2^-128 and 2^-127 included (subnormal). */
INLINE __m512 e8m0_half16(__m512i e)
{
    return _mm512_scalef_ps(_mm512_set1_ps(1.0f),
                            _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
}

/* Scales of up to 16 weight blocks from x (lanes outside m zero). */
INLINE __m512 w_scales16(const struct mxfp4_block *x, __mmask16 m)
{
    const __m512i off =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32((int)sizeof(struct mxfp4_block)));
    /* each lane reads e and three code bytes of its own block */
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, off, &x->e, 1);
    const __m512 s = e8m0_half16(_mm512_and_si512(g, _mm512_set1_epi32(0xff)));
    return _mm512_maskz_mov_ps(m, s);
}

/* fp16 scales of up to 16 Q8_0 blocks from y (lanes outside m zero). */
INLINE __m512 a_scales16(const struct splash_q8_0_block *y, __mmask16 m)
{
    const __m512i off =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32((int)sizeof(struct splash_q8_0_block)));
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, off, &y->d, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}

/* 16 bytes at p + k * stride for k < nk in 128-bit lane k, zeros above. */
INLINE __m512i load4x16(const void *p, size_t stride, int nk)
{
    const char *c = p;
    __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)c));
    if (nk > 1)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(c + stride)), 1);
    if (nk > 2)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(c + 2 * stride)), 2);
    if (nk > 3)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(c + 3 * stride)), 3);
    return v;
}

/* Prefetches into L2 the bytes of the tile after this one (nw rows of w_stride bytes,
 * consecutive) that its 16-block group g / 16 reads, so a chunk of rows streams in
 * memory order ahead of the loads. */
INLINE void prefetch_next_tile(const void *w, size_t w_stride, int nw, int64_t g)
{
    const size_t group = 16 * sizeof(struct mxfp4_block);
    const char *p = (const char *)w + (size_t)nw * w_stride + (size_t)(g / 16) * (size_t)nw * group;
    _Pragma("GCC unroll 8") for (size_t l = 0; l < (size_t)nw * group; l += 64)
        _mm_prefetch(p + l, _MM_HINT_T1);
}

#define W_ROW(wi) ((const struct mxfp4_block *)((const char *)w + (size_t)(wi)*w_stride))
#define A_ROW(r) ((const struct splash_q8_0_block *)(act + (size_t)(r)*act_stride))

/* Blocks q .. q + nk - 1 of the 16-block group at g. */
#define QUAD_STEP(q, nk)                                                                           \
    do {                                                                                           \
        const __m512i iq = _mm512_add_epi32(quad0, _mm512_set1_epi32(q));                          \
        __m512i wlo[TILE_NW], whi[TILE_NW];                                                        \
        MXFP4_UNROLL_ROWS                                                                          \
        for (int wi = 0; wi < nw; wi++) {                                                          \
            const struct mxfp4_block *x = W_ROW(wi) + g + (q);                                     \
            if (nw == 1)                                                                           \
                _mm_prefetch((const char *)x + PREFETCH, _MM_HINT_T0);                             \
            const __m512i c = load4x16(x->qs, sizeof *x, nk);                                      \
            wlo[wi] = _mm512_shuffle_epi8(lut, _mm512_and_si512(c, m4));                           \
            whi[wi] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(c, 4), m4));     \
        }                                                                                          \
        MXFP4_UNROLL_ROWS                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            const struct splash_q8_0_block *y = A_ROW(r) + g + (q);                                \
            const __m512i alo = load4x16(y->qs, sizeof *y, nk);                                    \
            const __m512i ahi = load4x16(y->qs + 16, sizeof *y, nk);                               \
            const __m512i negc = _mm512_sub_epi32(                                                 \
                _mm512_setzero_si512(),                                                            \
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, alo), k80,    \
                                    ahi));                                                         \
            MXFP4_UNROLL_ROWS                                                                      \
            for (int wi = 0; wi < nw; wi++) {                                                      \
                const __m512i t =                                                                  \
                    _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(negc, wlo[wi], alo), whi[wi], ahi);    \
                acc[wi][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t),                                \
                                             _mm512_permutexvar_ps(iq, sc[wi][r]), acc[wi][r]);    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

INLINE void tile_avx512(int64_t nb, const void *w, size_t w_stride, const int nw, const char *act,
                        size_t act_stride, const int nr, float *out, size_t out_stride)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_x2_biased));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    /* lanes 4k..4k+3 take block k's scale */
    const __m512i quad0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    __m512 acc[TILE_NW][MXFP4_MAX_ACT_ROWS];
    MXFP4_UNROLL_ROWS
    for (int wi = 0; wi < nw; wi++) {
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++)
            acc[wi][r] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < nb; g += 16) {
        const int nblk = nb - g < 16 ? (int)(nb - g) : 16;
        const __mmask16 m = (__mmask16)((1u << nblk) - 1);
        __m512 sc[TILE_NW][MXFP4_MAX_ACT_ROWS], da[MXFP4_MAX_ACT_ROWS];
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++)
            da[r] = a_scales16(A_ROW(r) + g, m);
        MXFP4_UNROLL_ROWS
        for (int wi = 0; wi < nw; wi++) {
            const __m512 dw = w_scales16(W_ROW(wi) + g, m);
            MXFP4_UNROLL_ROWS
            for (int r = 0; r < nr; r++)
                sc[wi][r] = _mm512_mul_ps(dw, da[r]);
        }
        if (nw > 1)
            prefetch_next_tile(w, w_stride, nw, g);
        if (nblk == 16) {
            QUAD_STEP(0, 4);
            QUAD_STEP(4, 4);
            QUAD_STEP(8, 4);
            QUAD_STEP(12, 4);
        } else {
            for (int q = 0; q < nblk; q += 4) {
                const int nk = nblk - q;
                if (nk >= 4)
                    QUAD_STEP(q, 4);
                else if (nk == 3)
                    QUAD_STEP(q, 3);
                else if (nk == 2)
                    QUAD_STEP(q, 2);
                else
                    QUAD_STEP(q, 1);
            }
        }
    }
    MXFP4_UNROLL_ROWS
    for (int wi = 0; wi < nw; wi++) {
        MXFP4_UNROLL_ROWS
        for (int r = 0; r < nr; r++)
            out[(size_t)r * out_stride + (size_t)wi] = _mm512_reduce_add_ps(acc[wi][r]);
    }
}

/* ---- mat-vec: one activation row, prepared once ----------------------------------
 *
 * A mat-vec's activation row is regrouped once per call (per 16 blocks: the four
 * quads' low and high halves, their bias start values and the fp16 scales), so a
 * tile's step is the weight work alone. Four blocks' codes come out of one 68-byte
 * window with one two-source byte permute, and the nibbles are looked up with vpermb
 * in a table repeated over its 64 entries, which ignores the bits above each nibble.
 * Every (weight, activation) pair still goes through tile_avx512's integer sums and
 * float steps, in its order, so results equal vec_dot's bit for bit. */

#define MV_MAX_GROUPS 64 /* 1024 blocks (32768 values) of activations on the stack */

/* Byte 16k + j of four blocks' codes is byte 17k + 1 + j of their 68-byte window. */
static const uint8_t mv_window_idx[64] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67,
};

struct mv_act16 {
    __m512i lo[4], hi[4], negc[4];
    __m512 d;
};

static void mv_prepare(int64_t nb, const struct splash_q8_0_block *y, struct mv_act16 *o)
{
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    for (int64_t g = 0; g < nb; g += 16) {
        const int nblk = nb - g < 16 ? (int)(nb - g) : 16;
        struct mv_act16 *a = &o[g / 16];
        a->d = a_scales16(y + g, (__mmask16)((1u << nblk) - 1));
        for (int q = 0; q < 4; q++) {
            const int nk = nblk - 4 * q > 4 ? 4 : nblk - 4 * q;
            const struct splash_q8_0_block *b = y + g + 4 * q;
            a->lo[q] = nk > 0 ? load4x16(b->qs, sizeof *b, nk) : _mm512_setzero_si512();
            a->hi[q] = nk > 0 ? load4x16(b->qs + 16, sizeof *b, nk) : _mm512_setzero_si512();
            a->negc[q] = _mm512_sub_epi32(
                _mm512_setzero_si512(),
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, a->lo[q]),
                                    k80, a->hi[q]));
        }
    }
}

/* The 64 code bytes of the four blocks at x, block k's in 128-bit lane k: the 68 bytes
 * from x are one full load and a broadcast of the last four (no read past them). */
INLINE __m512i mv_codes4(const struct mxfp4_block *x, __m512i idx)
{
    const char *p = (const char *)x;
    int32_t tail;
    memcpy(&tail, p + 64, sizeof tail);
    return _mm512_permutex2var_epi8(_mm512_loadu_si512(p), idx, _mm512_set1_epi32(tail));
}

/* Blocks g + 4q .. g + 4q + nk - 1 of nw rows. */
INLINE void mv_quad(const void *w, size_t w_stride, const int nw, int64_t g, const int q,
                    const int nk, const struct mv_act16 *a, const __m512 sc[], __m512 acc[])
{
    /* the doubled E2M1 values + 128 at every index whose low nibble is the code */
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_x2_biased));
    const __m512i idx = _mm512_loadu_si512(mv_window_idx);
    const __m512i iq = _mm512_add_epi32(
        _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), _mm512_set1_epi32(4 * q));
    MXFP4_UNROLL_ROWS
    for (int wi = 0; wi < nw; wi++) {
        const struct mxfp4_block *x = W_ROW(wi) + g + 4 * q;
        if (nw == 1)
            _mm_prefetch((const char *)x + PREFETCH, _MM_HINT_T0);
        const __m512i c = nk == 4 ? mv_codes4(x, idx) : load4x16(x->qs, sizeof *x, nk);
        const __m512i lo = _mm512_permutexvar_epi8(c, lut);
        const __m512i hi = _mm512_permutexvar_epi8(_mm512_srlv_epi32(c, _mm512_set1_epi32(4)), lut);
        const __m512i t =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a->negc[q], lo, a->lo[q]), hi, a->hi[q]);
        acc[wi] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(iq, sc[wi]), acc[wi]);
    }
}

INLINE void mv_tile(int64_t nb, const void *w, size_t w_stride, const int nw,
                    const struct mv_act16 *acts, float *out)
{
    __m512 acc[TILE_NW];
    MXFP4_UNROLL_ROWS
    for (int wi = 0; wi < nw; wi++)
        acc[wi] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += 16) {
        const int nblk = nb - g < 16 ? (int)(nb - g) : 16;
        const __mmask16 m = (__mmask16)((1u << nblk) - 1);
        const struct mv_act16 *a = &acts[g / 16];
        __m512 sc[TILE_NW];
        MXFP4_UNROLL_ROWS
        for (int wi = 0; wi < nw; wi++)
            sc[wi] = _mm512_mul_ps(w_scales16(W_ROW(wi) + g, m), a->d);
        if (nw > 1)
            prefetch_next_tile(w, w_stride, nw, g);
        if (nblk == 16) {
            mv_quad(w, w_stride, nw, g, 0, 4, a, sc, acc);
            mv_quad(w, w_stride, nw, g, 1, 4, a, sc, acc);
            mv_quad(w, w_stride, nw, g, 2, 4, a, sc, acc);
            mv_quad(w, w_stride, nw, g, 3, 4, a, sc, acc);
            continue;
        }
        for (int q = 0; 4 * q < nblk; q++) {
            const int nk = nblk - 4 * q;
            if (nk >= 4)
                mv_quad(w, w_stride, nw, g, q, 4, a, sc, acc);
            else if (nk == 3)
                mv_quad(w, w_stride, nw, g, q, 3, a, sc, acc);
            else if (nk == 2)
                mv_quad(w, w_stride, nw, g, q, 2, a, sc, acc);
            else
                mv_quad(w, w_stride, nw, g, q, 1, a, sc, acc);
        }
    }
    MXFP4_UNROLL_ROWS
    for (int wi = 0; wi < nw; wi++)
        out[wi] = _mm512_reduce_add_ps(acc[wi]);
}

/* One weight row against nr activation rows, for MXFP4_MUL_ROWS_DRIVER. */
INLINE void tile1_avx512(int64_t nb, const void *w, const char *act, size_t act_stride, float *out,
                         size_t out_stride, const int nr)
{
    tile_avx512(nb, w, 0, 1, act, act_stride, nr, out, out_stride);
}

void mxfp4_q8_avx512vnni_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    tile_avx512(n / MXFP4_QK, w_row, 0, 1, act_row, 0, 1, s, 0);
}

void mxfp4_q8_avx512vnni_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                  const void *act, size_t act_stride, int64_t n_act, float *out,
                                  size_t out_stride)
{
    const int64_t nb = n / MXFP4_QK;
    const char *wb = w;
    if (n_act == 1 && nb <= 16 * MV_MAX_GROUPS) {
        struct mv_act16 acts[MV_MAX_GROUPS];
        mv_prepare(nb, act, acts);
        int64_t i = 0;
        for (; i + TILE_NW <= n_w; i += TILE_NW)
            mv_tile(nb, wb + (size_t)i * w_stride, w_stride, TILE_NW, acts, out + i);
        for (; i < n_w; i++)
            mv_tile(nb, wb + (size_t)i * w_stride, w_stride, 1, acts, out + i);
        return;
    }
    if (n_act == 1) {
        int64_t i = 0;
        for (; i + TILE_NW <= n_w; i += TILE_NW)
            tile_avx512(nb, wb + (size_t)i * w_stride, w_stride, TILE_NW, act, 0, 1, out + i, 0);
        for (; i < n_w; i++)
            tile_avx512(nb, wb + (size_t)i * w_stride, w_stride, 1, act, 0, 1, out + i, 0);
        return;
    }
    MXFP4_MUL_ROWS_DRIVER(tile1_avx512, nb, w, w_stride, n_w, act, act_stride, n_act, out,
                          out_stride);
}
