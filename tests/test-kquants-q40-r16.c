/* Q4_0_R16, the load-time repack of Q4_0 (formats/kquants/q40_r16.h), against ggml's
 * Q4_0 reference vectors (../shared/testdata/quant, GGUF type 2): the reference rows,
 * shuffled into a matrix with whole groups of 16 rows and a tail, repacked, must give
 * ggml's dequantized values bit for bit, dot products with Q8_0 activations as a float64
 * sum over those values does (and as ggml's own dotref with its own activations), the same
 * bits whatever the number of activation rows; the SIMD row must match the scalar row. */
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
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define GROUP 16
#define Q4_BLOCK 18 /* bytes of a Q4_0 block of 32 values: fp16 d, 16 code bytes */
#define Q8_0_BLOCK 34

static int n_ref_rows, n_per_row; /* the reference matrix: 8 rows of 1024 */
static size_t row_bytes, act_row_bytes;
static uint8_t *ref_q;    /* ggml's Q4_0 blocks (q4_0.q) */
static float *ref_deq;    /* ggml's to_float of them (q4_0.deq.f32) */
static uint8_t *ref_actq; /* ggml's Q8_0 activations (q4_0.actq) */
static float *ref_dotref; /* float64 dots of deq and dequantized actq (q4_0.dotref.f32) */

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
    json_t *t = json_object_get(json_object_get(index, "types"), "q4_0");
    row_bytes = (size_t)json_integer_value(json_object_get(t, "row_bytes"));
    act_row_bytes = (size_t)json_integer_value(json_object_get(t, "act_row_bytes"));
    const int type_id = (int)json_integer_value(json_object_get(t, "ggml_type_id"));
    json_decref(index);
    if (n_ref_rows < 1 || n_per_row % 32 || type_id != 2 ||
        row_bytes != (size_t)n_per_row / 32 * Q4_BLOCK ||
        act_row_bytes != (size_t)n_per_row / 32 * Q8_0_BLOCK) {
        fprintf(stderr, "index.json: unexpected q4_0 geometry\n");
        return -1;
    }
    const size_t nn = (size_t)n_ref_rows * (size_t)n_per_row;
    ref_q = test_quant_load("q4_0", "q", (size_t)n_ref_rows * row_bytes, NULL);
    ref_deq = test_quant_load("q4_0", "deq.f32", nn * 4, NULL);
    ref_actq = test_quant_load("q4_0", "actq", (size_t)n_ref_rows * act_row_bytes, NULL);
    ref_dotref = test_quant_load("q4_0", "dotref.f32", (size_t)n_ref_rows * n_ref_rows * 4, NULL);
    return 0;
}

static int teardown(void **state)
{
    free(ref_dotref);
    free(ref_actq);
    free(ref_deq);
    free(ref_q);
    return test_formats_teardown(state);
}

/* ---- the test matrix -------------------------------------------------------- */

/* Row i: reference row (5 i + 3) % n_ref_rows with its blocks rotated by i: only ggml's
 * blocks, in an order no two neighbouring rows share, and their ggml values. */
static void make_matrix(int64_t n_rows, uint8_t *q, float *deq)
{
    const int nb = n_per_row / 32;
    for (int64_t i = 0; i < n_rows; i++) {
        const int src = (int)((5 * i + 3) % n_ref_rows);
        for (int b = 0; b < nb; b++) {
            const int sb = (int)((b + i) % nb);
            memcpy(q + (size_t)i * row_bytes + (size_t)b * Q4_BLOCK,
                   ref_q + (size_t)src * row_bytes + (size_t)sb * Q4_BLOCK, Q4_BLOCK);
            memcpy(deq + (size_t)i * n_per_row + 32 * b,
                   ref_deq + (size_t)src * n_per_row + 32 * sb, 32 * sizeof(float));
        }
    }
}

/* n_act rows of n activations (normal-ish with a few large ones) quantized to Q8_0 by
 * the registry's quantizer (Q4_0's act_type); af gets their values, d * q. */
static uint8_t *make_activations(uint64_t *rng, int64_t n, int64_t n_act, float *af)
{
    const struct splash_format_type *q8 = test_format_find("Q8_0");
    assert_non_null(q8->from_float);
    float *x = malloc((size_t)n * sizeof(float));
    uint8_t *aq = malloc((size_t)(n / 32) * Q8_0_BLOCK * (size_t)n_act);
    assert_non_null(x);
    assert_non_null(aq);
    for (int64_t j = 0; j < n_act; j++) {
        for (int64_t k = 0; k < n; k++) {
            float u = test_splitmix_uniform(rng) + test_splitmix_uniform(rng) +
                      test_splitmix_uniform(rng) - 1.5f;
            x[k] = k % 97 == (j * 7) % 97 ? 40.0f * u : u;
        }
        uint8_t *row = aq + (size_t)j * (size_t)(n / 32) * Q8_0_BLOCK;
        q8->from_float(x, row, n, NULL);
        test_q8_0_to_float(row, af + j * n, n);
    }
    free(x);
    return aq;
}

