/* test-vec-exp's AVX2 unit: splash_exp256 as the kernels' and plugins' *_avx2.c units
 * compile it. */
#include <stdint.h>

#include "splash/vec_exp.h"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "built without AVX2 + FMA: the Makefile gives *_avx2.c units -mavx2 -mfma"
#endif

void test_exp256(const float *x, int64_t n, float *y);

void test_exp256(const float *x, int64_t n, float *y)
{
    for (int64_t i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, splash_exp256(_mm256_loadu_ps(x + i)));
}
