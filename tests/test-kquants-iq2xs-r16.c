/* IQ2_XS_R16, the load-time repack of IQ2_XS (formats/kquants/iq2xs_r16.h), against ggml's
 * IQ2_XS reference vectors (../shared/testdata/quant, README.md section 5): the reference
 * rows, shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit and dot products with Q8_K activations as a
 * float64 sum over those values does; the SIMD row must match the scalar row, and give
 * every (weight row, activation row) pair the same bits whatever else shares the call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define GROUP 16
#define IQ2XS_BLOCK 74 /* bytes of an IQ2_XS super-block of 256 values */
#define Q8K_BLOCK 292  /* bytes of a Q8_K block: float d, 256 int8, 16 int16 sums */

static int n_ref_rows, n_per_row; /* the reference matrix: 8 rows of 1024 */
static size_t row_bytes;
static uint8_t *ref_q; /* ggml's IQ2_XS blocks (iq2_xs.q) */
static float *ref_deq; /* ggml's to_float of them (iq2_xs.deq.f32) */

static int setup(void **state)
{
    if (test_formats_setup(state))
        return -1;
    char msg[768];
    json_t *index = test_quant_index_load(msg, sizeof msg);
    if (!index) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    n_ref_rows = (int)json_integer_value(json_object_get(index, "n_rows"));
    n_per_row = (int)json_integer_value(json_object_get(index, "n_per_row"));
    json_t *rb =
        json_object_get(json_object_get(json_object_get(index, "types"), "iq2_xs"), "row_bytes");
    row_bytes = (size_t)json_integer_value(rb);
    json_decref(index);
    if (n_ref_rows < 1 || n_per_row % 256 || row_bytes != (size_t)n_per_row / 256 * IQ2XS_BLOCK) {
        fprintf(stderr, "index.json: unexpected iq2_xs geometry\n");
        return -1;
    }
    ref_q = test_quant_load("iq2_xs", "q", (size_t)n_ref_rows * row_bytes, NULL);
    ref_deq = test_quant_load("iq2_xs", "deq.f32", (size_t)n_ref_rows * n_per_row * 4, NULL);
    return 0;
}

static int teardown(void **state)
{
    free(ref_deq);
    free(ref_q);
    return test_formats_teardown(state);
}

/* ---- the test matrix -------------------------------------------------------- */

/* Row i: reference row (5 i + 3) % n_ref_rows with its super-blocks rotated by i: only
 * ggml's blocks, in an order no two neighbouring rows share, and their ggml values. */
static void make_matrix(int64_t n_rows, uint8_t *q, float *deq)
{
    const int nb = n_per_row / 256;
    for (int64_t i = 0; i < n_rows; i++) {
        const int src = (int)((5 * i + 3) % n_ref_rows);
        for (int b = 0; b < nb; b++) {
            const int sb = (int)((b + i) % nb);
            memcpy(q + (size_t)i * row_bytes + (size_t)b * IQ2XS_BLOCK,
                   ref_q + (size_t)src * row_bytes + (size_t)sb * IQ2XS_BLOCK, IQ2XS_BLOCK);
            memcpy(deq + (size_t)i * n_per_row + 256 * b,
                   ref_deq + (size_t)src * n_per_row + 256 * sb, 256 * sizeof(float));
        }
    }
}

/* A Q8_K block's values by its definition: d * q. */
static void q8k_values(const uint8_t *blocks, float *out, int64_t n)
{
    for (int64_t b = 0; b < n / 256; b++, blocks += Q8K_BLOCK) {
        float d;
        memcpy(&d, blocks, 4);
        for (int k = 0; k < 256; k++)
            out[256 * b + k] = d * (float)(int8_t)blocks[4 + k];
    }
}

/* n_act rows of n activations (normal-ish with a few large ones) quantized to Q8_K by
 * the registry's quantizer; af gets their values. */
static uint8_t *make_activations(uint64_t *rng, int64_t n, int64_t n_act, float *af)
{
    const struct splash_format_type *q8k = test_format_find("Q8_K");
    assert_non_null(q8k->from_float);
    float *x = malloc((size_t)n * sizeof(float));
    uint8_t *aq = malloc((size_t)(n / 256) * Q8K_BLOCK * (size_t)n_act);
    assert_non_null(x);
    assert_non_null(aq);
    for (int64_t j = 0; j < n_act; j++) {
        for (int64_t k = 0; k < n; k++) {
            float u = test_splitmix_uniform(rng) + test_splitmix_uniform(rng) +
                      test_splitmix_uniform(rng) - 1.5f;
            x[k] = k % 97 == (j * 7) % 97 ? 40.0f * u : u;
        }
        uint8_t *row = aq + (size_t)j * (size_t)(n / 256) * Q8K_BLOCK;
        q8k->from_float(x, row, n, NULL);
        q8k_values(row, af + j * n, n);
    }
    free(x);
    return aq;
}