/* ---- descriptor ------------------------------------------------------------- */

static void test_q4_0_r16_descriptor_is_a_repack_of_q4_0(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
    assert_true(f->flags & SPLASH_FORMAT_REPACKED);
    assert_int_equal(f->gguf_type, -1);
    assert_int_equal(f->row_group, GROUP);
    assert_int_equal(f->block_elems, GROUP * 32);
    assert_int_equal(f->block_bytes, GROUP * Q4_BLOCK);
    assert_true(f->bits_per_weight == p->bits_per_weight);
    assert_string_equal(f->act_type, p->act_type);
    assert_non_null(f->rows);
    assert_true(f->n_rows >= 1);
    assert_int_equal(f->rows[f->n_rows - 1].cpu_requires, 0);
    for (uint32_t r = 0; r < f->n_rows; r++)
        assert_non_null(f->rows[r].mul_rows);
    assert_non_null(p->repack_to);
    assert_string_equal(p->repack_to, "Q4_0_R16");
    assert_non_null(p->repack);
}

/* ---- layout ----------------------------------------------------------------- */

/* Repacks n_rows rows of the test matrix; to_float of every group block gives ggml's
 * values of its 16 rows bit for bit, and the tail rows are the plain rows' bytes. */
static void check_repack(int64_t n_rows)
{
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
    const size_t bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(bytes), *img = malloc(bytes);
    float *deq = malloc((size_t)n_rows * n_per_row * sizeof(float));
    float *got = malloc((size_t)GROUP * n_per_row * sizeof(float));
    assert_true(q && img && deq && got);
    make_matrix(n_rows, q, deq);
    memset(img, 0xA5, bytes);
    p->repack(n_per_row, q, n_rows, img);
    const int64_t n_groups = n_rows / GROUP, nb = n_per_row / 32;
    size_t bad = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        f->to_float(img + (size_t)g * GROUP * row_bytes, got, GROUP * n_per_row);
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < GROUP; r++)
                for (int k = 0; k < 32; k++) {
                    const float a = got[(i * GROUP + r) * 32 + k];
                    const float b = deq[(g * GROUP + r) * n_per_row + 32 * i + k];
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

static void test_q4_0_r16_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    check_repack(40); /* two groups and a tail of 8 */
    check_repack(19); /* one group and a tail of 3 */
    check_repack(32); /* groups only */
}

/* ---- kernels ---------------------------------------------------------------- */

/* Dot-product tolerance, as a fraction of sum_k |w_k a_k| over the exact values (ggml's
 * weights and d * q activations, both exact floats, summed in float64). The kernels sum
 * each 32-value block exactly in integers (|sum| < 2^24, an exact float) and round twice
 * per block in float: the scale d_w d_act (relative 2^-24) and the running sum's FMA
 * (2^-24 of a partial sum, itself at most sum |w a|). Over the 32 blocks of a 1024-value
 * row that is below 33 * 2 * 6e-8 = 4e-6 of sum |w a|; the plain rows' different order
 * (or ggml's) stays under the same bound. Indexing or scale mistakes are O(1e-2) and
 * larger. */
#define DOT_TOL 1e-5
/* SIMD row against the scalar row on random blocks: the group rows take the same float
 * steps and must be equal; the tail rows are the plain Q4_0 kernel's (two roundings per
 * block as well, in another order), so each is within (nb + 1) * 2 * 6e-8 of the exact
 * value by the bound above: 1.6e-5 for the 257 blocks of an 8224-value row, 3.2e-5
 * between the two. */
#define SIMD_TAIL_TOL 4e-5

static const int64_t n_acts[] = {1, 2, 7, 8, 9, 16, 17, 33};
static const int64_t n_ws[] = {16, 32, 40, 19};

