/* Q4_K_R16, the load-time repack of Q4_K (formats/kquants/q4k_r16.h), against ggml's Q4_K
 * reference vectors (../shared/testdata/quant, README.md section 5): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit and dot products with Q8_K activations as a
 * float64 sum over those values does; the SIMD row must match the scalar row. The checks
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

#define Q4K_BLOCK 144 /* bytes of a Q4_K super-block of 256 values */

/* Random Q4_K blocks: random levels, scales and mins, d and dmin in [1e-4, 1e-2). */
static void random_q4k_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q4K_BLOCK) {
        for (int k = 0; k < Q4K_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        for (int h = 0; h < 2; h++) {
            uint16_t v = splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
            memcpy(q + 2 * h, &v, 2);
        }
    }
}

static const struct test_repack_case q4k_r16 = {
    .plain = "Q4_K",
    .repacked = "Q4_K_R16",
    .ref = "q4_K",
    .block_values = 256,
    .block_bytes = Q4K_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_q4k_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's values. The
     * kernels sum each 32-value sub-block exactly in integers (as ggml does) and only
     * scale and add them in float: per super-block about 20 roundings of terms each at
     * most (d sc |q| + dmin m) |a| summed, which for ggml's Q4_K blocks is a few times
     * sum |w a| (mins subtract), so the difference is below ~1e-6 of sum |w a|; the plain
     * kernels are held to the same 1e-5 (test-format-kquants.c). Indexing or scale
     * mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: both within ~1e-6 of the exact
     * value (as above), and in practice within 1e-7 of each other. */
    .simd_tol = 1e-6,
    .scalar_is_plain = 1,
    .simd_batch_bits = 0,
};

static int setup(void **state)
{
    return test_repack_setup(state, &q4k_r16);
}

static void test_q4k_r16_descriptor_is_a_repack_of_q4k(void **state)
{
    (void)state;
    test_repack_check_descriptor();
}

static void test_q4k_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_q4k_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

static void test_q4k_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd();
}

static void test_q4k_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4k_r16_descriptor_is_a_repack_of_q4k),
        cmocka_unit_test(test_q4k_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q4k_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_q4k_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q4k_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
