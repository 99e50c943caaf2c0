/* MXFP4_R16, the load-time repack of MXFP4 (formats/mxfp4/mxfp4_r16.h), against ggml's
 * MXFP4 reference vectors (../shared/testdata/quant, GGUF type 39): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit, dot products with Q8_0 activations as a float64
 * sum over those values does (and as ggml's own dotref with its own activations), the same
 * bits whatever the number of activation rows; the SIMD row must match the scalar row. The checks
 * are tests/support/repack_check.h's. */
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

#define MX_BLOCK 17 /* bytes of an MXFP4 block of 32 values: E8M0 scale, 16 code bytes */

/* Random MXFP4 blocks: random codes, scales 2^(e - 127) for e in [100, 150), and one block
 * in 16 with e in 0..3, whose scales times d are subnormal floats. */
static void random_mxfp4_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += MX_BLOCK) {
        for (int k = 1; k < MX_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        q[0] = r % 16 == 0 ? (uint8_t)(r >> 8 & 3) : (uint8_t)(100 + (r >> 8) % 50);
    }
}

static const struct test_repack_case mxfp4_r16 = {
    .plain = "MXFP4",
    .repacked = "MXFP4_R16",
    .ref = "mxfp4",
    .block_values = 32,
    .block_bytes = MX_BLOCK,
    .act_type = "Q8_0",
    .random_blocks = random_mxfp4_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights and d * q activations, both exact floats, summed in float64). The kernels sum
     * each 32-value block exactly in integers (|sum| < 2^24, an exact float) and round twice
     * per block in float: the scale 2^(e - 128) d (relative 2^-24) and the running sum's FMA
     * (2^-24 of a partial sum, itself at most sum |w a|). Over the 32 blocks of a 1024-value
     * row that is below 33 * 2 * 6e-8 = 4e-6 of sum |w a|; the plain rows' different order
     * (or ggml's) stays under the same bound. Indexing or scale mistakes are O(1e-2) and
     * larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the group rows take the same float
     * steps and must be equal; the tail rows are the plain MXFP4 kernel's, within ~4e-6 of
     * the exact value as above (a 2048-value row: 65 blocks, 8e-6). */
    .simd_tail_tol = 1e-5,
    .gguf_type_id = 39,
    .dotref = 1,
    .mul_rows_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &mxfp4_r16);
}

static void test_mxfp4_r16_descriptor_is_a_repack_of_mxfp4(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations */
    assert_string_equal(test_format_find("MXFP4")->act_type, "Q8_0");
}

static void test_mxfp4_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_mxfp4_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (mxfp4.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_mxfp4_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void test_mxfp4_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2080, 53); /* 65 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8224, 21); /* 257 blocks: tiles of 5 or more rows split the row */
}

static void test_mxfp4_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mxfp4_r16_descriptor_is_a_repack_of_mxfp4),
        cmocka_unit_test(test_mxfp4_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_mxfp4_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_mxfp4_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_mxfp4_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_mxfp4_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
