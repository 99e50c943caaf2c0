/* AVX-512 VNNI kernels of Q2_0_R16 and PQ2_0_R16 (q20_r16.h) against Q8_0 activations,
 * one code for plain blocks of qk values (64 or 128).
 *
 * A group block's code vector t holds row l's codes of inputs 16t .. 16t + 15 in int32
 * lane l, input 16t + 4k + c at bit pair k of byte c. vpermb of a 64-entry table i & 3 or
 * (i >> 2) & 3 takes bit pair 0 or 1 of every byte out (the index's other bits do not
 * matter), and of the vpmultishiftqb-shifted bytes pairs 2 and 3: the codes q in 0..3,
 * unsigned for vpdpbusd, of inputs 16t + 4k .. 16t + 4k + 3. (On this generation vpdpbusd
 * issues on two ports, which every one-uop permute shares; a 16-bit shift, on one of them
 * only, costs more.) One vpdpbusd of such a vector against those 4 activation bytes
 * broadcast from memory adds the 16 rows' partial sums, so 8 give a Q8_0 block's 16
 * integer dots sum q a, and the accumulator's start value -sum(a) makes them sum (q - 1) a:
 * exact. Converted to float, times the activation block's d, the block's Q8_0 sums add up
 * (a multiply, then FMAs) to u, and one FMA with the 16 rows' d_w (one vcvtph2ps of the
 * stored scales) adds u d_w to the rows' totals. Lane l of the totals is row l's dot: no
 * horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, plain block by plain
 * block, in every tile (1 to 8 activation rows, which share each decoded vector), so
 * results do not depend on n_act and equal the scalar row's bit for bit. Per activation
 * row, the blocks' d and -sum(a) are prepared once per call (and K chunk). A mat-vec
 * streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/pq2/pq2.h"
#include "formats/pq2/q20_r16.h"

#define INLINE static inline __attribute__((always_inline))
#define R16_MAX_NR 8
/* (d, -sum) pairs on the stack: a tile of nr activation rows takes K chunks of
 * R16_PREP / nr Q8_0 blocks (the totals wait in out between chunks: exact) */
#define R16_PREP 2048
/* K chunk (Q8_0 blocks) of a call with more than one tile: 16 weight rows' chunk (9 KiB)
 * and a tile's 8 activation rows (17 KiB) fit L1 together */
#define R16_KC 64
/* A call over more weight bytes than R16_STREAM_BYTES is taken to stream them from memory
 * (the engine hands each thread pieces of tens of KB of decode matrices, which do not stay
 * in cache between tokens): its first tile prefetches into L2 this far ahead. */
#define R16_STREAM_BYTES (16u << 10)
#define R16_PREFETCH 8192

/* ---- tables --------------------------------------------------------------------- */

/* vpermb tables: bit pair k of the index */
#define R16_PAIR(k, i) (((i) >> (2 * (k))) & 3)
#define R16_X8(k, b)                                                                               \
    R16_PAIR(k, b), R16_PAIR(k, (b) + 1), R16_PAIR(k, (b) + 2), R16_PAIR(k, (b) + 3),              \
        R16_PAIR(k, (b) + 4), R16_PAIR(k, (b) + 5), R16_PAIR(k, (b) + 6), R16_PAIR(k, (b) + 7)
#define R16_X64(k)                                                                                 \
    R16_X8(k, 0), R16_X8(k, 8), R16_X8(k, 16), R16_X8(k, 24), R16_X8(k, 32), R16_X8(k, 40),        \
        R16_X8(k, 48), R16_X8(k, 56)

static const uint8_t q20_r16_pair[2][64] = {{R16_X64(0)}, {R16_X64(1)}};

/* ---- activations ------------------------------------------------------------------ */

/* One activation block's d and the offset correction -sum(qs). */
struct q20_r16_act {
    float d;
    int32_t c;
};

static void q20_r16_prepare(const struct splash_q8_0_block *y, int64_t nq, struct q20_r16_act *p)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < nq; i++) {
        /* sum(q + 128) of 8-byte quarters, then the whole block */
        const __m256i s =
            _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y[i].qs), k80),
                            _mm256_setzero_si256());
        __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
        p[i].d = _cvtsh_ss(y[i].d);
        p[i].c = -(_mm_cvtsi128_si32(t) - SPLASH_QK8_0 * 128);
    }
}

/* acc + vpdpbusd(q, the 4 activation bytes at a broadcast), the broadcast as the
 * instruction's memory operand: one fused uop where GCC 12 issues a separate broadcast
 * load, which leaves the front end short of uops for two vpdpbusd a cycle (7% more
 * activation rows a second). */
INLINE __m512i q20_r16_dpbusd_bcast(__m512i acc, __m512i q, const int8_t *a)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(acc)
            : "v"(q), "m"(*(const int32_t *)(const void *)a));
    return acc;
}

