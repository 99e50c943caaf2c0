/* AVX-512 VNNI kernel of NVFP4_R16 (nvfp4_r16.h) against Q8_0 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * looks the low nibbles up (a 16-entry table repeated over its 64 entries, so the bits
 * above a nibble do not matter) as the doubled E2M1 values plus 128, unsigned for
 * vpdpbusd; the high nibbles are brought down by vpmultishiftqb first (port 5, beside
 * vpermb, where a shift would compete with vpdpbusd for port 0). One vpdpbusd of such a
 * vector against 4 activation bytes broadcast from memory adds the 16 rows' partial sums
 * of 4 inputs, so 4 give a 16-value sub-block's 16 integer dots (biased by 128 * sum(a),
 * which the accumulator's start value -128 * sum(a) takes back: exact). The rows' 16
 * scales of two sub-blocks are one byte unpack with zero, a shift and two vcvtph2ps of
 * the canonical bytes (c << 7 is their binary16); per Q8_0 block two converts, a multiply
 * and an FMA give p = fma(i1, w1, i0 w0) and one FMA adds p times the activation's 128 d
 * to the rows' totals. Lane r of the totals is row r's dot: no horizontal sums.
 *
 * Every (weight row, activation row) pair takes these float steps, Q8_0 block by Q8_0
 * block, in every tile (1 to 8 activation rows, which share each decoded weight half
 * block), so results do not depend on n_act and equal the scalar row's bit for bit. Per
 * activation row, each Q8_0 block's 128 d and its halves' -128 sum(a) are prepared once
 * per call (and K chunk), on the stack or, for many rows, the heap. The loops run
 * group-outer: each group's weights are read from memory once per call, however many
 * tiles of activation rows share them. A mat-vec streaming its rows from memory
 * prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/nvfp4/nvfp4_r16.h"
#include "splash/r16_q8_0.h"

/* K chunk (64-value blocks) of a call with more than one tile: 16 weight rows' chunk
 * (18 KiB) and a tile's 8 activation rows (17 KiB) fit L1 together */
#define R16_KC 32
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches, as the engine hands each thread) prefetches into L2 this far ahead of the
 * block it reads. */
#define R16_STREAM_BYTES (16u << 10)
#define R16_PREFETCH 4096

/* Doubled E2M1 values plus 128 per code (GGUF's NVFP4 values times two, biased to be
 * unsigned), repeated to vpermb's 64 entries. */
static const uint8_t nvfp4_r16_lut[64] = {
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
    128, 129, 130, 131, 132, 134, 136, 140, 128, 127, 126, 125, 124, 122, 120, 116,
};

/* One Q8_0 block's 128 d and the bias corrections -128 * sum(qs) of its two halves. */
struct nvfp4_r16_act {
    float d;
    int32_t c[2];
};

static void nvfp4_r16_prepare(const struct splash_q8_0_block *y, int64_t n_q8,
                              struct nvfp4_r16_act *p)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < n_q8; i++) {
        /* sum(q + 128) of 8-byte quarters, then of each half */
        const __m256i s =
            _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y[i].qs), k80),
                            _mm256_setzero_si256());
        const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
        const int32_t s0 = _mm_cvtsi128_si32(_mm_add_epi64(lo, _mm_unpackhi_epi64(lo, lo)));
        const int32_t s1 = _mm_cvtsi128_si32(_mm_add_epi64(hi, _mm_unpackhi_epi64(hi, hi)));
        p[i].d = _cvtsh_ss(y[i].d) * 128.0f;
        p[i].c[0] = -128 * (s0 - 16 * 128);
        p[i].c[1] = -128 * (s1 - 16 * 128);
    }
}

/* The 16 rows of one group over nk blocks from b against nr activation rows (Q8_0 blocks
 * y[r], prepared p[r], two per block): out[r * out_stride + l] = (first ? 0 : its value)
 * + dot. Each block is taken in two halves (one Q8_0 block each), which keeps a half's 8
 * decoded vectors and the tile's totals in registers. */
