/* e^x over a vector of floats, for the *_avx2.c and *_avx512.c units of the kernels and of
 * plugins (header-only, so plugins need no core symbols). One definition keeps every caller's
 * bits the same: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two, the second part exact to
 * float), e^r by its degree-7 Taylor polynomial (relative error below 1e-8), times 2^n.
 * splash_exp256 (AVX2 + FMA) clamps x to [-87, 88] and builds 2^n in the exponent bits;
 * splash_exp512 (AVX-512F) clamps to [-104, 89] and scales by scalef (which saturates to 0
 * and inf). Each exists only in a unit compiled for its instruction set. */
#ifndef SPLASH_VEC_EXP_H
#define SPLASH_VEC_EXP_H

#if defined(__x86_64__) && (defined(__AVX2__) || defined(__AVX512F__))
#include <immintrin.h>
#endif

/* the polynomial's steps, shared by both widths: p = 1 + r + r^2/2 + ... + r^7/5040 */
#define SPLASH_EXP_TAYLOR(fmadd, set1, p, r)                                                      \
    do {                                                                                          \
        p = set1(1.0f / 5040.0f);                                                                 \
        p = fmadd(p, r, set1(1.0f / 720.0f));                                                     \
        p = fmadd(p, r, set1(1.0f / 120.0f));                                                     \
        p = fmadd(p, r, set1(1.0f / 24.0f));                                                      \
        p = fmadd(p, r, set1(1.0f / 6.0f));                                                       \
        p = fmadd(p, r, set1(0.5f));                                                              \
        p = fmadd(p, r, set1(1.0f));                                                              \
        p = fmadd(p, r, set1(1.0f));                                                              \
    } while (0)

#define SPLASH_EXP_LOG2E 1.44269504089f
#define SPLASH_EXP_LN2_HI 0.693145751953125f
#define SPLASH_EXP_LN2_LO 1.428606765330187e-06f

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
static inline __m256 splash_exp256(__m256 x)
{
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(SPLASH_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SPLASH_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SPLASH_EXP_LN2_LO), r);
    __m256 p;
    SPLASH_EXP_TAYLOR(_mm256_fmadd_ps, _mm256_set1_ps, p, r);
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

#if defined(__x86_64__) && defined(__AVX512F__)
static inline __m512 splash_exp512(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(89.0f)), _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SPLASH_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SPLASH_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SPLASH_EXP_LN2_LO), r);
    __m512 p;
    SPLASH_EXP_TAYLOR(_mm512_fmadd_ps, _mm512_set1_ps, p, r);
    return _mm512_scalef_ps(p, n);
}
#endif

#endif
