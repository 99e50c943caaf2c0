/* test-vec-exp's AVX-512 unit: splash_exp512 as the *_avx512.c units compile it. */
#include <stdint.h>

#include "splash/vec_exp.h"

#if !defined(__AVX512F__)
#error "built without AVX-512: the Makefile gives *_avx512.c units -mavx512f"
#endif

void test_exp512(const float *x, int64_t n, float *y);

void test_exp512(const float *x, int64_t n, float *y)
{
    for (int64_t i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, splash_exp512(_mm512_loadu_ps(x + i)));
}
