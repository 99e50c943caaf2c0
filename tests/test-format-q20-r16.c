/* Q2_0_R16, the load-time repack of Q2_0 (formats/pq2/q20_r16.h), against ggml's Q2_0
 * reference vectors (../shared/testdata/quant, GGUF type 42): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit, dot products with Q8_0 activations as a float64
 * sum over those values does (and as ggml's own dotref with its own activations), the same
 * bits whatever the number of activation rows; the SIMD row must match the scalar row. The
 * checks are tests/support/repack_check.h's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "splash/format.h"
#include "tests/support/formats.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define Q2_BLOCK 18 /* bytes of a Q2_0 block of 64 values: fp16 d, 16 code bytes */

/* Random Q2_0 blocks: random codes (all four, though ggml's quantizer never makes 3),
 * fp16 scales d of either sign with exponent field 5..24 (2^-10 .. 2^9), and one block in
 * 16 with a subnormal fp16 d (exponent field 0). */
static void random_q2_0_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q2_BLOCK) {
        for (int k = 2; k < Q2_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
        const uint16_t d = r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
        q[0] = (uint8_t)d;
        q[1] = (uint8_t)(d >> 8);
    }
}

static const struct test_repack_case q20_r16 = {
    .plain = "Q2_0",
    .repacked = "Q2_0_R16",
    .ref = "q2_0",
    .block_values = 64,
    .block_bytes = Q2_BLOCK,
    .act_type = "Q8_0",
    .random_blocks = random_q2_0_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights and d * q activations, both exact floats, summed in float64). The kernels sum
     * each 32-value Q8_0 block exactly in integers (|sum| <= 32 * 2 * 127, an exact float)
     * and round three times per 64-value block in float: the two Q8_0 blocks' sum
     * isum_0 d_0 + isum_1 d_1 (two roundings, relative 2^-24 of at most the block's
     * sum |w a| / |d_w|) and the running sum's FMA with d_w (2^-24 of a partial sum, itself
     * at most sum |w a|). Over the 16 blocks of a 1024-value row that is below
     * 17 * 3 * 6e-8 = 3e-6 of sum |w a|; the plain rows' different order (or ggml's) stays
     * under the same bound. Indexing or scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the group rows take the same float
     * steps and must be equal; the tail rows are the plain Q2_0 kernels' (the AVX-512 one
     * adds s = d_w d_act times each Q8_0 block's sum into 16 lanes and sums them at the end,
     * the scalar one into one float: two roundings per Q8_0 block, in different orders),
     * each within (nq + 1) * 2 * 6e-8 of the exact value for nq Q8_0 blocks: 3.1e-5 for
     * the 258 blocks of an 8256-value row, 6.2e-5 between the two. */
    .simd_tail_tol = 8e-5,
    .simd_batch_bits = 1,
    .gguf_type_id = 42,
    .dotref = 1,
    .mul_rows_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &q20_r16);
}

static void test_q2_0_r16_descriptor_is_a_repack_of_q2_0(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations */
    assert_string_equal(test_format_find("Q2_0")->act_type, "Q8_0");
}

static void test_q2_0_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_q2_0_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (q2_0.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_q2_0_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void test_q2_0_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2048, 53); /* 32 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8256, 21); /* 129 blocks: tiles of 2 or more rows split K */
}

/* Every row (scalar too) gives each activation row alone the bits it got in batches of 2,
 * 9, 16, 17 and 33: long rows (K chunks, prepared activations on the heap) and a tail. */
static void test_q2_0_r16_batches_give_each_row_its_bits(void **state)
{
    (void)state;
    test_repack_check_batch_bits(8192, 37, 0xB17B175ull);
}

static void test_q2_0_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q2_0_r16_descriptor_is_a_repack_of_q2_0),
        cmocka_unit_test(test_q2_0_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q2_0_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_q2_0_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_q2_0_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q2_0_r16_batches_give_each_row_its_bits),
        cmocka_unit_test(test_q2_0_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
