/* IQ1_M_R16, the load-time repack of IQ1_M (formats/kquants/iq1m_r16.h),
 * against ggml's IQ1_M reference vectors (../shared/testdata/quant, README.md
 * section 5): the reference rows, shuffled into a matrix with whole groups of
 * 16 rows and a tail, repacked, must give ggml's dequantized values bit for bit
 * and dot products with Q8_K activations as a float64 sum over those values
 * does; the SIMD row must match the scalar row, and give every (weight row,
 * activation row) pair the same bits whatever else shares the call. The checks
 * are tests/support/repack_check.h's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "splash/fp.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define IQ1M_BLOCK 56 /* bytes of an IQ1_M super-block of 256 values */

/* Random IQ1_M blocks: random grid indices, scales and delta signs, d in [1e-4,
 * 1e-2) written into the top nibbles of the four scale words (bytes 48..55),
 * where IQ1_M keeps it. */
static void random_iq1m_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += IQ1M_BLOCK) {
        for (int k = 0; k < IQ1M_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint16_t v = splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
        for (int w = 0; w < 4; w++)
            q[48 + 2 * w + 1] = (uint8_t)((q[48 + 2 * w + 1] & 0x0F) | ((v >> 4 * w) & 0xF) << 4);
    }
}

static const struct test_repack_case iq1_m_r16 = {
    .plain = "IQ1_M",
    .repacked = "IQ1_M_R16",
    .ref = "iq1_m",
    .block_values = 256,
    .block_bytes = IQ1M_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_iq1m_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's
     * values. The kernels sum each super-block exactly in integers (8 times the
     * scaled grid sum plus the scaled delta signs times the activations' 8-value
     * sums, below 2^23 in magnitude, so its float is exact) and only then go to
     * float: per super-block a product d * d_a, a product and an add, and a
     * final exact * 1/8, i.e. a few roundings of 2^-24 of terms bounded by sum
     * |w a| (the +-1/8 deltas are folded in exactly); ggml's dequantized values
     * round d * (2 s + 1) * (level +- 1/8) twice more, and the float64 sum is
     * exact enough. So the difference is below ~1e-6 of sum |w a|; the plain
     * kernels are held to the same 1e-5 (test-format-kquants.c). Indexing,
     * delta or scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the AVX-512 row takes
     * the scalar row's integer sums and float steps (and the tail rows the
     * plain AVX2 row, which matches the plain reference), so it must give the
     * same bits. */
    .simd_tol = 0.0,
    .scalar_is_plain = 1,
    .simd_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &iq1_m_r16);
}

static void test_iq1m_r16_descriptor_is_a_repack_of_iq1m(void **state)
{
    (void)state;
    test_repack_check_descriptor();
}

static void test_iq1m_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_iq1m_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

static void test_iq1m_r16_simd_rows_match_scalar_and_batch(void **state)
{
    (void)state;
    test_repack_check_simd();
}

static void test_iq1m_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iq1m_r16_descriptor_is_a_repack_of_iq1m),
        cmocka_unit_test(test_iq1m_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_iq1m_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_iq1m_r16_simd_rows_match_scalar_and_batch),
        cmocka_unit_test(test_iq1m_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
