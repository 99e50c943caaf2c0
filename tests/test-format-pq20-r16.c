/* PQ2_0_R16, the load-time repack of PQ2_0 (formats/pq2/q20_r16.h, the layout Q2_0_R16
 * shares, with 128-value blocks). No reference blocks exist for PQ2_0 (Prism ML's type 142,
 * which ggml does not define, so ../shared/testdata/quant has none), so unlike
 * test-format-q20-r16.c these checks hold the repacked type to the plain PQ2_0 type on
 * random blocks: to_float of the image must be the plain to_float's values bit for bit,
 * every kernel row's dots must be the float64 dots of those values with the Q8_0
 * activations' values (and the plain scalar vec_dot's) within a rounding tolerance, the
 * same bits whatever the number of activation rows, and the SIMD row the scalar row's bits
 * on whole groups. (The plain PQ2_0 to_float and kernels share Q2_0's code, which
 * test-format-pq2.c holds to ggml's Q2_0 vectors, and PQ2_0's to values worked out by
 * hand.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "splash/format.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define PQ2_VALUES 128 /* values of a PQ2_0 block */
#define PQ2_BLOCK 34   /* its bytes: fp16 d, 32 code bytes */
#define GROUP 16
#define Q8_BLOCK 34 /* bytes of a Q8_0 block of 32 values */
#define MAX_ACT 33
/* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (the plain
 * to_float's weights and the Q8_0 activations' d * q, both exact floats, summed in
 * float64). The kernels sum each 32-value Q8_0 block exactly in integers and round five
 * times per 128-value block in float: the four Q8_0 blocks' sum of isum_h d_h (four
 * roundings, relative 2^-24 of at most the block's sum |w a| / |d_w|) and the running
 * sum's FMA with d_w (2^-24 of a partial sum, at most sum |w a|). Over the 65 blocks of an
 * 8320-value row that is below 66 * 5 * 6e-8 = 2e-5 of sum |w a|; the plain kernels (two
 * roundings per Q8_0 block, 261 for that row: 3.1e-5) stay under the same order, so two
 * results are within 6e-5 of each other. Indexing or scale mistakes are O(1e-2). */
#define DOT_TOL 6e-5

static const struct splash_format_type *plain, *packed;

static int setup(void **state)
{
    if (test_formats_setup(state))
        return -1;
    plain = test_format_find("PQ2_0");
    packed = test_format_find("PQ2_0_R16");
    return 0;
}

/* Random PQ2_0 blocks: random codes, fp16 scales d of either sign with exponent field
 * 5..24 (2^-10 .. 2^9), and one block in 16 with a subnormal fp16 d (exponent field 0). */
static void random_pq2_0_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += PQ2_BLOCK) {
        for (int k = 2; k < PQ2_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
        const uint16_t d = r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
        q[0] = (uint8_t)d;
        q[1] = (uint8_t)(d >> 8);
    }
}

/* A test matrix: n_rows random rows of n values, their plain values (wf), and the image. */
struct matrix {
    int64_t n, n_rows;
    size_t row_bytes;
    uint8_t *q, *img;
    float *wf;
};

static void matrix_make(struct matrix *m, int64_t n, int64_t n_rows, uint64_t seed)
{
    uint64_t rng = seed;
    m->n = n;
    m->n_rows = n_rows;
    m->row_bytes = (size_t)(n / PQ2_VALUES) * PQ2_BLOCK;
    m->q = malloc(m->row_bytes * (size_t)n_rows);
    m->img = malloc(m->row_bytes * (size_t)n_rows);
    m->wf = malloc((size_t)(n * n_rows) * sizeof(float));
    assert_true(m->q && m->img && m->wf);
    random_pq2_0_rows(&rng, m->q, n_rows * (n / PQ2_VALUES));
    plain->to_float(m->q, m->wf, n * n_rows);
    memset(m->img, 0xA5, m->row_bytes * (size_t)n_rows);
    plain->repack(n, m->q, n_rows, m->img);
}

static void matrix_free(struct matrix *m)
{
    free(m->wf);
    free(m->img);
    free(m->q);
}

/* MAX_ACT random Q8_0 activation rows of n values and their values (af). */
static uint8_t *make_activations(int64_t n, uint64_t seed, float *af)
{
    uint64_t rng = seed;
    const size_t arb = (size_t)(n / 32) * Q8_BLOCK;
    uint8_t *aq = malloc(arb * MAX_ACT);
    assert_non_null(aq);
    test_random_q8_0(&rng, aq, MAX_ACT * (n / 32));
    test_q8_0_to_float(aq, af, MAX_ACT * n);
    return aq;
}