/* ---- descriptor ------------------------------------------------------------- */

static void test_iq2xs_r16_descriptor_is_a_repack_of_iq2xs(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("IQ2_XS_R16"),
                                    *p = test_format_find("IQ2_XS");
    assert_true(f->flags & SPLASH_FORMAT_REPACKED);
    assert_int_equal(f->gguf_type, -1);
    assert_int_equal(f->row_group, GROUP);
    assert_int_equal(f->block_elems, GROUP * 256);
    assert_int_equal(f->block_bytes, GROUP * IQ2XS_BLOCK);
    assert_true(f->bits_per_weight == p->bits_per_weight);
    assert_string_equal(f->act_type, "Q8_K");
    assert_non_null(f->rows);
    assert_true(f->n_rows >= 1);
    assert_int_equal(f->rows[f->n_rows - 1].cpu_requires, 0);
    for (uint32_t r = 0; r < f->n_rows; r++)
        assert_non_null(f->rows[r].mul_rows);
    assert_non_null(p->repack_to);
    assert_string_equal(p->repack_to, "IQ2_XS_R16");
    assert_non_null(p->repack);
}

/* ---- layout ----------------------------------------------------------------- */

/* Repacks n_rows rows of the test matrix; to_float of every group block gives ggml's
 * values of its 16 rows bit for bit, and the tail rows are the plain rows' bytes. */
static void check_repack(int64_t n_rows)
{
    const struct splash_format_type *f = test_format_find("IQ2_XS_R16"),
                                    *p = test_format_find("IQ2_XS");
    const size_t bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(bytes), *img = malloc(bytes);
    float *deq = malloc((size_t)n_rows * n_per_row * sizeof(float));
    float *got = malloc((size_t)GROUP * n_per_row * sizeof(float));
    assert_true(q && img && deq && got);
    make_matrix(n_rows, q, deq);
    memset(img, 0xA5, bytes);
    p->repack(n_per_row, q, n_rows, img);
    const int64_t n_groups = n_rows / GROUP, nb = n_per_row / 256;
    size_t bad = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        f->to_float(img + (size_t)g * GROUP * row_bytes, got, GROUP * n_per_row);
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < GROUP; r++)
                for (int k = 0; k < 256; k++) {
                    const float a = got[(i * GROUP + r) * 256 + k];
                    const float b = deq[(g * GROUP + r) * n_per_row + 256 * i + k];
                    if (memcmp(&a, &b, sizeof a)) {
                        if (bad++ < 8)
                            print_error("  %lld rows: group %lld block %lld row %d value %d: "
                                        "%.9g, ggml %.9g\n",
                                        (long long)n_rows, (long long)g, (long long)i, r, k,
                                        (double)a, (double)b);
                    }
                }
    }
    const size_t done = (size_t)n_groups * GROUP * row_bytes;
    if (memcmp(img + done, q + done, bytes - done)) {
        print_error("  %lld rows: the tail rows are not the plain rows\n", (long long)n_rows);
        bad++;
    }
    assert_int_equal(bad, 0);
    free(got);
    free(deq);
    free(img);
    free(q);
}

static void test_iq2xs_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    check_repack(40); /* two groups and a tail of 8 */
    check_repack(19); /* one group and a tail of 3 */
    check_repack(32); /* groups only */
}

/* ---- kernels ---------------------------------------------------------------- */

/* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over ggml's values. ggml's
 * IQ2_XS values d * (0.5 + s) * 0.25 * grid are exact floats (11 + 5 + 6 significant
 * bits), and the kernels sum a super-block's 256 products, times the sub-block scales
 * 2 s + 1, exactly in integers (as ggml does); only then comes float: the conversion of
 * that sum, d * d_a and one product or FMA and add per super-block, and the final 1/8
 * (exact): about 4 roundings per super-block, each at most 2^-24 of terms bounded by
 * sum |w a| (no mins to cancel), and the test's own a = d_a * q rounds once per term, so
 * the difference is below ~1e-6 of sum |w a| for these 4-block rows; the plain kernels
 * are held to the same 1e-5 (test-format-kquants.c). Indexing, sign or scale mistakes
 * are O(1e-2) and larger. */
#define DOT_TOL 1e-5
/* SIMD row against the scalar row on random blocks: both within ~1e-6 of the exact
 * value (as above; the SIMD row differs only in fusing the per-block multiply-add), and
 * in practice within 1e-7 of each other. */
#define SIMD_TOL 1e-6

static const int64_t n_acts[] = {1, 2, 7, 8, 9, 16, 17, 33};
static const int64_t n_ws[] = {16, 32, 40, 19};

