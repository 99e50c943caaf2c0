/* Q2_K_R16, the load-time repack of Q2_K (formats/kquants/q2k_r16.h), against
 * ggml's Q2_K reference vectors (../shared/testdata/quant, README.md section
 * 5): the reference rows, shuffled into a matrix with whole groups of 16 rows
 * and a tail, repacked, must give ggml's dequantized values bit for bit and dot
 * products with Q8_K activations as a float64 sum over those values does; the
 * SIMD row must match the scalar row. The checks are
 * tests/support/repack_check.h's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "splash/fp.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define Q2K_BLOCK 84 /* bytes of a Q2_K super-block of 256 values */

/* Random Q2_K blocks: random levels, scales and mins, d and dmin in [1e-4,
 * 1e-2). */
static void random_q2k_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; b++, q += Q2K_BLOCK) {
    for (int k = 0; k < Q2K_BLOCK; k++)
      q[k] = (uint8_t)test_splitmix64(rng);
    for (int h = 0; h < 2; h++) {
      uint16_t v =
          splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
      memcpy(q + 80 + 2 * h, &v, 2); /* d, dmin after 16 scales and 64 qs */
    }
  }
}

static const struct test_repack_case q2_k_r16 = {
    .plain = "Q2_K",
    .repacked = "Q2_K_R16",
    .ref = "q2_K",
    .block_values = 256,
    .block_bytes = Q2K_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_q2k_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's
     * values. The kernels sum each super-block's scaled levels and its mins
     * exactly in integers (ggml's reference does the same) and only scale,
     * subtract and add those per super-block in float: about 6 roundings of
     * terms each at most sum (d sc q + dmin m) |a| over the block, which for
     * ggml's Q2_K blocks is a few times sum |w a| (the mins subtract), so with
     * 4 super-blocks the difference stays below ~2e-6 of sum |w a|; ggml's
     * float values (d sc q - dmin m, rounded per value) add less than that. The
     * plain kernels are held to the same 1e-5 (test-format-kquants.c). Indexing
     * or scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: both within ~1e-6 of
     * the exact value (as above), and in practice within 1e-7 of each other. */
    .simd_tol = 1e-6,
    .scalar_is_plain = 1,
    .simd_batch_bits = 0,
};

static int setup(void **state) { return test_repack_setup(state, &q2_k_r16); }

static void test_q2k_r16_descriptor_is_a_repack_of_q2k(void **state) {
  (void)state;
  test_repack_check_descriptor();
}

static void test_q2k_r16_to_float_matches_reference_bitwise(void **state) {
  (void)state;
  test_repack_check_to_float();
}

static void test_q2k_r16_mul_rows_match_float64_reference(void **state) {
  (void)state;
  test_repack_check_mul_rows();
}

static void test_q2k_r16_simd_rows_match_scalar(void **state) {
  (void)state;
  test_repack_check_simd();
}

/* Every (weight row, activation row) pair gets the same bits whatever n_act is
 * (the engine relies on a batch giving each lane what it gets alone): rows of
 * 4096 inputs take the multi-row path's split into chunks of blocks and tiles
 * of activation rows. */
static void test_q2k_r16_batch_gives_each_row_its_own_bits(void **state) {
  (void)state;
  test_repack_check_batch_bits(4096, 37,
                               0xB17B17ull); /* 2 groups and a tail of 5 */
}

static void test_q2k_r16_validate_refuses_truncated_image(void **state) {
  (void)state;
  test_repack_check_validate();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_q2k_r16_descriptor_is_a_repack_of_q2k),
      cmocka_unit_test(test_q2k_r16_to_float_matches_reference_bitwise),
      cmocka_unit_test(test_q2k_r16_mul_rows_match_float64_reference),
      cmocka_unit_test(test_q2k_r16_simd_rows_match_scalar),
      cmocka_unit_test(test_q2k_r16_batch_gives_each_row_its_own_bits),
      cmocka_unit_test(test_q2k_r16_validate_refuses_truncated_image),
  };
  return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
