/* The Walsh-Hadamard input rotation of Prism ML's PQ2_0 GGUFs (models.md, "PQ2_0").
 *
 * Those files store weights that multiply H (D x) instead of x: D flips the sign of
 * chosen inputs (prism.hadamard sign values, one per input, sign_mode explicit) and
 * H is the normalized Sylvester (natural-order) Walsh-Hadamard transform of each
 * block of 1024 inputs, H = H_1024 / 32, so H H = I. A family applies
 * splash_hadamard_rotate to an activation row right before the matmul of a rotated
 * weight; the token table's rows are already stored rotated.
 *
 * Layout (why it is AVX2-friendly): a block is 128 contiguous vectors of 8 floats.
 * The three smallest butterfly stages (spans 1, 2, 4) run inside each 8-float
 * vector, fused with the sign flip; the seven larger stages (spans 8 .. 512) pair
 * whole vectors, so every load and store is a full aligned-or-unaligned 8-float
 * vector and no stage shuffles across vectors. splash_hadamard_1024_c runs that
 * stage order in plain C (compilers vectorize it); a translation unit compiled with
 * AVX2 (a *_avx2.c or *_avx512.c file) also gets splash_hadamard_1024_avx2, and
 * splash_hadamard_1024 / splash_hadamard_rotate take it there. Both do the same IEEE
 * additions and subtractions in the same order (sign flips and the 1/32 scale are
 * exact), so they give bit-identical results.
 *
 * Header-only (static inline): plugins need no core symbol. O(n log n), in place,
 * no allocation, thread-safe. */
#ifndef SPLASH_HADAMARD_H
#define SPLASH_HADAMARD_H

#include <stddef.h>
#include <stdint.h>

#define SPLASH_HADAMARD_BLOCK 1024

/* In-place unnormalized FWHT of len floats (len a power of two >= 1), natural
 * (Sylvester) order: for each span h = 1, 2, 4, ...: (a, b) -> (a + b, a - b). */
static inline void splash_fwht(float *x, size_t len)
{
    for (size_t h = 1; h < len; h <<= 1) {
        for (size_t i = 0; i < len; i += 2 * h) {
            for (size_t j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
}

/* One block in portable C: x[0..1024) := H (D x); signs[i] < 0 negates input i
 * (signs may be NULL: D = I). */
static inline void splash_hadamard_1024_c(float *x, const int8_t *signs)
{
    const size_t n = SPLASH_HADAMARD_BLOCK;
    for (size_t i = 0; i < n; i += 8) {
        float *v = x + i;
        if (signs)
            for (size_t k = 0; k < 8; k++)
                v[k] = signs[i + k] < 0 ? -v[k] : v[k];
        splash_fwht(v, 8);
    }
    for (size_t h = 8; h < n; h <<= 1) {
        for (size_t i = 0; i < n; i += 2 * h) {
            for (size_t j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        x[i] *= 1.0f / 32.0f;
}

/* Expands packed sign bits (bit i of bits[i / 8], LSB first, 1 = negative) into the
 * int8 form the transforms take. */
static inline void splash_hadamard_signs_from_bits(const uint8_t *bits, int8_t *signs, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        signs[i] = (int8_t)(((bits[i >> 3] >> (i & 7)) & 1) ? -1 : 1);
}

#endif /* SPLASH_HADAMARD_H */

/* The AVX2 path has its own guard: it appears in the first inclusion made with AVX2
 * enabled, even after an inclusion without it. */
#if defined(__AVX2__) && !defined(SPLASH_HADAMARD_AVX2)
#define SPLASH_HADAMARD_AVX2 1
#include <immintrin.h>

/* Spans 1, 2, 4 inside one vector: lanes j and j + h exchange values; the lower lane
 * keeps a + b, the upper a - b (a the lower lane's value), exactly as splash_fwht. */
static inline __m256 splash_hadamard_radix8_avx2(__m256 v)
{
    __m256 s = _mm256_permute_ps(v, 0xB1); /* swap neighbours */
    v = _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xAA);
    s = _mm256_permute_ps(v, 0x4E); /* swap pairs */
    v = _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xCC);
    s = _mm256_permute2f128_ps(v, v, 0x01); /* swap halves */
    return _mm256_blend_ps(_mm256_add_ps(v, s), _mm256_sub_ps(s, v), 0xF0);
}

/* splash_hadamard_1024_c with AVX2, bit for bit. */
static inline void splash_hadamard_1024_avx2(float *x, const int8_t *signs)
{
    const size_t n = SPLASH_HADAMARD_BLOCK;
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (signs) {
            __m128i s8 = _mm_loadl_epi64((const __m128i *)(const void *)(signs + i));
            __m256i neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), _mm256_cvtepi8_epi32(s8));
            v = _mm256_xor_ps(v, _mm256_and_ps(_mm256_castsi256_ps(neg), sign_bit));
        }
        _mm256_storeu_ps(x + i, splash_hadamard_radix8_avx2(v));
    }
    for (size_t h = 8; h < n; h <<= 1) {
        for (size_t i = 0; i < n; i += 2 * h) {
            for (size_t j = i; j < i + h; j += 8) {
                const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
                _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
                _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
            }
        }
    }
    const __m256 scale = _mm256_set1_ps(1.0f / 32.0f);
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), scale));
}
#endif

#ifndef SPLASH_HADAMARD_DISPATCH
#define SPLASH_HADAMARD_DISPATCH 1
/* One block: x[0..1024) := H (D x), with AVX2 where this file is compiled for it. */
static inline void splash_hadamard_1024(float *x, const int8_t *signs)
{
#if defined(SPLASH_HADAMARD_AVX2)
    splash_hadamard_1024_avx2(x, signs);
#else
    splash_hadamard_1024_c(x, signs);
#endif
}

/* A whole activation row: n inputs (a multiple of 1024), signs has n entries (or is
 * NULL). Returns 0, or -1 (x untouched) when n is not a multiple of the block. */
static inline int splash_hadamard_rotate(float *x, int64_t n, const int8_t *signs)
{
    if (n < 0 || n % SPLASH_HADAMARD_BLOCK)
        return -1;
    for (int64_t i = 0; i < n; i += SPLASH_HADAMARD_BLOCK)
        splash_hadamard_1024(x + i, signs ? signs + i : NULL);
    return 0;
}
#endif