static void test_q4_0_r16_mul_rows_match_float64_reference(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
    const int64_t n = n_per_row, max_w = 40, max_act = 33;
    uint64_t rng = 0x51D0C0DE4B16ull;
    float *af = malloc((size_t)max_act * n * sizeof(float));
    assert_non_null(af);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    float *deq = malloc((size_t)max_w * n * sizeof(float));
    uint8_t *q = malloc((size_t)max_w * row_bytes), *img = malloc((size_t)max_w * row_bytes);
    const size_t out_stride = (size_t)max_w + 3;
    float *out = malloc((size_t)max_act * out_stride * sizeof(float));
    float *one = malloc(out_stride * sizeof(float));
    assert_true(deq && q && img && out && one);
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
                for (int64_t j = 0; j < max_act; j++) {
                    /* activation row j alone: the batch must give it the same bits */
                    if (j < n_act)
                        row->mul_rows(n, img, row_bytes, n_w, aq + (size_t)j * act_row_bytes,
                                      act_row_bytes, 1, one, out_stride);
                    for (int64_t i = 0; i < (int64_t)out_stride; i++) {
                        const float o = out[j * out_stride + i];
                        if (j >= n_act || i >= n_w) {
                            if (o != -12345.0f)
                                fail_msg("Q4_0_R16 %s: n_w %lld n_act %lld wrote "
                                         "out[%lld][%lld]",
                                         row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                         (long long)i);
                            continue;
                        }
                        if (memcmp(&o, &one[i], sizeof o))
                            fail_msg("Q4_0_R16 %s: n_w %lld n_act %lld: dot[%lld][%lld] = %.9g, "
                                     "alone %.9g",
                                     row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                     (long long)i, (double)o, (double)one[i]);
                        double ref = 0;
                        for (int64_t k = 0; k < n; k++)
                            ref += (double)deq[i * n + k] * (double)af[j * n + k];
                        const double scale = test_abs_dot(deq + i * n, af + j * n, n);
                        const double e = fabs((double)o - ref) / scale;
                        if (e > worst[ri])
                            worst[ri] = e;
                        if (!(e <= DOT_TOL))
                            fail_msg("Q4_0_R16 %s: n_w %lld n_act %lld: dot[%lld][%lld] = %.9g, "
                                     "float64 %.9g (rel %.3g)",
                                     row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                     (long long)i, (double)o, ref, e);
                        checked++;
                    }
                }
            }
        }
    }
    for (uint32_t ri = 0; ri < f->n_rows && ri < 8; ri++)
        if (test_row_runs_here(&f->rows[ri]))
            print_message("  Q4_0_R16 %s: worst |dot - float64| / sum|w a| = %.3g\n",
                          f->rows[ri].isa, worst[ri]);
    assert_true(checked > 0);
    free(one);
    free(out);
    free(img);
    free(q);
    free(deq);
    free(aq);
    free(af);
}

/* ggml's own activations (q4_0.actq) against its rows in place (row i of the matrix is
 * reference row i % 8): every row's dot must be ggml's dotref (a float64 sum over ggml's
 * values, rounded to float) within DOT_TOL. */
static void test_q4_0_r16_mul_rows_match_ggml_dotref(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
    const int64_t n = n_per_row, n_rows = 2 * GROUP + 5, n_act = n_ref_rows;
    uint8_t *q = malloc((size_t)n_rows * row_bytes), *img = malloc((size_t)n_rows * row_bytes);
    float *af = malloc((size_t)n_act * n * sizeof(float));
    float *out = malloc((size_t)n_act * n_rows * sizeof(float));
    assert_true(q && img && af && out);
    for (int64_t i = 0; i < n_rows; i++)
        memcpy(q + (size_t)i * row_bytes, ref_q + (size_t)(i % n_ref_rows) * row_bytes, row_bytes);
    test_q8_0_to_float(ref_actq, af, n_act * n);
    p->repack(n, q, n_rows, img);
    for (uint32_t ri = 0; ri < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row))
            continue;
        row->mul_rows(n, img, row_bytes, n_rows, ref_actq, act_row_bytes, n_act, out,
                      (size_t)n_rows);
        double worst = 0;
        for (int64_t j = 0; j < n_act; j++)
            for (int64_t i = 0; i < n_rows; i++) {
                const int64_t src = i % n_ref_rows;
                const double ref = ref_dotref[src * n_ref_rows + j];
                const double scale = test_abs_dot(ref_deq + src * n, af + j * n, n);
                const double e = fabs((double)out[j * n_rows + i] - ref) / scale;
                if (e > worst)
                    worst = e;
                if (!(e <= DOT_TOL))
                    fail_msg("Q4_0_R16 %s: dot[%lld][%lld] = %.9g, ggml dotref %.9g (rel %.3g)",
                             row->isa, (long long)j, (long long)i, (double)out[j * n_rows + i], ref,
                             e);
            }
        print_message("  Q4_0_R16 %s: worst |dot - ggml dotref| / sum|w a| = %.3g\n", row->isa,
                      worst);
    }
    free(out);
    free(af);
    free(img);
    free(q);
}

/* Random Q4_0 blocks: random codes, fp16 scales d of either sign with exponent field
 * 5..24 (2^-10 .. 2^9), and one block in 16 with a subnormal fp16 d (exponent field 0). */
