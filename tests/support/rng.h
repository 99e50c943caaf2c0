/* Deterministic generators, so a test's random data and its failures reproduce. Each test
 * keeps its own state (and seed). */
#ifndef SPLASH_TEST_RNG_H
#define SPLASH_TEST_RNG_H

#include <stdint.h>

/* splitmix64: advances *state and returns the next value. */
uint64_t test_splitmix64(uint64_t *state);
/* A float in [0, 1) from the top 24 bits of the next splitmix64 value. */
float test_splitmix_uniform(uint64_t *state);
/* xorshift64 (shifts 13, 7, 17): advances *state and returns it. */
uint64_t test_xorshift64(uint64_t *state);

/* n_blocks Q8_0 activation blocks from splitmix64: q in [-127, 127] (the range ggml's
 * quantizer gives) and positive fp16 scales d in [0.001, 0.051). */
void test_random_q8_0(uint64_t *state, void *blocks, int64_t n_blocks);

#endif