/* ---- kernel ----------------------------------------------------------------------- */

/* The 16 rows of one group over nk blocks from b against nr activation rows (Q8_0 blocks
 * y[r], prepared p[r]): out[r * out_stride + l] = (first ? 0 : its value) + dot. */
INLINE void q20_r16_tile(const int qk, const uint8_t *b, int64_t nk,
                         const struct splash_q8_0_block *const *y,
                         const struct q20_r16_act *const *p, const int nr, float *out,
                         size_t out_stride, const int first, const int prefetch)
{
    const int nh = qk / SPLASH_QK8_0;
    const __m512i pair0 = _mm512_loadu_si512(q20_r16_pair[0]),
                  pair1 = _mm512_loadu_si512(q20_r16_pair[1]);
    /* each byte's bits 4 .. 11 of its qword: its bit pairs 2, 3 at the bottom */
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    __m512 tot[R16_MAX_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * out_stride);
    for (int64_t i = 0; i < nk; i++, b += Q20_R16_BLOCK(qk)) {
        if (prefetch) {
            _Pragma("GCC unroll 16") for (int l = 0; l < Q20_R16_BLOCK(qk); l += 64)
                _mm_prefetch((const char *)b + R16_PREFETCH + l, _MM_HINT_T1);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)b));
        const uint8_t *qs = b + 2 * Q20_R16_ROWS;
        __m512 u[R16_MAX_NR];
        _Pragma("GCC unroll 4") for (int h = 0; h < nh; h++)
        {
            /* the codes of vectors 2h, 2h + 1: inputs 32h .. 32h + 31, 4 at a time */
            __m512i q[8];
            _Pragma("GCC unroll 2") for (int tt = 0; tt < 2; tt++)
            {
                const __m512i v = _mm512_loadu_si512(qs + 64 * (2 * h + tt));
                const __m512i v4 = _mm512_multishift_epi64_epi8(shr4, v);
                q[4 * tt] = _mm512_permutexvar_epi8(v, pair0);
                q[4 * tt + 1] = _mm512_permutexvar_epi8(v, pair1);
                q[4 * tt + 2] = _mm512_permutexvar_epi8(v4, pair0);
                q[4 * tt + 3] = _mm512_permutexvar_epi8(v4, pair1);
            }
            /* vpdpbusd chains interleaved across the activation rows, so that the
             * out-of-order core always finds independent ones; a row alone takes two
             * (added exactly) */
            const int nc = nr == 1 ? 2 : 1;
            __m512i acc[R16_MAX_NR][2];
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            {
                acc[r][0] = _mm512_set1_epi32(p[r][i * nh + h].c);
                acc[r][1] = _mm512_setzero_si512();
            }
            _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
            {
                _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) acc[r][m % nc] =
                    q20_r16_dpbusd_bcast(acc[r][m % nc], q[m], y[r][i * nh + h].qs + 4 * m);
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            {
                const __m512i isum = nc == 2 ? _mm512_add_epi32(acc[r][0], acc[r][1]) : acc[r][0];
                const __m512 f = _mm512_cvtepi32_ps(isum);
                const __m512 da = _mm512_set1_ps(p[r][i * nh + h].d);
                u[r] = h == 0 ? _mm512_mul_ps(f, da) : _mm512_fmadd_ps(f, da, u[r]);
            }
        }
        _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
            _mm512_fmadd_ps(u[r], dw, tot[r]);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);
}

/* Activation rows j0 .. j0 + nj (prepared blocks prep[j * nq ..], the nq = nk qk / 32 Q8_0
 * blocks of a row) against every whole group over weight blocks k0 .. k0 + nk: group by group,
 * every tile of up to 8 activation rows while the group's blocks are in L1/L2 (the first tile over
 * streaming weights fetches ahead). */
