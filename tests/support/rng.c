#include "tests/support/rng.h"

#include "splash/act.h"
#include "splash/fp.h"

uint64_t test_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float test_splitmix_uniform(uint64_t *state)
{
    return (float)(test_splitmix64(state) >> 40) / 16777216.0f;
}

uint64_t test_xorshift64(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

void test_random_q8_0(uint64_t *state, void *blocks, int64_t n_blocks)
{
    struct splash_q8_0_block *b = blocks;
    for (int64_t i = 0; i < n_blocks; i++) {
        b[i].d = splash_fp32_to_fp16(0.001f + 0.05f * test_splitmix_uniform(state));
        for (int j = 0; j < SPLASH_QK8_0; j++)
            b[i].qs[j] = (int8_t)((int)(test_splitmix64(state) % 255) - 127);
    }
}
