/* Q5_0_R16, the load-time repack of Q5_0 (formats/kquants/q50_r16.h), against ggml's
 * Q5_0 reference vectors (../shared/testdata/quant, GGUF type 6): the reference rows,
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

#define Q5_BLOCK 22 /* bytes of a Q5_0 block of 32 values: fp16 d, 4 fifth-bit bytes, 16 codes */

/* Random Q5_0 blocks: random codes and fifth bits, fp16 scales d of either sign with
 * exponent field 5..24 (2^-10 .. 2^9), and one block in 16 with a subnormal fp16 d
 * (exponent field 0). */
static void random_q5_0_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q5_BLOCK) {
        for (int k = 2; k < Q5_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
        const uint16_t d = r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
        q[0] = (uint8_t)d;
        q[1] = (uint8_t)(d >> 8);
    }
}

static const struct test_repack_case q50_r16 = {
    .plain = "Q5_0",
    .repacked = "Q5_0_R16",
    .ref = "q5_0",
    .block_values = 32,
    .block_bytes = Q5_BLOCK,
    .act_type = "Q8_0",
    .random_blocks = random_q5_0_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights and d * q activations, both exact floats, summed in float64). The kernels sum
     * each 32-value block exactly in integers (|sum| <= 32 * 16 * 128 < 2^24, an exact
     * float) and round twice per block in float: the scale d_w d_act (relative 2^-24) and
     * the running sum's FMA (2^-24 of a partial sum, itself at most sum |w a|). Over the 32
     * blocks of a 1024-value row that is below 33 * 2 * 6e-8 = 4e-6 of sum |w a|; the plain
     * tail rows' different order (or ggml's) stays under the same bound. Indexing, fifth-bit
     * or scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the group rows take the same float
     * steps and must be equal; the tail rows are the plain Q5_0 AVX2 kernel's (at most two
     * roundings per block as well, in another order), so each is within (nb + 1) * 2 * 6e-8
     * of the exact value by the bound above: 1.6e-5 for the 257 blocks of an 8224-value
     * row, 3.2e-5 between the two. */
    .simd_tail_tol = 4e-5,
    .gguf_type_id = 6,
    .dotref = 1,
    .simd_batch_bits = 1,
    .mul_rows_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &q50_r16);
}

static void test_q5_0_r16_descriptor_is_a_repack_of_q5_0(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations */
    assert_string_equal(test_format_find("Q5_0")->act_type, "Q8_0");
}

static void test_q5_0_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_q5_0_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (q5_0.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_q5_0_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void test_q5_0_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2080, 53); /* 65 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8224, 21); /* 257 blocks: tiles of 5 or more rows split the row */
}

/* Every row, scalar too, gives each activation row alone the bits it got in a batch, over
 * rows long enough (257 blocks) that batches split the row into K chunks. */
static void test_q5_0_r16_batch_bits_do_not_depend_on_n_act(void **state)
{
    (void)state;
    test_repack_check_batch_bits(8224, 37, 0x51D0);
}

static void test_q5_0_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q5_0_r16_descriptor_is_a_repack_of_q5_0),
        cmocka_unit_test(test_q5_0_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q5_0_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_q5_0_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_q5_0_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q5_0_r16_batch_bits_do_not_depend_on_n_act),
        cmocka_unit_test(test_q5_0_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
