/* IQ4_XS_R16, the load-time repack of IQ4_XS (formats/kquants/iq4xs_r16.h),
 * against ggml's IQ4_XS reference vectors (../shared/testdata/quant, README.md
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

#define IQ4XS_BLOCK 136 /* bytes of an IQ4_XS super-block of 256 values */

/* Random IQ4_XS blocks: random codes and sub-scales, d in [1e-4, 1e-2). */
static void random_iq4xs_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; b++, q += IQ4XS_BLOCK) {
    for (int k = 0; k < IQ4XS_BLOCK; k++)
      q[k] = (uint8_t)test_splitmix64(rng);
    uint16_t v =
        splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
    memcpy(q, &v, 2);
  }
}

static const struct test_repack_case iq4_xs_r16 = {
    .plain = "IQ4_XS",
    .repacked = "IQ4_XS_R16",
    .ref = "iq4_xs",
    .block_values = 256,
    .block_bytes = IQ4XS_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_iq4xs_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's
     * values. The kernels sum each 32-value sub-block exactly in integers (as
     * ggml does) and only scale and add them in float, in an order of their own
     * (the SIMD row: per super-block eight products or FMAs of a sub-block's
     * sum with its scale, then one FMA with d * d_a): about 10 roundings per
     * super-block, each at most 2^-24 of terms bounded by sum |w a| (IQ4_XS has
     * no mins to cancel), so the difference is below ~1e-6 of sum |w a|; the
     * plain kernels are held to the same 1e-5 (test-format-kquants.c). Indexing
     * or scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: both within ~1e-6 of
     * the exact value (as above), and in practice within 1e-7 of each other. */
    .simd_tol = 1e-6,
    .scalar_is_plain = 1,
    .simd_batch_bits = 1,
};

static int setup(void **state) { return test_repack_setup(state, &iq4_xs_r16); }

static void test_iq4xs_r16_descriptor_is_a_repack_of_iq4xs(void **state) {
  (void)state;
  test_repack_check_descriptor();
}

static void test_iq4xs_r16_to_float_matches_reference_bitwise(void **state) {
  (void)state;
  test_repack_check_to_float();
}

static void test_iq4xs_r16_mul_rows_match_float64_reference(void **state) {
  (void)state;
  test_repack_check_mul_rows();
}

static void test_iq4xs_r16_simd_rows_match_scalar_and_batch(void **state) {
  (void)state;
  test_repack_check_simd();
}

static void test_iq4xs_r16_validate_refuses_truncated_image(void **state) {
  (void)state;
  test_repack_check_validate();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_iq4xs_r16_descriptor_is_a_repack_of_iq4xs),
      cmocka_unit_test(test_iq4xs_r16_to_float_matches_reference_bitwise),
      cmocka_unit_test(test_iq4xs_r16_mul_rows_match_float64_reference),
      cmocka_unit_test(test_iq4xs_r16_simd_rows_match_scalar_and_batch),
      cmocka_unit_test(test_iq4xs_r16_validate_refuses_truncated_image),
  };
  return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
