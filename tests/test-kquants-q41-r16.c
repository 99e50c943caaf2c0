/* Q4_1_R16, the load-time repack of Q4_1 (formats/kquants/q41_r16.h), against ggml's
 * Q4_1 reference vectors (../shared/testdata/quant, GGUF type 3): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit, dot products with Q8_1 activations as a float64
 * sum over those values does (and as ggml's own dotref with its own activations), the same
 * bits whatever the number of activation rows; the SIMD row must match the scalar row. The
 * checks are tests/support/repack_check.h's, plus validate's NaN check here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define Q41_BLOCK 20 /* bytes of a Q4_1 block of 32 values: fp16 d and m, 16 code bytes */

/* An fp16 of random sign and mantissa with exponent field 5..24 (2^-10 .. 2^9), or, one
 * time in 16, subnormal (exponent field 0). */
static uint16_t random_fp16(uint64_t *rng)
{
    const uint64_t r = test_splitmix64(rng);
    const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
    return r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
}

/* Random Q4_1 blocks: random codes, fp16 d and m of either sign and independent
 * magnitudes (so the minimum's term is sometimes the larger one, sometimes the smaller). */
static void random_q4_1_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q41_BLOCK) {
        for (int k = 4; k < Q41_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint16_t d = random_fp16(rng), m = random_fp16(rng);
        q[0] = (uint8_t)d;
        q[1] = (uint8_t)(d >> 8);
        q[2] = (uint8_t)m;
        q[3] = (uint8_t)(m >> 8);
    }
}

static const struct test_repack_case q41_r16 = {
    .plain = "Q4_1",
    .repacked = "Q4_1_R16",
    .ref = "q4_1",
    .block_values = 32,
    .block_bytes = Q41_BLOCK,
    .act_type = "Q8_1",
    .random_blocks = random_q4_1_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights q d + m and the activations' d_a q_a, summed in float64). The kernels (like
     * Q4_1's own and ggml's) take a block's dot as d d_a sum(q a) + m s_a, where s_a is the
     * Q8_1 block's fp16 of d_a sum(q_a): that rounding (2^-11 relative) moves the dot by up
     * to 2^-11 |m| |s_a| <= 2^-11 |m| sum |a| per block. For ggml's min-max blocks |m| is at
     * most the block's largest |w|, but not bounded by sum |w a|: with the harness's
     * activations (one value in 97 is 40x the others) the worst seen is 1.6e-3 (ggml's own
     * vec_dot is 3.2e-4 off its float64 dotref on its activations, index.json). 5e-3 is 3x
     * that; the float steps themselves add only ~1e-6. The sums are pinned bit for bit by
     * test_q4_1_r16_mul_rows_match_ggml_vec_dot (ggml's own dots), by
     * test_q4_1_r16_rows_give_plain_avx2_bits and by the SIMD = scalar checks. */
    .dot_tol = 5e-3,
    /* SIMD row against the scalar row on random blocks: both take Q4_1's AVX2 kernel's float
     * steps on every row (the SIMD row's tail rows are that kernel): the same bits. */
    .simd_tol = 0,
    .simd_batch_bits = 1,
    .mul_rows_batch_bits = 1,
    .validate_rows = 32, /* whole 16-row blocks only */
    .gguf_type_id = 3,
    .dotref = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &q41_r16);
}

static void test_q4_1_r16_descriptor_is_a_repack_of_q4_1(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations */
    assert_string_equal(test_format_find("Q4_1")->act_type, "Q8_1");
}

static void test_q4_1_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

static void test_q4_1_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (q4_1.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_q4_1_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

/* ggml's Q4_1 reference rows (each in 5 places: 2 groups and a 5-row tail) against ggml's
 * Q8_1 activations: every kernel row gives ggml's own dot (q4_1.dot.f32) bit for bit, since
 * both take the same float steps (q41_r16.h). */
static void test_q4_1_r16_mul_rows_match_ggml_vec_dot(void **state)
{
    (void)state;
    test_repack_check_ggml_dot_bits();
}

/* Random blocks: every kernel row gives the plain Q4_1 row the core would take here (its
 * AVX2 row, when it runs) bit for bit, so repacking a model changes none of its results. */
static void test_q4_1_r16_rows_give_plain_avx2_bits(void **state)
{
    (void)state;
    test_repack_check_plain_row_bits(2080, "avx2", 0x41B175ull); /* 65 blocks */
    test_repack_check_plain_row_bits(8224, "avx2", 0x41B175ull); /* 257 blocks: scales on the heap */
}

static void test_q4_1_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2080, 53); /* 65 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8224,
                                21); /* 257 blocks: the scales of 9 or more rows on the heap */
}

/* Every row (scalar too) gives each activation row alone the bits it got in a batch, on
 * random blocks over rows long enough to be split into K chunks. */
static void test_q4_1_r16_batches_give_the_bits_of_single_rows(void **state)
{
    (void)state;
    test_repack_check_batch_bits(4128, 35, 0x41A1B16ull);
}

static void test_q4_1_r16_validate_refuses_truncated_and_nan(void **state)
{
    (void)state;
    test_repack_check_validate();
    const struct splash_format_type *f = test_format_find("Q4_1_R16");
    size_t bytes;
    int64_t n_elems;
    uint8_t *img = test_repack_image(32, &bytes, &n_elems);
    struct splash_err err = {{0}};
    /* not a whole number of 16-row blocks */
    assert_int_not_equal(f->validate(img, bytes, n_elems - 32, &err), SPLASH_OK);
    /* a NaN m in row 5 of the third block (m follows the 16 d) */
    const uint16_t nan = 0x7E00, inf = 0xFC00;
    uint8_t *blk = img + 2 * f->block_bytes;
    uint16_t keep;
    memcpy(&keep, blk + 32 + 2 * 5, 2);
    memcpy(blk + 32 + 2 * 5, &nan, 2);
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 2"));
    assert_non_null(strstr(err.msg, "m (row 5)"));
    assert_non_null(strstr(err.msg, "NaN"));
    /* an infinite d in row 15 of the first block */
    memcpy(blk + 32 + 2 * 5, &keep, 2);
    memcpy(img + 2 * 15, &inf, 2);
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 0"));
    assert_non_null(strstr(err.msg, "d (row 15)"));
    assert_non_null(strstr(err.msg, "Inf"));
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_1_r16_descriptor_is_a_repack_of_q4_1),
        cmocka_unit_test(test_q4_1_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q4_1_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_q4_1_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_q4_1_r16_mul_rows_match_ggml_vec_dot),
        cmocka_unit_test(test_q4_1_r16_rows_give_plain_avx2_bits),
        cmocka_unit_test(test_q4_1_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q4_1_r16_batches_give_the_bits_of_single_rows),
        cmocka_unit_test(test_q4_1_r16_validate_refuses_truncated_and_nan),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
