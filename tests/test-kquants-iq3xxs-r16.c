/* IQ3_XXS_R16, the load-time repack of IQ3_XXS (formats/kquants/iq3xxs_r16.h),
 * against ggml's IQ3_XXS reference vectors (../shared/testdata/quant, README.md
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

#define IQ3XXS_BLOCK 98 /* bytes of an IQ3_XXS super-block of 256 values */

/* Random IQ3_XXS blocks: random grid indices, signs and scales, d in [1e-4,
 * 1e-2). */
static void random_iq3xxs_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; b++, q += IQ3XXS_BLOCK) {
    for (int k = 0; k < IQ3XXS_BLOCK; k++)
      q[k] = (uint8_t)test_splitmix64(rng);
    uint16_t v =
        splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
    memcpy(q, &v, 2);
  }
}

static const struct test_repack_case iq3_xxs_r16 = {
    .plain = "IQ3_XXS",
    .repacked = "IQ3_XXS_R16",
    .ref = "iq3_xxs",
    .block_values = 256,
    .block_bytes = IQ3XXS_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_iq3xxs_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's
     * values. The kernels sum each super-block exactly in integers (sub-block
     * sums times 2 scale + 1, as ggml does) and only then go to float: per
     * super-block a product d * d_a, the conversion of the integer sum (it can
     * exceed 2^24), a product and an add, and a final exact * 1/4, i.e. a few
     * roundings of 2^-24 of terms bounded by sum |w a| (no mins to cancel);
     * ggml's dequantized values round d * (0.5 + s) * 0.5 * level twice more,
     * and the float64 sum is exact enough. So the difference is below ~1e-6 of
     * sum |w a|; the plain kernels are held to the same 1e-5
     * (test-format-kquants.c). Indexing, sign or scale mistakes are O(1e-2) and
     * larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the AVX-512 row takes
     * the scalar row's integer sums and float steps (and the tail rows the
     * plain AVX2 row, which matches the plain reference), so it must give the
     * same bits. */
    .simd_tol = 0.0,
    .scalar_is_plain = 1,
    .simd_batch_bits = 1,
};

static int setup(void **state) {
  return test_repack_setup(state, &iq3_xxs_r16);
}

static void test_iq3xxs_r16_descriptor_is_a_repack_of_iq3xxs(void **state) {
  (void)state;
  test_repack_check_descriptor();
}

static void test_iq3xxs_r16_to_float_matches_reference_bitwise(void **state) {
  (void)state;
  test_repack_check_to_float();
}

static void test_iq3xxs_r16_mul_rows_match_float64_reference(void **state) {
  (void)state;
  test_repack_check_mul_rows();
}

static void test_iq3xxs_r16_simd_rows_match_scalar_and_batch(void **state) {
  (void)state;
  test_repack_check_simd();
}

static void test_iq3xxs_r16_validate_refuses_truncated_image(void **state) {
  (void)state;
  test_repack_check_validate();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_iq3xxs_r16_descriptor_is_a_repack_of_iq3xxs),
      cmocka_unit_test(test_iq3xxs_r16_to_float_matches_reference_bitwise),
      cmocka_unit_test(test_iq3xxs_r16_mul_rows_match_float64_reference),
      cmocka_unit_test(test_iq3xxs_r16_simd_rows_match_scalar_and_batch),
      cmocka_unit_test(test_iq3xxs_r16_validate_refuses_truncated_image),
  };
  return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