INLINE void q20_r16_run(const int qk, const char *wb, size_t w_stride, int64_t n_full, int64_t k0,
                        int64_t nk, const void *act, size_t act_stride, int64_t j0, int64_t nj,
                        const struct q20_r16_act *prep, float *out, size_t out_stride, int stream)
{
    const int nh = qk / SPLASH_QK8_0;
    const size_t nq = (size_t)(nk * nh);
    for (int64_t g = 0; g < n_full; g += Q20_R16_ROWS) {
        const uint8_t *b =
            (const uint8_t *)wb + (size_t)g * w_stride + (size_t)k0 * Q20_R16_BLOCK(qk);
        for (int64_t t = 0; t < nj; t += R16_MAX_NR) {
            const int nr = nj - t < R16_MAX_NR ? (int)(nj - t) : R16_MAX_NR;
            const struct splash_q8_0_block *y[R16_MAX_NR];
            const struct q20_r16_act *pp[R16_MAX_NR];
            for (int r = 0; r < nr; r++) {
                y[r] = (const struct splash_q8_0_block *)((const char *)act +
                                                          (size_t)(j0 + t + r) * act_stride) +
                       k0 * nh;
                pp[r] = prep + (size_t)(t + r) * nq;
            }
            float *o = out + (size_t)(j0 + t) * out_stride + g;
            const int first = k0 == 0, pf = stream && t == 0;
            switch (nr) {
            case 1:
                if (pf)
                    q20_r16_tile(qk, b, nk, y, pp, 1, o, out_stride, first, 1);
                else
                    q20_r16_tile(qk, b, nk, y, pp, 1, o, out_stride, first, 0);
                break;
#define R16_CASE(NR)                                                                               \
    case NR:                                                                                       \
        q20_r16_tile(qk, b, nk, y, pp, NR, o, out_stride, first, 0);                               \
        break;
                R16_CASE(2)
                R16_CASE(3)
                R16_CASE(4)
                R16_CASE(5)
                R16_CASE(6)
                R16_CASE(7)
#undef R16_CASE
            default:
                if (pf)
                    q20_r16_tile(qk, b, nk, y, pp, R16_MAX_NR, o, out_stride, first, 1);
                else
                    q20_r16_tile(qk, b, nk, y, pp, R16_MAX_NR, o, out_stride, first, 0);
                break;
            }
        }
    }
}

INLINE void q20_r16_mul_avx512(const int qk, PQ2_DECL_MUL((*plain_mul)), int64_t n, const void *w,
                               size_t w_stride, int64_t n_w, const void *act, size_t act_stride,
                               int64_t n_act, float *out, size_t out_stride)
{
    const int nh = qk / SPLASH_QK8_0;
    const int64_t nb = n / qk;
    const int64_t n_full = n_w / Q20_R16_ROWS * Q20_R16_ROWS;
    const char *wb = w;
    const int stream = (size_t)n_full * w_stride > R16_STREAM_BYTES;
    struct q20_r16_act stack[R16_PREP], *prep = stack;
    /* one tile: whole rows. More activation rows: all of them over K chunks of R16_KC
     * Q8_0 blocks, so a group's chunk stays in L1 while every tile reads it (each weight
     * is read once per call); their prepared blocks go on the heap when the stack does not
     * hold them. Without the heap, batches of 8 rows (the same sums either way). */
    int64_t nj = n_act, kc = n_act <= R16_MAX_NR || nb * nh <= R16_KC ? nb : R16_KC / nh;
    if (n_full && (uint64_t)n_act * (uint64_t)(kc * nh) > R16_PREP) {
        prep = malloc((size_t)n_act * (size_t)(kc * nh) * sizeof *prep);
        if (!prep) {
            prep = stack;
            nj = R16_MAX_NR;
            kc = kc * nh < R16_PREP / R16_MAX_NR ? kc : R16_PREP / R16_MAX_NR / nh;
        }
    }
    for (int64_t j0 = 0; n_full && j0 < n_act; j0 += nj) {
        const int64_t mj = n_act - j0 < nj ? n_act - j0 : nj;
        for (int64_t k0 = 0; k0 < nb; k0 += kc) {
            const int64_t nk = nb - k0 < kc ? nb - k0 : kc;
            for (int64_t j = 0; j < mj; j++)
                q20_r16_prepare((const struct splash_q8_0_block *)((const char *)act +
                                                                   (size_t)(j0 + j) * act_stride) +
                                    k0 * nh,
                                nk * nh, prep + (size_t)j * (size_t)(nk * nh));
            q20_r16_run(qk, wb, w_stride, n_full, k0, nk, act, act_stride, j0, mj, prep, out,
                        out_stride, stream);
        }
    }
    if (prep != stack)
        free(prep);
    /* the rows after the last whole group are plain rows */
    if (n_full < n_w)
        plain_mul(n, wb + (size_t)n_full * w_stride, w_stride, n_w - n_full, act, act_stride, n_act,
                  out + n_full, out_stride);
}

void q20_r16_mul_q8_0_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                             const void *act, size_t act_stride, int64_t n_act, float *out,
                             size_t out_stride)
{
    q20_r16_mul_avx512(PQ2_QK_Q2_0, pq2_q2_0_mul_q8_0_avx512, n, w, w_stride, n_w, act, act_stride,
                       n_act, out, out_stride);
}

void pq20_r16_mul_q8_0_avx512(int64_t n, const void *w, size_t w_stride, int64_t n_w,
                              const void *act, size_t act_stride, int64_t n_act, float *out,
                              size_t out_stride)
{
    q20_r16_mul_avx512(PQ2_QK_PQ2_0, pq2_pq2_0_mul_q8_0_avx512, n, w, w_stride, n_w, act,
                       act_stride, n_act, out, out_stride);
}
