/* IQ4_NL_R16, the load-time repack of IQ4_NL (formats/kquants/iq4nl_r16.h), against ggml's
 * IQ4_NL reference vectors (../shared/testdata/quant, GGUF type 20): the reference rows,
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

#define NL_BLOCK 18 /* bytes of an IQ4_NL block of 32 values: fp16 d, 16 code bytes */

/* Random IQ4_NL blocks: random codes, a finite fp16 d of either sign with exponent field
 * 1..29 (2^-14 .. 2^14), and one block in 16 with a subnormal fp16 d. */
static void random_iq4nl_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += NL_BLOCK) {
        for (int k = 2; k < NL_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const unsigned sign = (unsigned)(r >> 20 & 1) << 15, mant = (unsigned)(r >> 8 & 0x3FF);
        const unsigned ex = r % 16 == 0 ? 0 : 1 + (unsigned)(r >> 24) % 29;
        const uint16_t d = (uint16_t)(sign | ex << 10 | (ex ? mant : mant | 1));
        memcpy(q, &d, 2);
    }
}

static const struct test_repack_case iq4nl_r16 = {
    .plain = "IQ4_NL",
    .repacked = "IQ4_NL_R16",
    .ref = "iq4_nl",
    .block_values = 32,
    .block_bytes = NL_BLOCK,
    .act_type = "Q8_0",
    .random_blocks = random_iq4nl_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights and d * q activations, both exact floats, summed in float64). The kernels sum
     * each 32-value block exactly in integers (|sum| < 2^24, an exact float) and round twice
     * per block in float: the scale d * d_act (relative 2^-24) and the running sum's FMA
     * (2^-24 of a partial sum, itself at most sum |w a|). Over the 32 blocks of a 1024-value
     * row that is below 33 * 2 * 6e-8 = 4e-6 of sum |w a|; the plain rows' different order
     * (or ggml's) stays under the same bound. Indexing or scale mistakes are O(1e-2) and
     * larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the group rows take the same float
     * steps and must be equal; the tail rows are the plain IQ4_NL kernel's, within ~4e-6 of
     * the exact value as above (a 2048-value row: 65 blocks, 8e-6). */
    .simd_tail_tol = 1e-5,
    .gguf_type_id = 20,
    .dotref = 1,
    .mul_rows_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &iq4nl_r16);
}

static void test_iq4nl_r16_descriptor_is_a_repack_of_iq4_nl(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations */
    assert_string_equal(test_format_find("IQ4_NL")->act_type, "Q8_0");
}

static void test_iq4nl_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_iq4nl_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (iq4_nl.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_iq4nl_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void test_iq4nl_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2080, 53); /* 65 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8224, 21); /* 257 blocks: tiles of 5 or more rows split the row */
}

static void test_iq4nl_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iq4nl_r16_descriptor_is_a_repack_of_iq4_nl),
        cmocka_unit_test(test_iq4nl_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_iq4nl_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_iq4nl_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_iq4nl_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_iq4nl_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
