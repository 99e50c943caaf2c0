/* NVFP4_R16, the load-time repack of NVFP4 (formats/nvfp4/nvfp4_r16.h), against ggml's
 * NVFP4 reference vectors (../shared/testdata/quant, GGUF type 40): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit, dot products with Q8_0 activations as a float64
 * sum over those values does (and as ggml's own dotref with its own activations), the same
 * bits whatever the number of activation rows; the SIMD row must match the scalar row. The
 * checks are tests/support/repack_check.h's; the scale bytes GGUF reads specially (0x7f as
 * 0, bit 7 ignored) are checked here against the values models.md gives them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "splash/format.h"
#include "tests/support/formats.h"
#include "tests/support/repack_check.h"
#include "tests/support/rng.h"

#define NV_BLOCK 36  /* bytes of an NVFP4 block of 64 values: 4 UE4M3 scales, 32 code bytes */
#define NV_VALUES 64 /* values of an NVFP4 block */

/* Random NVFP4 blocks: random codes and scale bytes (any byte is a valid UE4M3 scale as
 * GGUF reads it: 2^-9 .. 480, bit 7 ignored), and one scale in 16 one of the bytes read
 * specially: 0x7f (0), 0xff (480), 0x00, 0x80 (0) or 0x01 (2^-9, subnormal). */
static void random_nvfp4_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    static const uint8_t special[5] = {0x7f, 0xff, 0x00, 0x80, 0x01};
    for (int64_t b = 0; b < n_blocks; b++, q += NV_BLOCK) {
        for (int k = 4; k < NV_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        for (int s = 0; s < 4; s++) {
            const uint64_t r = test_splitmix64(rng);
            q[s] = r % 16 == 0 ? special[(r >> 8) % 5] : (uint8_t)(r >> 16);
        }
    }
}

static const struct test_repack_case nvfp4_r16 = {
    .plain = "NVFP4",
    .repacked = "NVFP4_R16",
    .ref = "nvfp4",
    .block_values = NV_VALUES,
    .block_bytes = NV_BLOCK,
    .act_type = "Q8_0",
    .random_blocks = random_nvfp4_rows,
    /* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
     * weights and d * q activations, both exact floats, summed in float64). The kernels sum
     * each 16-value sub-block exactly in integers and round twice per 32-value Q8_0 block in
     * float: p = fma(i1, w1, i0 w0) (i0 w0 is exact: 15 by 4 significant bits; one rounding,
     * 2^-24 of the block's sum |w a|) and the running sum's FMA (2^-24 of a partial sum, at
     * most sum |w a|). Over the 32 Q8_0 blocks of a 1024-value row that is below 64 * 6e-8 =
     * 3.8e-6 of sum |w a|; the plain AVX-512 tail rows (one FMA per sub-block into 16 lanes,
     * then a 16-lane sum) and ggml's float64 dotref stay under the same bound. Indexing or
     * scale mistakes are O(1e-2) and larger. */
    .dot_tol = 1e-5,
    /* SIMD row against the scalar row on random blocks: the group rows take the same float
     * steps and must be equal; the tail rows are the plain NVFP4 kernel's (one rounding per
     * 16-value sub-block, in another order), so each is within about (n / 16 + 16) * 6e-8 of
     * the exact value: 3.2e-5 for the 8256 values of the longest rows here, 6.4e-5 between
     * the two. */
    .simd_tail_tol = 8e-5,
    .gguf_type_id = 40,
    .dotref = 1,
    .mul_rows_batch_bits = 1,
    .simd_batch_bits = 1,
};

static int setup(void **state)
{
    return test_repack_setup(state, &nvfp4_r16);
}

static void test_nvfp4_r16_descriptor_is_a_repack_of_nvfp4(void **state)
{
    (void)state;
    test_repack_check_descriptor();
    /* the plain type takes the same activations and has the same bits per weight */
    assert_string_equal(test_format_find("NVFP4")->act_type, "Q8_0");
    assert_true(test_format_find("NVFP4_R16")->bits_per_weight == 4.5f);
}

static void test_nvfp4_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    test_repack_check_to_float();
}

/* The scale bytes GGUF's NVFP4 reads specially keep their values through the repack
 * (models.md: 0x7f reads as 0, bit 7 is ignored otherwise): 16 rows of one block whose
 * codes are all 1 (E2M1 0.5) and whose scales are, per row r and sub-block s, one of
 * 0x7f (0), 0xff (480), 0xb8 (bit 7 and 1.0), 0x01 (2^-9), 0x00 (0), 0x7e (448), 0x08
 * (2^-6, the smallest normal) and 0x80 (0). */
static void test_nvfp4_r16_scale_bytes_read_as_gguf(void **state)
{
    (void)state;
    static const uint8_t bytes[8] = {0x7f, 0xff, 0xb8, 0x01, 0x00, 0x7e, 0x08, 0x80};
    static const float value[8] = {0.0f, 480.0f, 1.0f, 0x1p-9f, 0.0f, 448.0f, 0x1p-6f, 0.0f};
    const struct splash_format_type *f = test_format_find("NVFP4_R16"),
                                    *p = test_format_find("NVFP4");
    uint8_t q[16 * NV_BLOCK], img[16 * NV_BLOCK];
    float got[16 * NV_VALUES];
    for (int r = 0; r < 16; r++) {
        for (int s = 0; s < 4; s++)
            q[r * NV_BLOCK + s] = bytes[(r + 3 * s) % 8];
        memset(q + r * NV_BLOCK + 4, 0x11, 32);
    }
    p->repack(NV_VALUES, q, 16, img);
    f->to_float(img, got, 16 * NV_VALUES);
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < NV_VALUES; k++) {
            const float want = 0.5f * value[(r + 3 * (k / 16)) % 8];
            if (got[r * NV_VALUES + k] != want)
                fail_msg("row %d value %d (scale byte 0x%02x): %.9g, want %.9g", r, k,
                         bytes[(r + 3 * (k / 16)) % 8], (double)got[r * NV_VALUES + k],
                         (double)want);
        }
}

static void test_nvfp4_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    test_repack_check_mul_rows();
}

/* ggml's own activations (nvfp4.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within dot_tol. */
static void test_nvfp4_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    test_repack_check_dotref();
}

static void test_nvfp4_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    test_repack_check_simd_rows(2112, 53); /* 33 blocks; 3 groups and a tail of 5 */
    test_repack_check_simd_rows(8256, 21); /* 129 blocks: K chunks, prepared rows on the heap */
}

/* Every row, the scalar one too, gives each activation row alone the bits it got in
 * batches of 2 to 33 rows, over K chunks (65 blocks) and a tail of 5 rows. */
static void test_nvfp4_r16_batch_bits_do_not_depend_on_n_act(void **state)
{
    (void)state;
    test_repack_check_batch_bits(4160, 37, 0x4E5F5034ull);
}

static void test_nvfp4_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    test_repack_check_validate();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvfp4_r16_descriptor_is_a_repack_of_nvfp4),
        cmocka_unit_test(test_nvfp4_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_nvfp4_r16_scale_bytes_read_as_gguf),
        cmocka_unit_test(test_nvfp4_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_nvfp4_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_nvfp4_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_nvfp4_r16_batch_bits_do_not_depend_on_n_act),
        cmocka_unit_test(test_nvfp4_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_repack_teardown);
}