static void test_iq2xs_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("IQ2_XS_R16"),
                                    *p = test_format_find("IQ2_XS");
    const int64_t n = n_per_row, max_w = 40, max_act = 33;
    const size_t act_row_bytes = (size_t)(n / 256) * Q8K_BLOCK;
    uint64_t rng = 0x51D0C0DE4B16ull;
    float *af = malloc((size_t)max_act * n * sizeof(float));
    assert_non_null(af);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    float *deq = malloc((size_t)max_w * n * sizeof(float));
    uint8_t *q = malloc((size_t)max_w * row_bytes), *img = malloc((size_t)max_w * row_bytes);
    const size_t out_stride = (size_t)max_w + 3;
    float *out = malloc((size_t)max_act * out_stride * sizeof(float));
    assert_true(deq && q && img && out);
    double worst[8] = {0};
    int checked = 0;
    for (size_t wi = 0; wi < sizeof n_ws / sizeof n_ws[0]; wi++) {
        const int64_t n_w = n_ws[wi];
        /* 16 and 32 rows are the leading groups of the 40-row image (no tail reached) */
        const int64_t n_rows = n_w == 19 ? 19 : 40;
        make_matrix(n_rows, q, deq);
        p->repack(n, q, n_rows, img);
        for (uint32_t ri = 0; ri < f->n_rows; ri++) {
            const struct splash_kernel_row *row = &f->rows[ri];
            if (!test_row_runs_here(row))
                continue;
            for (size_t ai = 0; ai < sizeof n_acts / sizeof n_acts[0]; ai++) {
                const int64_t n_act = n_acts[ai];
                for (size_t k = 0; k < (size_t)max_act * out_stride; k++)
                    out[k] = -12345.0f;
                row->mul_rows(n, img, row_bytes, n_w, aq, act_row_bytes, n_act, out, out_stride);
                for (int64_t j = 0; j < max_act; j++)
                    for (int64_t i = 0; i < (int64_t)out_stride; i++) {
                        const float o = out[j * out_stride + i];
                        if (j >= n_act || i >= n_w) {
                            if (o != -12345.0f)
                                fail_msg("IQ2_XS_R16 %s: n_w %lld n_act %lld wrote out[%lld][%lld]",
                                         row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                         (long long)i);
                            continue;
                        }
                        double ref = 0;
                        for (int64_t k = 0; k < n; k++)
                            ref += (double)deq[i * n + k] * (double)af[j * n + k];
                        const double scale = test_abs_dot(deq + i * n, af + j * n, n);
                        const double e = fabs((double)o - ref) / scale;
                        if (e > worst[ri])
                            worst[ri] = e;
                        if (!(e <= DOT_TOL))
                            fail_msg("IQ2_XS_R16 %s: n_w %lld n_act %lld: dot[%lld][%lld] = %.9g, "
                                     "float64 %.9g (rel %.3g)",
                                     row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                     (long long)i, (double)o, ref, e);
                        checked++;
                    }
                /* the scalar row sums as the plain IQ2_XS reference does: the same bits */
                if (row->cpu_requires == 0 && n_act == 9) {
                    const struct splash_kernel_row *pr = &p->rows[p->n_rows - 1];
                    for (int64_t j = 0; j < n_act; j++)
                        for (int64_t i = 0; i < n_w; i++) {
                            float s;
                            pr->vec_dot(n, &s, q + (size_t)i * row_bytes,
                                        aq + (size_t)j * act_row_bytes);
                            if (memcmp(&s, &out[j * out_stride + i], sizeof s))
                                fail_msg("IQ2_XS_R16 scalar: dot[%lld][%lld] = %.9g, IQ2_XS scalar "
                                         "%.9g",
                                         (long long)j, (long long)i,
                                         (double)out[j * out_stride + i], (double)s);
                        }
                }
            }
        }
    }
    for (uint32_t ri = 0; ri < f->n_rows && ri < 8; ri++)
        if (test_row_runs_here(&f->rows[ri]))
            print_message("  IQ2_XS_R16 %s: worst |dot - float64| / sum|w a| = %.3g\n",
                          f->rows[ri].isa, worst[ri]);
    assert_true(checked > 0);
    free(out);
    free(img);
    free(q);
    free(deq);
    free(aq);
    free(af);
}

/* Random IQ2_XS blocks: random grid indices, signs and scales, d in [1e-4, 1e-2). */
static void random_iq2xs_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += IQ2XS_BLOCK) {
        for (int k = 0; k < IQ2XS_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        uint16_t v = splash_fp32_to_fp16(1e-4f + 1e-2f * test_splitmix_uniform(rng));
        memcpy(q, &v, 2);
    }
}