static void test_pq2_0_r16_descriptor_is_a_repack_of_pq2_0(void **state)
{
    (void)state;
    assert_true(packed->flags & SPLASH_FORMAT_REPACKED);
    assert_int_equal(packed->gguf_type, -1);
    assert_int_equal(packed->row_group, GROUP);
    assert_int_equal(packed->block_elems, GROUP * PQ2_VALUES);
    assert_int_equal(packed->block_bytes, GROUP * PQ2_BLOCK);
    assert_int_equal(plain->block_bytes, PQ2_BLOCK);
    assert_true(packed->bits_per_weight == plain->bits_per_weight);
    assert_string_equal(packed->act_type, "Q8_0");
    assert_string_equal(plain->act_type, "Q8_0");
    assert_true(packed->n_rows >= 1);
    assert_int_equal(packed->rows[packed->n_rows - 1].cpu_requires, 0);
    for (uint32_t r = 0; r < packed->n_rows; r++)
        assert_non_null(packed->rows[r].mul_rows);
    assert_non_null(plain->repack_to);
    assert_string_equal(plain->repack_to, "PQ2_0_R16");
    assert_non_null(plain->repack);
}

/* to_float of every group block gives the plain to_float's values of its 16 rows, row by
 * row, bit for bit, and the tail rows are the plain rows' bytes. */
static void check_to_float(int64_t n_rows)
{
    const int64_t n = 1024, nb = n / PQ2_VALUES;
    struct matrix m;
    matrix_make(&m, n, n_rows, 0x9D20F10A7ull + (uint64_t)n_rows);
    float *got = malloc((size_t)(GROUP * n) * sizeof(float));
    assert_non_null(got);
    const int64_t n_groups = n_rows / GROUP;
    for (int64_t g = 0; g < n_groups; g++) {
        packed->to_float(m.img + (size_t)g * GROUP * m.row_bytes, got, GROUP * n);
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < GROUP; r++)
                for (int k = 0; k < PQ2_VALUES; k++) {
                    const float a = got[(i * GROUP + r) * PQ2_VALUES + k];
                    const float b = m.wf[(g * GROUP + r) * n + PQ2_VALUES * i + k];
                    if (memcmp(&a, &b, sizeof a))
                        fail_msg("%lld rows: group %lld block %lld row %d value %d: %.9g, "
                                 "PQ2_0 %.9g",
                                 (long long)n_rows, (long long)g, (long long)i, r, k, (double)a,
                                 (double)b);
                }
    }
    const size_t done = (size_t)n_groups * GROUP * m.row_bytes;
    assert_memory_equal(m.img + done, m.q + done, m.row_bytes * (size_t)n_rows - done);
    free(got);
    matrix_free(&m);
}

static void test_pq2_0_r16_to_float_matches_plain_bitwise(void **state)
{
    (void)state;
    check_to_float(40); /* two groups and a tail of 8 */
    check_to_float(19); /* one group and a tail of 3 */
    check_to_float(32); /* groups only */
}

/* Every kernel row on an n x n_rows matrix for n_act 1, 2, 7, 8, 9, 16, 17, 33: every dot
 * within DOT_TOL of the float64 dot and of the plain scalar vec_dot, nothing written
 * outside, each activation row alone the bits it gets in the batch, and (SIMD rows) the
 * scalar row's bits on the group rows. */