static void random_q4_0_rows(uint64_t *rng, uint8_t *q, int64_t n_blocks)
{
    for (int64_t b = 0; b < n_blocks; b++, q += Q4_BLOCK) {
        for (int k = 2; k < Q4_BLOCK; k++)
            q[k] = (uint8_t)test_splitmix64(rng);
        const uint64_t r = test_splitmix64(rng);
        const uint16_t sign = (uint16_t)((r >> 40 & 1) << 15), mant = (uint16_t)(r >> 8 & 0x3ff);
        const uint16_t d = r % 16 == 0 ? (uint16_t)(sign | mant | 1)
                                       : (uint16_t)(sign | (5 + (r >> 20) % 20) << 10 | mant);
        q[0] = (uint8_t)d;
        q[1] = (uint8_t)(d >> 8);
    }
}

/* n values per row, n_rows rows: the SIMD row against the scalar row for 1..17 and 33
 * activation rows. */
static void check_simd_rows(int64_t n, int64_t n_rows)
{
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    const int64_t max_act = 33;
    const size_t rb = (size_t)(n / 32) * Q4_BLOCK, arb = (size_t)(n / 32) * Q8_0_BLOCK;
    uint64_t rng = 0x7A11B0A7ull;
    uint8_t *q = malloc((size_t)n_rows * rb), *img = malloc((size_t)n_rows * rb);
    float *wf = malloc((size_t)n_rows * n * sizeof(float));
    float *af = malloc((size_t)max_act * n * sizeof(float));
    float *want = malloc((size_t)max_act * n_rows * sizeof(float));
    float *got = malloc((size_t)max_act * n_rows * sizeof(float));
    assert_true(q && img && wf && af && want && got);
    random_q4_0_rows(&rng, q, n_rows * (n / 32));
    p->to_float(q, wf, n_rows * n);
    p->repack(n, q, n_rows, img);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    const int64_t n_full = n_rows / GROUP * GROUP;
    for (uint32_t ri = 0; ri + 1 < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row)) {
            print_message("  Q4_0_R16 %s: not on this CPU, skipped\n", row->isa);
            continue;
        }
        double worst = 0;
        for (int64_t n_act = 1; n_act <= max_act; n_act += n_act < 17 ? 1 : 16) {
            ref->mul_rows(n, img, rb, n_rows, aq, arb, n_act, want, n_rows);
            row->mul_rows(n, img, rb, n_rows, aq, arb, n_act, got, n_rows);
            for (int64_t j = 0; j < n_act; j++)
                for (int64_t i = 0; i < n_rows; i++) {
                    const float g = got[j * n_rows + i], w = want[j * n_rows + i];
                    if (i < n_full) {
                        if (memcmp(&g, &w, sizeof g))
                            fail_msg("Q4_0_R16 %s: n_act %lld: dot[%lld][%lld] = %a, scalar %a",
                                     row->isa, (long long)n_act, (long long)j, (long long)i,
                                     (double)g, (double)w);
                        continue;
                    }
                    const double e = fabs((double)g - w) / test_abs_dot(wf + i * n, af + j * n, n);
                    if (e > worst)
                        worst = e;
                    if (!(e <= SIMD_TAIL_TOL))
                        fail_msg("Q4_0_R16 %s: n_act %lld: tail dot[%lld][%lld] = %.9g, scalar "
                                 "%.9g (rel %.3g)",
                                 row->isa, (long long)n_act, (long long)j, (long long)i, (double)g,
                                 (double)w, e);
                }
        }
        print_message("  Q4_0_R16 %s, %lld x %lld: group rows equal to scalar; tail worst "
                      "rel %.3g\n",
                      row->isa, (long long)n_rows, (long long)n, worst);
    }
    free(aq);
    free(got);
    free(want);
    free(af);
    free(wf);
    free(img);
    free(q);
}

static void test_q4_0_r16_simd_rows_match_scalar(void **state)
{
    (void)state;
    check_simd_rows(2080, 53); /* 65 blocks; 3 groups and a tail of 5 */
    check_simd_rows(8224, 21); /* 257 blocks: tiles of 5 or more rows split the row */
}

/* ---- validate --------------------------------------------------------------- */

static void test_q4_0_r16_validate_refuses_truncated_image(void **state)
{
    (void)state;
    const struct splash_format_type *f = test_format_find("Q4_0_R16"),
                                    *p = test_format_find("Q4_0");
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
    assert_non_null(strstr(err.msg, "Q4_0_R16"));
    assert_int_equal(f->validate(img, bytes - Q4_BLOCK, n_elems, &err), SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes - GROUP * Q4_BLOCK, n_elems, &err), SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes, n_elems - 100, &err), SPLASH_ERR_INVALID);
    free(deq);
    free(img);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_0_r16_descriptor_is_a_repack_of_q4_0),
        cmocka_unit_test(test_q4_0_r16_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_q4_0_r16_mul_rows_match_float64_reference),
        cmocka_unit_test(test_q4_0_r16_mul_rows_match_ggml_dotref),
        cmocka_unit_test(test_q4_0_r16_simd_rows_match_scalar),
        cmocka_unit_test(test_q4_0_r16_validate_refuses_truncated_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