static void test_iq2xs_r16_simd_rows_match_scalar_and_batch(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("IQ2_XS_R16"),
                                    *p = test_format_find("IQ2_XS");
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    const int64_t n = 2048, n_rows = 53, max_act = 33; /* 3 groups and a tail of 5 */
    const size_t rb = (size_t)(n / 256) * IQ2XS_BLOCK,
                 act_row_bytes = (size_t)(n / 256) * Q8K_BLOCK;
    uint64_t rng = 0x7A11B0A7ull;
    uint8_t *q = malloc((size_t)n_rows * rb), *img = malloc((size_t)n_rows * rb);
    float *wf = malloc((size_t)n_rows * n * sizeof(float));
    float *af = malloc((size_t)max_act * n * sizeof(float));
    float *want = malloc((size_t)max_act * n_rows * sizeof(float));
    float *got = malloc((size_t)max_act * n_rows * sizeof(float));
    float *single = malloc((size_t)n_rows * sizeof(float));
    assert_true(q && img && wf && af && want && got && single);
    random_iq2xs_rows(&rng, q, n_rows * (n / 256));
    p->to_float(q, wf, n_rows * n);
    p->repack(n, q, n_rows, img);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    for (uint32_t ri = 0; ri + 1 < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row)) {
            print_message("  IQ2_XS_R16 %s: not on this CPU, skipped\n", row->isa);
            continue;
        }
        double worst = 0;
        for (int64_t n_act = 1; n_act <= max_act; n_act += n_act < 17 ? 1 : 16) {
            ref->mul_rows(n, img, rb, n_rows, aq, act_row_bytes, n_act, want, n_rows);
            row->mul_rows(n, img, rb, n_rows, aq, act_row_bytes, n_act, got, n_rows);
            for (int64_t j = 0; j < n_act; j++)
                for (int64_t i = 0; i < n_rows; i++) {
                    const double e = fabs((double)got[j * n_rows + i] - want[j * n_rows + i]) /
                                     test_abs_dot(wf + i * n, af + j * n, n);
                    if (e > worst)
                        worst = e;
                    if (!(e <= SIMD_TOL))
                        fail_msg("IQ2_XS_R16 %s: n_act %lld: dot[%lld][%lld] = %.9g, scalar %.9g "
                                 "(rel %.3g)",
                                 row->isa, (long long)n_act, (long long)j, (long long)i,
                                 (double)got[j * n_rows + i], (double)want[j * n_rows + i], e);
                }
            /* each activation row alone gets the bits it got in the batch */
            for (int64_t j = 0; j < n_act; j++) {
                row->mul_rows(n, img, rb, n_rows, aq + (size_t)j * act_row_bytes, act_row_bytes, 1,
                              single, n_rows);
                for (int64_t i = 0; i < n_rows; i++)
                    if (memcmp(&single[i], &got[j * n_rows + i], sizeof(float)))
                        fail_msg("IQ2_XS_R16 %s: n_act %lld: dot[%lld][%lld] = %.9g in the batch, "
                                 "%.9g alone",
                                 row->isa, (long long)n_act, (long long)j, (long long)i,
                                 (double)got[j * n_rows + i], (double)single[i]);
            }
        }
        print_message("  IQ2_XS_R16 %s: worst |simd - scalar| / sum|w a| = %.3g\n", row->isa,
                      worst);
    }
    free(aq);
    free(single);
    free(got);
    free(want);
    free(af);
    free(wf);
    free(img);
    free(q);
}

/* ---- validate --------------------------------------------------------------- */

static void test_iq2xs_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("IQ2_XS_R16"),
                                    *p = test_format_find("IQ2_XS");
    const int64_t n_rows = 40, n_elems = n_rows * n_per_row;
    const size_t bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(bytes), *img = malloc(bytes);
    float *deq = malloc((size_t)n_elems * sizeof(float));
    assert_true(q && img && deq);
    make_matrix(n_rows, q, deq);
    p->repack(n_per_row, q, n_rows, img);
    struct splash_err err = {{0}};
    assert_int_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_int_equal(f->validate(img, bytes - 1, n_elems, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "IQ2_XS_R16"));
    assert_int_equal(f->validate(img, bytes - IQ2XS_BLOCK, n_elems, &err), SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes - GROUP * IQ2XS_BLOCK, n_elems, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes, n_elems - 100, &err), SPLASH_ERR_INVALID);
    free(deq);
    free(img);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iq2xs_r16_descriptor_is_a_repack_of_iq2xs),
        cmocka_unit_test(test_iq2xs_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_iq2xs_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_iq2xs_r16_simd_rows_match_scalar_and_batch),
        cmocka_unit_test(test_iq2xs_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
