/* test-format-pq2's AVX2 unit. The Makefile compiles a test's *_avx2.c units with the AVX2
 * flags (the test's own file gets none), so include/splash/hadamard.h gives this file its
 * AVX2 transform; test-format-pq2 calls it only on a CPU with AVX2. */
#include "splash/hadamard.h"

#if !defined(SPLASH_HADAMARD_AVX2)
#error "built without AVX2: the Makefile gives *_avx2.c units -mavx2"
#endif

void test_hadamard_1024_avx2(float *x, const int8_t *signs);

void test_hadamard_1024_avx2(float *x, const int8_t *signs)
{
    splash_hadamard_1024_avx2(x, signs);
}