SPLASH_R16_Q8_0_INLINE void nvfp4_r16_tile(const struct nvfp4_r16_block *b, int64_t nk,
                                           const struct splash_q8_0_block *const *y,
                                           const struct nvfp4_r16_act *const *p, const int nr,
                                           float *out, size_t out_stride, const int first,
                                           const int prefetch)
{
    const __m512i lut = _mm512_loadu_si512(nvfp4_r16_lut);
    const __m512i shr4 = _mm512_set1_epi64(0x3c342c241c140c04);
    __m512 tot[SPLASH_R16_Q8_0_MAX_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++) tot[r] =
        first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * out_stride);
    for (int64_t i = 0; i < nk; i++, b++) {
        if (prefetch) {
            _Pragma("GCC unroll 9") for (int l = 0; l < 9; l++)
                _mm_prefetch((const char *)b + R16_PREFETCH + 64 * l, _MM_HINT_T1);
        }
        const __m512i draw = _mm512_loadu_si512(b->d);
        _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++)
        {
            /* sub-blocks 2q and 2q + 1: scales, then codes */
            const __m512i h =
                _mm512_srli_epi16(q ? _mm512_unpackhi_epi8(_mm512_setzero_si512(), draw)
                                    : _mm512_unpacklo_epi8(_mm512_setzero_si512(), draw),
                                  1);
            const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
            const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
            __m512i wv[8];
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
            {
                const __m512i v = _mm512_loadu_si512(b->qs[4 * q + k]);
                wv[2 * k] = _mm512_permutexvar_epi8(v, lut);
                wv[2 * k + 1] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shr4, v), lut);
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
            {
                const struct splash_q8_0_block *yq = &y[r][2 * i + q];
                const struct nvfp4_r16_act *pq = &p[r][2 * i + q];
                const int8_t *a = yq->qs;
                /* sub-block 2q: codes qs[4q], qs[4q + 1] (values 0..7 low, 8..15 high) */
                __m512i i0 = _mm512_set1_epi32(pq->c[0]), i1 = _mm512_set1_epi32(pq->c[1]);
                i0 = _mm512_dpbusd_epi32(i0, wv[0], splash_r16_q8_0_bcast4(a + 0));
                i1 = _mm512_dpbusd_epi32(i1, wv[4], splash_r16_q8_0_bcast4(a + 16));
                i0 = _mm512_dpbusd_epi32(i0, wv[2], splash_r16_q8_0_bcast4(a + 4));
                i1 = _mm512_dpbusd_epi32(i1, wv[6], splash_r16_q8_0_bcast4(a + 20));
                i0 = _mm512_dpbusd_epi32(i0, wv[1], splash_r16_q8_0_bcast4(a + 8));
                i1 = _mm512_dpbusd_epi32(i1, wv[5], splash_r16_q8_0_bcast4(a + 24));
                i0 = _mm512_dpbusd_epi32(i0, wv[3], splash_r16_q8_0_bcast4(a + 12));
                i1 = _mm512_dpbusd_epi32(i1, wv[7], splash_r16_q8_0_bcast4(a + 28));
                const __m512 pf = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), w1,
                                                  _mm512_mul_ps(_mm512_cvtepi32_ps(i0), w0));
                tot[r] = _mm512_fmadd_ps(pf, _mm512_set1_ps(pq->d), tot[r]);
            }
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < nr; r++)
        _mm512_storeu_ps(out + (size_t)r * out_stride, tot[r]);
}

/* the rows after the last whole group are the plain format's */
SPLASH_R16_Q8_0_DEFINE_MUL(nvfp4_r16_mul_q8_avx512, struct nvfp4_r16_block, struct nvfp4_r16_act,
                           NVFP4_QK, 2, nvfp4_r16_tile, nvfp4_r16_prepare,
                           nvfp4_q8_avx512vnni_mul_rows, R16_KC, R16_STREAM_BYTES)
