/* Q3_K_R16, the load-time 16-row layout of Q3_K: repack and to_float against
 * ggml's reference blocks and their dequantized values
 * (../shared/testdata/quant, README.md section 5), every kernel row's mul_rows
 * against double-precision dot products of those values, the AVX-512 row
 * against the scalar row, and validate. The checks are
 * tests/support/repack_check.h's, with Q3_K_R16's own descriptor values and
 * validate's NaN check here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define Q3K_BLOCK 110

/* Random blocks (every level, scale and sign pattern), d (the last 2 bytes) in
 * [5e-4, 1.5e-3). */
static void random_q3k_blocks(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q3K_BLOCK) {
        for (int k = 0; k < Q3K_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint16_t d = splash_fp32_to_fp16(1e-3f * (0.5f + test_splitmix_uniform(rng)));
        memcpy(q + Q3K_BLOCK - 2, &d, 2);
    }
}

static const struct test_repack_case q3k_r16 = {
    .plain = "Q3_K",
    .repacked = "Q3_K_R16",
    .ref = "q3_K",
    .block_values = 256,
    .block_bytes = Q3K_BLOCK,
    .act_type = "Q8_K",
    .random_blocks = random_q3k_blocks,
    /* Dot products against exact float64 sums of the reference values: both
     * kernels form each (sub-)block's integer sum exactly, so they differ from
     * the exact dot only by float rounding of the scaled sums and their
     * accumulation (a few dozen roundings of 2^-24 of partial sums bounded by
     * sum |w a|) and by the reference dequantization, which rounds (d * scale)
     * * q twice per value (2^-23 relative at most). 1e-5 of sum |w a| is >10x
     * that bound and far below any layout error (a wrong level, scale or row
     * moves a dot by O(1e-2) of sum |w a| or more). */
    .dot_tol = 1e-5,
    /* The AVX-512 row against the scalar row: the same integer sums, float
     * steps in a different order (per sub-block vs per block; the scalar row
     * keeps the block's sum an integer): a few roundings of 2^-24. */
    .simd_tol = 2e-6,
    .scalar_is_plain = 0,
    .simd_batch_bits = 0,
    .validate_rows = 32, /* whole 16-row blocks only */
};

static int setup(void **state)
{
    return test_repack_setup(state, &q3k_r16);
}

static void test_q3k_r16_descriptor_matches_q3k(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    const struct splash_format_type *f = test_format_find("Q3_K_R16");
    assert_float_equal(f->bits_per_weight, 3.4375, 0);
    assert_string_equal(f->rows[f->n_rows - 1].isa, "scalar");
}

/* Whole groups decode to the reference values bit for bit; tail rows stay
 * plain. */
static void test_q3k_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

/* Every kernel row's mul_rows on repacked reference rows against float64 dots.
 */
static void test_q3k_r16_mul_rows_match_reference_dots(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* Random blocks, 3 groups and a tail, longer rows: each SIMD row within 2e-6 of
 * the scalar row. */
static void test_q3k_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd();
}

static void test_q3k_r16_validate_refuses_truncated_and_nan(void **state)
{
    (void)state;
    test_repack_check_validate();
    const struct splash_format_type *f = test_format_find("Q3_K_R16");
    size_t bytes;
    int64_t n_elems;
    uint8_t *img = test_repack_image(32, &bytes, &n_elems);
    struct splash_err err = {{0}};
    /* not a whole number of 16-row blocks */
    assert_int_not_equal(f->validate(img, bytes, n_elems - 256, &err), SPLASH_OK);
    /* a NaN d in row 5 of the third block */
    const uint16_t nan = 0x7E00;
    memcpy(img + 2 * f->block_bytes + f->block_bytes - 32 + 2 * 5, &nan, 2);
    assert_int_not_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "block 2"));
    assert_non_null(strstr(err.msg, "NaN"));
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q3k_r16_descriptor_matches_q3k),
        cmocka_unit_test(test_q3k_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q3k_r16_mul_rows_match_reference_dots),
        cmocka_unit_test(test_q3k_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q3k_r16_validate_refuses_truncated_and_nan),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
