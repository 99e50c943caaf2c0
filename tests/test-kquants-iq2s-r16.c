/* IQ2_S_R16, the load-time repack of IQ2_S (formats/kquants/iq2s_r16.h),
 * against ggml's IQ2_S reference vectors (../shared/testdata/quant, README.md
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

#define IQ2S_BLOCK 82 /* bytes of an IQ2_S super-block of 256 values */

/* Random IQ2_S blocks: random grid indices, signs and scales, d in [1e-4,
 * 1e-2). */
static void random_iq2s_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; b++, q += IQ2S_BLOCK) {
    for (int k = 0; k < IQ2S_BLOCK; k++)
      q[k] = (uint8_t)test_splitmix64(rng);
    uint16_t v =
        splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
    memcpy(q, &v, 2);
  }
}

static const struct test_repack_case iq2_s_r16 = {
    .plain = "IQ2_S",
    .repacked = "IQ2_S_R16",
    .ref = "iq2_s",
    .block_values = 256,
    .block_bytes = IQ2S_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_iq2s_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's
     * values. ggml's IQ2_S values d * (0.5 + s) * 0.25 * grid are exact floats
     * (11 + 5 + 6 significant bits), and the kernels sum a super-block's 256
     * products, times the sub-block scales 2 s + 1, exactly in integers (as
     * ggml does); only then comes float: the conversion of that sum, d * d_a
     * and one product or FMA and add per super-block, and the final 1/8
     * (exact): about 4 roundings per super-block, each at most 2^-24 of terms
     * bounded by sum |w a| (no mins to cancel), and the test's own a = d_a * q
     * rounds once per term, so the difference is below ~1e-6 of sum |w a| for
     * these 4-block rows; the plain kernels are held to the same 1e-5
     * (test-format-kquants.c). Indexing, sign or scale mistakes are O(1e-2) and
     * larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: both within ~1e-6 of
     * the exact value (as above; the SIMD row differs only in fusing the
     * per-block multiply-add), and in practice within 1e-7 of each other. */
    .simd_tol = 1e-6,
    .scalar_is_plain = 1,
    .simd_batch_bits = 1,
};

static int setup(void **state) { return test_repack_setup(state, &iq2_s_r16); }

static void test_iq2s_r16_descriptor_is_a_repack_of_iq2s(void **state) {
  (void)state;
  test_repack_check_descriptor();
}

static void test_iq2s_r16_to_float_matches_reference_bitwise(void **state) {
  (void)state;
  test_repack_check_to_float();
}

static void test_iq2s_r16_mul_rows_match_float64_reference(void **state) {
  (void)state;
  test_repack_check_mul_rows();
}

static void test_iq2s_r16_simd_rows_match_scalar_and_batch(void **state) {
  (void)state;
  test_repack_check_simd();
}

static void test_iq2s_r16_validate_refuses_truncated_image(void **state) {
  (void)state;
  test_repack_check_validate();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_iq2s_r16_descriptor_is_a_repack_of_iq2s),
      cmocka_unit_test(test_iq2s_r16_to_float_matches_reference_bitwise),
      cmocka_unit_test(test_iq2s_r16_mul_rows_match_float64_reference),
      cmocka_unit_test(test_iq2s_r16_simd_rows_match_scalar_and_batch),
      cmocka_unit_test(test_iq2s_r16_validate_refuses_truncated_image),
  };
  return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