static void check_mul_rows(int64_t n, int64_t n_rows, uint64_t seed)
{
    static const int64_t n_acts[] = {1, 2, 7, 8, 9, 16, 17, 33};
    const struct splash_kernel_row *pref = &plain->rows[plain->n_rows - 1],
                                   *ref = &packed->rows[packed->n_rows - 1];
    const int64_t n_full = n_rows / GROUP * GROUP;
    struct matrix m;
    matrix_make(&m, n, n_rows, seed);
    float *af = malloc((size_t)(MAX_ACT * n) * sizeof(float));
    assert_non_null(af);
    uint8_t *aq = make_activations(n, seed ^ 0xAC7ull, af);
    const size_t arb = (size_t)(n / 32) * Q8_BLOCK, out_stride = (size_t)n_rows + 3;
    float *out = malloc((size_t)MAX_ACT * out_stride * sizeof(float));
    float *want = malloc((size_t)MAX_ACT * out_stride * sizeof(float));
    float *one = malloc(out_stride * sizeof(float));
    assert_true(out && want && one);
    for (uint32_t ri = 0; ri < packed->n_rows; ri++) {
        const struct splash_kernel_row *row = &packed->rows[ri];
        if (!test_row_runs_here(row)) {
            print_message("  PQ2_0_R16 %s: not on this CPU, skipped\n", row->isa);
            continue;
        }
        double worst = 0;
        for (size_t ai = 0; ai < sizeof n_acts / sizeof n_acts[0]; ai++) {
            const int64_t n_act = n_acts[ai];
            for (size_t k = 0; k < (size_t)MAX_ACT * out_stride; k++)
                out[k] = -12345.0f;
            row->mul_rows(n, m.img, m.row_bytes, n_rows, aq, arb, n_act, out, out_stride);
            if (row != ref)
                ref->mul_rows(n, m.img, m.row_bytes, n_rows, aq, arb, n_act, want, out_stride);
            for (int64_t j = 0; j < MAX_ACT; j++) {
                if (j < n_act)
                    row->mul_rows(n, m.img, m.row_bytes, n_rows, aq + (size_t)j * arb, arb, 1, one,
                                  out_stride);
                for (int64_t i = 0; i < (int64_t)out_stride; i++) {
                    const float o = out[(size_t)j * out_stride + (size_t)i];
                    if (j >= n_act || i >= n_rows) {
                        if (o != -12345.0f)
                            fail_msg("PQ2_0_R16 %s: n_act %lld wrote out[%lld][%lld]", row->isa,
                                     (long long)n_act, (long long)j, (long long)i);
                        continue;
                    }
                    if (memcmp(&o, &one[i], sizeof o))
                        fail_msg("PQ2_0_R16 %s: n_act %lld: dot[%lld][%lld] = %a, alone %a",
                                 row->isa, (long long)n_act, (long long)j, (long long)i, (double)o,
                                 (double)one[i]);
                    if (row != ref && i < n_full &&
                        memcmp(&o, &want[(size_t)j * out_stride + (size_t)i], sizeof o))
                        fail_msg("PQ2_0_R16 %s: n_act %lld: dot[%lld][%lld] = %a, scalar %a",
                                 row->isa, (long long)n_act, (long long)j, (long long)i, (double)o,
                                 (double)want[(size_t)j * out_stride + (size_t)i]);
                    double exact = 0;
                    for (int64_t k = 0; k < n; k++)
                        exact += (double)m.wf[i * n + k] * (double)af[j * n + k];
                    float p;
                    pref->vec_dot(n, &p, m.q + (size_t)i * m.row_bytes, aq + (size_t)j * arb);
                    const double scale = test_abs_dot(m.wf + i * n, af + j * n, n);
                    const double e = fabs((double)o - exact) / scale,
                                 ep = fabs((double)o - (double)p) / scale;
                    if (e > worst)
                        worst = e;
                    if (!(e <= DOT_TOL) || !(ep <= DOT_TOL))
                        fail_msg("PQ2_0_R16 %s: n_act %lld: dot[%lld][%lld] = %.9g, float64 "
                                 "%.9g (rel %.3g), PQ2_0 scalar %.9g (rel %.3g)",
                                 row->isa, (long long)n_act, (long long)j, (long long)i, (double)o,
                                 exact, e, (double)p, ep);
                }
            }
        }
        print_message("  PQ2_0_R16 %s, %lld x %lld: worst |dot - float64| / sum|w a| = %.3g\n",
                      row->isa, (long long)n_rows, (long long)n, worst);
    }
    free(one);
    free(want);
    free(out);
    free(aq);
    free(af);
    matrix_free(&m);
}

static void test_pq2_0_r16_mul_rows_match_float64_and_plain(void **state)
{
    (void)state;
    check_mul_rows(1024, 16, 0x5EED16ull); /* one group */
    check_mul_rows(1024, 40, 0x5EED40ull); /* two groups and a tail of 8 */
    check_mul_rows(1024, 19, 0x5EED19ull); /* one group and a tail of 3 */
}

/* Longer rows: tiles of 2 or more activation rows split K into chunks (prepared
 * activations on the heap for 9 or more rows), which must continue one sum. */
static void test_pq2_0_r16_long_rows_keep_their_bits(void **state)
{
    (void)state;
    check_mul_rows(8320, 21, 0x10C0ull); /* 65 blocks; one group and a tail of 5 */
}

/* validate accepts an image of 40 rows and refuses it one byte, one block or one group
 * short, or with fewer elements than it holds. */
static void test_pq2_0_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    const int64_t n = 1024, n_rows = 40, n_elems = n * n_rows;
    struct matrix m;
    matrix_make(&m, n, n_rows, 0x7A11DA7Eull);
    const size_t bytes = m.row_bytes * (size_t)n_rows;
    struct splash_err err = {{0}};
    assert_int_equal(packed->validate(m.img, bytes, n_elems, &err), SPLASH_OK);
    assert_int_equal(packed->validate(m.img, bytes - 1, n_elems, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "PQ2_0_R16"));
    assert_int_equal(packed->validate(m.img, bytes - packed->block_bytes, n_elems, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(packed->validate(m.img, bytes - GROUP * packed->block_bytes, n_elems, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(packed->validate(m.img, bytes, n_elems - 100, &err), SPLASH_ERR_INVALID);
    matrix_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pq2_0_r16_descriptor_is_a_repack_of_pq2_0),
        cmocka_unit_test(test_pq2_0_r16_to_float_matches_plain_bitwise),
        cmocka_unit_test(test_pq2_0_r16_mul_rows_match_float64_and_plain),
        cmocka_unit_test(test_pq2_0_r16_long_rows_keep_their_bits),
        cmocka_unit_test(test_pq2_0_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, test_formats_teardown);
}
