/* The shared checks of a 16-row repacked format (repack_check.h). */
#include "tests/support/repack_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/registry.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

#define GROUP 16

static const struct test_repack_case *rc; /* the group's format */
static int n_ref_rows, n_per_row;         /* the reference matrix: 8 rows of 1024 */
static size_t row_bytes;
static uint8_t *ref_q; /* ggml's blocks (<ref>.q) */
static float *ref_deq; /* ggml's to_float of them (<ref>.deq.f32) */
static size_t ref_act_row_bytes;
static uint8_t *ref_actq; /* with dotref: ggml's activations (<ref>.actq) */
static float *ref_dotref; /* float64 dots of deq and dequantized actq (<ref>.dotref.f32) */

/* The stand-in for reference data ggml has none of: random plain blocks and their
 * plain to_float values, 8 rows of 1024. */
static int load_random_reference(const struct test_repack_case *c)
{
    const struct splash_format_type *p = splash_registry_format_by_name(
        test_formats_registry(), c->plain);
    if (!p || p->block_elems != (uint32_t)c->block_values || p->block_bytes != c->block_bytes) {
        fprintf(stderr, "%s: not registered with %d values in %zu bytes\n", c->plain,
                c->block_values, c->block_bytes);
        return -1;
    }
    n_ref_rows = 8;
    n_per_row = 1024;
    row_bytes = (size_t)(n_per_row / c->block_values) * c->block_bytes;
    ref_q = malloc((size_t)n_ref_rows * row_bytes);
    ref_deq = malloc((size_t)n_ref_rows * n_per_row * sizeof(float));
    if (!ref_q || !ref_deq)
        return -1;
    uint64_t rng = 0x9D20F10A7ull;
    c->random_blocks(&rng, ref_q, (int64_t)n_ref_rows * (n_per_row / c->block_values));
    p->to_float(ref_q, ref_deq, (int64_t)n_ref_rows * n_per_row);
    return 0;
}

int test_repack_load(const struct test_repack_case *c)
{
    rc = c;
    if (!c->ref)
        return load_random_reference(c);
    char msg[768];
    json_t *index = test_quant_index_load(msg, sizeof msg);
    if (!index) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    n_ref_rows = (int)json_integer_value(json_object_get(index, "n_rows"));
    n_per_row = (int)json_integer_value(json_object_get(index, "n_per_row"));
    json_t *rb =
        json_object_get(json_object_get(json_object_get(index, "types"), c->ref), "row_bytes");
    row_bytes = (size_t)json_integer_value(rb);
    const json_t *t = json_object_get(json_object_get(index, "types"), c->ref);
    ref_act_row_bytes = (size_t)json_integer_value(json_object_get(t, "act_row_bytes"));
    const int type_id = (int)json_integer_value(json_object_get(t, "ggml_type_id"));
    json_decref(index);
    const struct splash_format_type *aft =
        splash_registry_format_by_name(test_formats_registry(), c->act_type);
    if (!aft || n_ref_rows < 1 || n_per_row % c->block_values ||
        row_bytes != (size_t)(n_per_row / c->block_values) * c->block_bytes ||
        (c->gguf_type_id && type_id != c->gguf_type_id) ||
        (c->dotref &&
         ref_act_row_bytes != (size_t)(n_per_row / aft->block_elems) * aft->block_bytes)) {
        fprintf(stderr, "index.json: unexpected %s geometry\n", c->ref);
        return -1;
    }
    ref_q = test_quant_load(c->ref, "q", (size_t)n_ref_rows * row_bytes, NULL);
    ref_deq = test_quant_load(c->ref, "deq.f32", (size_t)n_ref_rows * n_per_row * 4, NULL);
    if (c->dotref) {
        ref_actq = test_quant_load(c->ref, "actq", (size_t)n_ref_rows * ref_act_row_bytes, NULL);
        ref_dotref =
            test_quant_load(c->ref, "dotref.f32", (size_t)n_ref_rows * n_ref_rows * 4, NULL);
    }
    return 0;
}

void test_repack_unload(void)
{
    free(ref_dotref);
    free(ref_actq);
    free(ref_deq);
    free(ref_q);
    ref_dotref = NULL;
    ref_actq = NULL;
    ref_deq = NULL;
    ref_q = NULL;
    rc = NULL;
}

/* ---- the test matrix -------------------------------------------------------- */

/* Row i: reference row (5 i + 3) % n_ref_rows with its blocks rotated by i: only ggml's
 * blocks, in an order no two neighbouring rows share, and their ggml values. */
static void make_matrix(int64_t n_rows, uint8_t *q, float *deq)
{
    const int bv = rc->block_values, nb = n_per_row / bv;
    const size_t bb = rc->block_bytes;
    for (int64_t i = 0; i < n_rows; i++) {
        const int src = (int)((5 * i + 3) % n_ref_rows);
        for (int b = 0; b < nb; b++) {
            const int sb = (int)((b + i) % nb);
            memcpy(q + (size_t)i * row_bytes + (size_t)b * bb,
                   ref_q + (size_t)src * row_bytes + (size_t)sb * bb, bb);
            memcpy(deq + (size_t)i * n_per_row + (size_t)bv * b,
                   ref_deq + (size_t)src * n_per_row + (size_t)bv * sb, (size_t)bv * sizeof(float));
        }
    }
}

/* Bytes of a row of n activations. */
static size_t act_row_bytes(int64_t n)
{
    const struct splash_format_type *a = test_format_find(rc->act_type);
    return (size_t)(n / a->block_elems) * a->block_bytes;
}

/* An activation row's values by its type's definition: d * q (Q8_K: float d, 256 int8;
 * Q8_0: fp16 d, 32 int8; Q8_1: fp16 d and s, 32 int8). */
static void act_values(const uint8_t *row, float *out, int64_t n)
{
    if (!strcmp(rc->act_type, "Q8_0")) {
        test_q8_0_to_float(row, out, n);
        return;
    }
    if (!strcmp(rc->act_type, "Q8_1")) {
        /* fp16 d, fp16 s (d * sum(q), a cached sum, not a value), 32 int8: d * q */
        for (int64_t b = 0; b < n / 32; b++, row += 36) {
            const float d = splash_fp16_to_fp32((uint16_t)(row[0] | row[1] << 8));
            for (int k = 0; k < 32; k++)
                out[32 * b + k] = d * (float)(int8_t)row[4 + k];
        }
        return;
    }
    assert_string_equal(rc->act_type, "Q8_K");
    const size_t q8k_block = test_format_find("Q8_K")->block_bytes;
    for (int64_t b = 0; b < n / 256; b++, row += q8k_block) {
        float d;
        memcpy(&d, row, 4);
        for (int k = 0; k < 256; k++)
            out[256 * b + k] = d * (float)(int8_t)row[4 + k];
    }
}

/* n_act rows of n activations (normal-ish with a few large ones) quantized by the
 * registry's quantizer of the activation type; af gets their values. */
static uint8_t *make_activations(uint64_t *rng, int64_t n, int64_t n_act, float *af)
{
    const struct splash_format_type *aft = test_format_find(rc->act_type);
    assert_non_null(aft->from_float);
    const size_t arb = act_row_bytes(n);
    float *x = malloc((size_t)n * sizeof(float));
    uint8_t *aq = malloc(arb * (size_t)n_act);
    assert_non_null(x);
    assert_non_null(aq);
    for (int64_t j = 0; j < n_act; j++) {
        for (int64_t k = 0; k < n; k++) {
            float u = test_splitmix_uniform(rng) + test_splitmix_uniform(rng) +
                      test_splitmix_uniform(rng) - 1.5f;
            x[k] = k % 97 == (j * 7) % 97 ? 40.0f * u : u;
        }
        uint8_t *row = aq + (size_t)j * arb;
        aft->from_float(x, row, n, NULL);
        act_values(row, af + j * n, n);
    }
    free(x);
    return aq;
}

/* ---- descriptor ------------------------------------------------------------- */

void test_repack_check_descriptor(void)
{
    const struct splash_format_type *f = test_format_find(rc->repacked),
                                    *p = test_format_find(rc->plain);
    assert_true(f->flags & SPLASH_FORMAT_REPACKED);
    assert_int_equal(f->gguf_type, -1);
    assert_int_equal(f->row_group, GROUP);
    assert_int_equal(f->block_elems, GROUP * rc->block_values);
    assert_int_equal(f->block_bytes, GROUP * rc->block_bytes);
    assert_true(f->bits_per_weight == p->bits_per_weight);
    if (rc->bits_per_weight)
        assert_true(f->bits_per_weight == rc->bits_per_weight);
    assert_string_equal(f->act_type, rc->act_type);
    assert_string_equal(p->act_type, rc->act_type); /* the plain type takes the same */
    assert_non_null(f->rows);
    assert_true(f->n_rows >= 1);
    assert_int_equal(f->rows[f->n_rows - 1].cpu_requires, 0);
    assert_string_equal(f->rows[f->n_rows - 1].isa, "scalar");
    for (uint32_t r = 0; r < f->n_rows; r++)
        assert_non_null(f->rows[r].mul_rows);
    assert_non_null(p->repack_to);
    assert_string_equal(p->repack_to, rc->repacked);
    assert_non_null(p->repack);
}

/* ---- layout ----------------------------------------------------------------- */

/* Repacks n_rows rows of the test matrix; to_float of every group block gives ggml's
 * values of its 16 rows bit for bit, and the tail rows are the plain rows' bytes. */
static void check_repack(int64_t n_rows)
{
    const struct splash_format_type *f = test_format_find(rc->repacked),
                                    *p = test_format_find(rc->plain);
    const int bv = rc->block_values;
    const size_t bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(bytes), *img = malloc(bytes);
    float *deq = malloc((size_t)n_rows * n_per_row * sizeof(float));
    float *got = malloc((size_t)GROUP * n_per_row * sizeof(float));
    assert_true(q && img && deq && got);
    make_matrix(n_rows, q, deq);
    memset(img, 0xA5, bytes);
    p->repack(n_per_row, q, n_rows, img);
    const int64_t n_groups = n_rows / GROUP, nb = n_per_row / bv;
    size_t bad = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        f->to_float(img + (size_t)g * GROUP * row_bytes, got, GROUP * n_per_row);
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < GROUP; r++)
                for (int k = 0; k < bv; k++) {
                    const float a = got[(i * GROUP + r) * bv + k];
                    const float b = deq[(g * GROUP + r) * n_per_row + bv * i + k];
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

void test_repack_check_to_float(void)
{
    check_repack(40); /* two groups and a tail of 8 */
    check_repack(19); /* one group and a tail of 3 */
    check_repack(32); /* groups only */
}

/* ---- kernels ---------------------------------------------------------------- */

static const int64_t n_acts[] = {1, 2, 7, 8, 9, 16, 17, 33};
static const int64_t n_ws[] = {16, 32, 40, 19};

/* With plain_tol: the dot o of plain row w and activation row a within plain_tol of
 * sum |w a| (scale) of the plain scalar row's vec_dot. */
static void check_near_plain(const struct splash_kernel_row *row, int64_t n, const uint8_t *w,
                             const uint8_t *a, float o, double scale, int64_t i, int64_t j)
{
    const struct splash_format_type *p = test_format_find(rc->plain);
    float s;
    p->rows[p->n_rows - 1].vec_dot(n, &s, w, a);
    const double e = fabs((double)o - (double)s) / scale;
    if (!(e <= rc->plain_tol))
        fail_msg("%s %s: n %lld: dot[%lld][%lld] = %.9g, %s scalar %.9g (rel %.3g)", rc->repacked,
                 row->isa, (long long)n, (long long)j, (long long)i, (double)o, rc->plain,
                 (double)s, e);
}

void test_repack_check_mul_rows(void)
{
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const int64_t n = n_per_row, max_w = 40, max_act = 33;
    const size_t arb = act_row_bytes(n);
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
    /* the float64 dots and sum |w a| of every pair, once per matrix */
    double *exact = malloc((size_t)(max_act * max_w) * sizeof *exact);
    double *scales = malloc((size_t)(max_act * max_w) * sizeof *scales);
    assert_true(exact && scales);
    for (size_t wi = 0; wi < sizeof n_ws / sizeof n_ws[0]; wi++) {
        const int64_t n_w = n_ws[wi];
        /* 16 and 32 rows are the leading groups of the 40-row image (no tail reached) */
        const int64_t n_rows = n_w == 19 ? 19 : 40;
        make_matrix(n_rows, q, deq);
        p->repack(n, q, n_rows, img);
        for (int64_t j = 0; j < max_act; j++)
            for (int64_t i = 0; i < n_w; i++) {
                double e = 0;
                for (int64_t k = 0; k < n; k++)
                    e += (double)deq[i * n + k] * (double)af[j * n + k];
                exact[j * max_w + i] = e;
                scales[j * max_w + i] = test_abs_dot(deq + i * n, af + j * n, n);
            }
        for (uint32_t ri = 0; ri < f->n_rows; ri++) {
            const struct splash_kernel_row *row = &f->rows[ri];
            if (!test_row_runs_here(row))
                continue;
            for (size_t ai = 0; ai < sizeof n_acts / sizeof n_acts[0]; ai++) {
                const int64_t n_act = n_acts[ai];
                for (size_t k = 0; k < (size_t)max_act * out_stride; k++)
                    out[k] = -12345.0f;
                row->mul_rows(n, img, row_bytes, n_w, aq, arb, n_act, out, out_stride);
                for (int64_t j = 0; j < max_act; j++) {
                    /* activation row j alone: the batch must give it the same bits */
                    const int alone = rc->mul_rows_batch_bits && j < n_act;
                    if (alone)
                        row->mul_rows(n, img, row_bytes, n_w, aq + (size_t)j * arb, arb, 1, one,
                                      out_stride);
                    for (int64_t i = 0; i < (int64_t)out_stride; i++) {
                        const float o = out[j * out_stride + i];
                        if (j >= n_act || i >= n_w) {
                            if (o != -12345.0f)
                                fail_msg("%s %s: n_w %lld n_act %lld wrote out[%lld][%lld]", name,
                                         row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                         (long long)i);
                            continue;
                        }
                        if (alone && memcmp(&o, &one[i], sizeof o))
                            fail_msg("%s %s: n_w %lld n_act %lld: dot[%lld][%lld] = %.9g, "
                                     "alone %.9g",
                                     name, row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                     (long long)i, (double)o, (double)one[i]);
                        const double ref = exact[j * max_w + i], scale = scales[j * max_w + i];
                        const double e = fabs((double)o - ref) / scale;
                        if (ri < 8 && e > worst[ri])
                            worst[ri] = e;
                        if (!(e <= rc->dot_tol))
                            fail_msg("%s %s: n_w %lld n_act %lld: dot[%lld][%lld] = %.9g, "
                                     "float64 %.9g (rel %.3g)",
                                     name, row->isa, (long long)n_w, (long long)n_act, (long long)j,
                                     (long long)i, (double)o, ref, e);
                        if (rc->plain_tol > 0)
                            check_near_plain(row, n, q + (size_t)i * row_bytes,
                                             aq + (size_t)j * arb, o, scale, i, j);
                        checked++;
                    }
                }
                /* the scalar row sums as the plain reference does: the same bits */
                if (rc->scalar_is_plain && row->cpu_requires == 0 && n_act == 9) {
                    const struct splash_kernel_row *pr = &p->rows[p->n_rows - 1];
                    for (int64_t j = 0; j < n_act; j++)
                        for (int64_t i = 0; i < n_w; i++) {
                            float s;
                            pr->vec_dot(n, &s, q + (size_t)i * row_bytes, aq + (size_t)j * arb);
                            if (memcmp(&s, &out[j * out_stride + i], sizeof s))
                                fail_msg("%s scalar: dot[%lld][%lld] = %.9g, %s scalar %.9g", name,
                                         (long long)j, (long long)i,
                                         (double)out[j * out_stride + i], rc->plain, (double)s);
                        }
                }
            }
        }
    }
    for (uint32_t ri = 0; ri < f->n_rows && ri < 8; ri++)
        if (test_row_runs_here(&f->rows[ri]))
            print_message("  %s %s: worst |dot - float64| / sum|w a| = %.3g\n", name,
                          f->rows[ri].isa, worst[ri]);
    assert_true(checked > 0);
    free(scales);
    free(exact);
    free(one);
    free(out);
    free(img);
    free(q);
    free(deq);
    free(aq);
    free(af);
}

void test_repack_check_simd(void)
{
    test_repack_check_simd_rows(2048, 53); /* 3 groups and a tail of 5 */
}

/* With simd_rows_exact: the float64 dot of every (weight row i, activation row j) pair at
 * exact[j * n_rows + i] and the plain scalar row's at plain[...] (with plain_tol), once for
 * all batch sizes. */
static void exact_dots(int64_t n, int64_t n_rows, int64_t n_act, const uint8_t *q, size_t rb,
                       const float *wf, const uint8_t *aq, size_t arb, const float *af,
                       double *exact, float *plain)
{
    const struct splash_format_type *p = test_format_find(rc->plain);
    for (int64_t j = 0; j < n_act; j++)
        for (int64_t i = 0; i < n_rows; i++) {
            double e = 0;
            for (int64_t k = 0; k < n; k++)
                e += (double)wf[i * n + k] * (double)af[j * n + k];
            exact[j * n_rows + i] = e;
            if (rc->plain_tol > 0)
                p->rows[p->n_rows - 1].vec_dot(n, &plain[j * n_rows + i], q + (size_t)i * rb,
                                               aq + (size_t)j * arb);
        }
}

/* With simd_rows_exact: every dot of row's output (stride os) within dot_tol of the
 * float64 dot and, with plain_tol, of the plain scalar row. */
static void check_exact(const struct splash_kernel_row *row, int64_t n, int64_t n_rows,
                        int64_t n_act, const float *out, size_t os, const double *exact,
                        const double *scale, const float *plain)
{
    for (int64_t j = 0; j < n_act; j++)
        for (int64_t i = 0; i < n_rows; i++) {
            const float o = out[(size_t)j * os + (size_t)i];
            const size_t k = (size_t)(j * n_rows + i);
            const double e = fabs((double)o - exact[k]) / scale[k];
            const double ep = fabs((double)o - (double)plain[k]) / scale[k];
            if (!(e <= rc->dot_tol) || (rc->plain_tol > 0 && !(ep <= rc->plain_tol)))
                fail_msg("%s %s: n %lld n_act %lld: dot[%lld][%lld] = %.9g, float64 %.9g (rel "
                         "%.3g), %s scalar %.9g (rel %.3g)",
                         rc->repacked, row->isa, (long long)n, (long long)n_act, (long long)j,
                         (long long)i, (double)o, exact[k], e, rc->plain, (double)plain[k], ep);
        }
}

void test_repack_check_simd_rows(int64_t n, int64_t n_rows)
{
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
    const int64_t max_act = 33, n_full = n_rows / GROUP * GROUP;
    const double tol = rc->simd_tail_tol > 0 ? rc->simd_tail_tol : rc->simd_tol;
    const int64_t nb = n / rc->block_values;
    const size_t rb = (size_t)nb * rc->block_bytes, arb = act_row_bytes(n);
    const size_t os = (size_t)n_rows + 3; /* 3 columns no row may write */
    uint64_t rng = 0x7A11B0A7ull;
    uint8_t *q = malloc((size_t)n_rows * rb), *img = malloc((size_t)n_rows * rb);
    float *wf = malloc((size_t)n_rows * n * sizeof(float));
    float *af = malloc((size_t)max_act * n * sizeof(float));
    float *want = malloc((size_t)max_act * os * sizeof(float));
    float *got = malloc((size_t)max_act * os * sizeof(float));
    float *single = malloc(os * sizeof(float));
    assert_true(q && img && wf && af && want && got && single);
    rc->random_blocks(&rng, q, n_rows * nb);
    p->to_float(q, wf, n_rows * n);
    p->repack(n, q, n_rows, img);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    /* sum |w a| of every pair (and, when exact, its float64 and plain dots) once */
    double *exact = NULL, *scale = malloc((size_t)(max_act * n_rows) * sizeof *scale);
    float *plain = NULL;
    assert_non_null(scale);
    for (int64_t j = 0; j < max_act; j++)
        for (int64_t i = 0; i < n_rows; i++)
            scale[j * n_rows + i] = test_abs_dot(wf + i * n, af + j * n, n);
    if (rc->simd_rows_exact) {
        exact = malloc((size_t)(max_act * n_rows) * sizeof *exact);
        plain = calloc((size_t)(max_act * n_rows), sizeof *plain);
        assert_true(exact && plain);
        exact_dots(n, n_rows, max_act, q, rb, wf, aq, arb, af, exact, plain);
        for (int64_t n_act = 1; n_act <= max_act; n_act += n_act < 17 ? 1 : 16) {
            ref->mul_rows(n, img, rb, n_rows, aq, arb, n_act, want, os);
            check_exact(ref, n, n_rows, n_act, want, os, exact, scale, plain);
        }
    }
    for (uint32_t ri = 0; ri + 1 < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row)) {
            print_message("  %s %s: not on this CPU, skipped\n", name, row->isa);
            continue;
        }
        double worst = 0;
        for (int64_t n_act = 1; n_act <= max_act; n_act += n_act < 17 ? 1 : 16) {
            for (size_t k = 0; k < (size_t)max_act * os; k++)
                got[k] = -12345.0f;
            ref->mul_rows(n, img, rb, n_rows, aq, arb, n_act, want, os);
            row->mul_rows(n, img, rb, n_rows, aq, arb, n_act, got, os);
            for (int64_t j = 0; j < max_act; j++)
                for (int64_t i = 0; i < (int64_t)os; i++) {
                    const float g = got[(size_t)j * os + (size_t)i],
                                w = want[(size_t)j * os + (size_t)i];
                    if (j >= n_act || i >= n_rows) {
                        if (g != -12345.0f)
                            fail_msg("%s %s: n_act %lld wrote out[%lld][%lld]", name, row->isa,
                                     (long long)n_act, (long long)j, (long long)i);
                        continue;
                    }
                    if (rc->simd_tail_tol > 0 && i < n_full) {
                        /* group rows: the scalar row's float steps, the same bits */
                        if (memcmp(&g, &w, sizeof(float)))
                            fail_msg("%s %s: n_act %lld: dot[%lld][%lld] = %a, scalar %a", name,
                                     row->isa, (long long)n_act, (long long)j, (long long)i,
                                     (double)g, (double)w);
                        continue;
                    }
                    const double e = fabs((double)g - w) / scale[j * n_rows + i];
                    if (e > worst)
                        worst = e;
                    if (!(e <= tol))
                        fail_msg("%s %s: n_act %lld: dot[%lld][%lld] = %.9g, scalar %.9g "
                                 "(rel %.3g)",
                                 name, row->isa, (long long)n_act, (long long)j, (long long)i,
                                 (double)g, (double)w, e);
                }
            if (rc->simd_rows_exact)
                check_exact(row, n, n_rows, n_act, got, os, exact, scale, plain);
            if (!rc->simd_batch_bits)
                continue;
            /* each activation row alone gets the bits it got in the batch */
            for (int64_t j = 0; j < n_act; j++) {
                row->mul_rows(n, img, rb, n_rows, aq + (size_t)j * arb, arb, 1, single, os);
                for (int64_t i = 0; i < n_rows; i++)
                    if (memcmp(&single[i], &got[(size_t)j * os + (size_t)i], sizeof(float)))
                        fail_msg("%s %s: n_act %lld: dot[%lld][%lld] = %.9g in the batch, "
                                 "%.9g alone",
                                 name, row->isa, (long long)n_act, (long long)j, (long long)i,
                                 (double)got[(size_t)j * os + (size_t)i], (double)single[i]);
            }
        }
        print_message("  %s %s, %lld x %lld: worst |simd - scalar| / sum|w a| = %.3g%s\n", name,
                      row->isa, (long long)n_rows, (long long)n, worst,
                      rc->simd_tail_tol > 0 ? " (tail rows; group rows equal)" : "");
    }
    free(plain);
    free(scale);
    free(exact);
    free(aq);
    free(single);
    free(got);
    free(want);
    free(af);
    free(wf);
    free(img);
    free(q);
}

void test_repack_check_batch_bits(int64_t n, int64_t n_rows, uint64_t seed, const int64_t *batches)
{
    static const int64_t default_batches[] = {2, 9, 16, 23, 0};
    if (!batches || !batches[0])
        batches = default_batches;
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const int64_t max_act = 33, nb = n / rc->block_values;
    const size_t rb = (size_t)nb * rc->block_bytes, arb = act_row_bytes(n);
    uint64_t rng = seed;
    uint8_t *q = malloc((size_t)n_rows * rb), *img = malloc((size_t)n_rows * rb);
    float *af = malloc((size_t)max_act * n * sizeof(float));
    float *all = malloc((size_t)max_act * n_rows * sizeof(float));
    float *one = malloc((size_t)n_rows * sizeof(float));
    assert_true(q && img && af && all && one);
    rc->random_blocks(&rng, q, n_rows * nb);
    p->repack(n, q, n_rows, img);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    for (uint32_t ri = 0; ri < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row))
            continue;
        for (size_t bi = 0; batches[bi]; bi++) {
            const int64_t n_act = batches[bi];
            assert_true(n_act <= max_act);
            row->mul_rows(n, img, rb, n_rows, aq, arb, n_act, all, n_rows);
            for (int64_t j = 0; j < n_act; j++) {
                row->mul_rows(n, img, rb, n_rows, aq + (size_t)j * arb, arb, 1, one, n_rows);
                for (int64_t i = 0; i < n_rows; i++)
                    if (memcmp(&one[i], &all[j * n_rows + i], sizeof(float)))
                        fail_msg("%s %s: n_act %lld: dot[%lld][%lld] = %.9g, alone %.9g", name,
                                 row->isa, (long long)n_act, (long long)j, (long long)i,
                                 (double)all[j * n_rows + i], (double)one[i]);
            }
        }
    }
    free(aq);
    free(one);
    free(all);
    free(af);
    free(img);
    free(q);
}

/* Random blocks (n values x 53 rows: 3 groups and a tail of 5): every kernel row gives
 * the plain type's row of isa `plain_isa` bit for bit, for n_act 1 .. 17 and 33. */
void test_repack_check_plain_row_bits(int64_t n, const char *plain_isa, uint64_t seed)
{
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const struct splash_kernel_row *plain = NULL;
    for (uint32_t i = 0; i < p->n_rows; i++)
        if (!strcmp(p->rows[i].isa, plain_isa))
            plain = &p->rows[i];
    if (!plain || !test_row_runs_here(plain)) {
        print_message("  %s %s row: not on this CPU, skipped\n", rc->plain, plain_isa);
        return;
    }
    const int64_t n_rows = 53, max_act = 33, nb = n / rc->block_values;
    const size_t rb = (size_t)nb * rc->block_bytes, arb = act_row_bytes(n);
    uint64_t rng = seed;
    uint8_t *q = malloc((size_t)n_rows * rb), *img = malloc((size_t)n_rows * rb);
    float *af = malloc((size_t)max_act * n * sizeof(float));
    float *want = malloc((size_t)max_act * n_rows * sizeof(float));
    float *got = malloc((size_t)max_act * n_rows * sizeof(float));
    assert_true(q && img && af && want && got);
    rc->random_blocks(&rng, q, n_rows * nb);
    p->repack(n, q, n_rows, img);
    uint8_t *aq = make_activations(&rng, n, max_act, af);
    for (uint32_t ri = 0; ri < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row))
            continue;
        for (int64_t n_act = 1; n_act <= max_act; n_act += n_act < 17 ? 1 : 16) {
            plain->mul_rows(n, q, rb, n_rows, aq, arb, n_act, want, n_rows);
            row->mul_rows(n, img, rb, n_rows, aq, arb, n_act, got, n_rows);
            for (int64_t k = 0; k < n_act * n_rows; k++)
                if (memcmp(&got[k], &want[k], sizeof(float)))
                    fail_msg("%s %s: n %lld n_act %lld: dot[%lld][%lld] = %a, %s %s %a", name,
                             row->isa, (long long)n, (long long)n_act, (long long)(k / n_rows),
                             (long long)(k % n_rows), (double)got[k], rc->plain, plain_isa,
                             (double)want[k]);
        }
    }
    free(aq);
    free(got);
    free(want);
    free(af);
    free(img);
    free(q);
}

/* ---- ggml's own activations ------------------------------------------------ */

void test_repack_check_dotref(void)
{
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const int64_t n = n_per_row, n_rows = 2 * GROUP + 5, n_act = n_ref_rows;
    assert_non_null(ref_actq);
    assert_non_null(ref_dotref);
    uint8_t *q = malloc((size_t)n_rows * row_bytes), *img = malloc((size_t)n_rows * row_bytes);
    float *af = malloc((size_t)n_act * n * sizeof(float));
    float *out = malloc((size_t)n_act * n_rows * sizeof(float));
    assert_true(q && img && af && out);
    for (int64_t i = 0; i < n_rows; i++)
        memcpy(q + (size_t)i * row_bytes, ref_q + (size_t)(i % n_ref_rows) * row_bytes, row_bytes);
    for (int64_t j = 0; j < n_act; j++)
        act_values(ref_actq + (size_t)j * ref_act_row_bytes, af + j * n, n);
    p->repack(n, q, n_rows, img);
    for (uint32_t ri = 0; ri < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row))
            continue;
        row->mul_rows(n, img, row_bytes, n_rows, ref_actq, ref_act_row_bytes, n_act, out,
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
                if (!(e <= rc->dot_tol))
                    fail_msg("%s %s: dot[%lld][%lld] = %.9g, ggml dotref %.9g (rel %.3g)", name,
                             row->isa, (long long)j, (long long)i, (double)out[j * n_rows + i], ref,
                             e);
            }
        print_message("  %s %s: worst |dot - ggml dotref| / sum|w a| = %.3g\n", name, row->isa,
                      worst);
    }
    free(out);
    free(af);
    free(img);
    free(q);
}

void test_repack_check_ggml_dot_bits(void)
{
    const char *name = rc->repacked;
    const struct splash_format_type *f = test_format_find(name), *p = test_format_find(rc->plain);
    const int64_t n = n_per_row, n_rows = 2 * GROUP + 5, n_act = n_ref_rows;
    assert_non_null(ref_actq);
    float *dot =
        test_quant_load(rc->ref, "dot.f32", (size_t)n_ref_rows * n_ref_rows * sizeof(float), NULL);
    uint8_t *q = malloc((size_t)n_rows * row_bytes), *img = malloc((size_t)n_rows * row_bytes);
    float *out = malloc((size_t)n_act * n_rows * sizeof(float));
    assert_true(dot && q && img && out);
    for (int64_t i = 0; i < n_rows; i++)
        memcpy(q + (size_t)i * row_bytes, ref_q + (size_t)(i % n_ref_rows) * row_bytes, row_bytes);
    p->repack(n, q, n_rows, img);
    for (uint32_t ri = 0; ri < f->n_rows; ri++) {
        const struct splash_kernel_row *row = &f->rows[ri];
        if (!test_row_runs_here(row))
            continue;
        row->mul_rows(n, img, row_bytes, n_rows, ref_actq, ref_act_row_bytes, n_act, out,
                      (size_t)n_rows);
        for (int64_t j = 0; j < n_act; j++)
            for (int64_t i = 0; i < n_rows; i++) {
                const float want = dot[(i % n_ref_rows) * n_ref_rows + j];
                if (memcmp(&out[j * n_rows + i], &want, sizeof(float)))
                    fail_msg("%s %s: dot[%lld][%lld] = %a, ggml vec_dot %a", name, row->isa,
                             (long long)j, (long long)i, (double)out[j * n_rows + i],
                             (double)want);
            }
    }
    free(out);
    free(img);
    free(q);
    free(dot);
}

/* ---- validate --------------------------------------------------------------- */

uint8_t *test_repack_image(int64_t n_rows, size_t *bytes, int64_t *n_elems)
{
    const struct splash_format_type *p = test_format_find(rc->plain);
    *n_elems = n_rows * n_per_row;
    *bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(*bytes), *img = malloc(*bytes);
    float *deq = malloc((size_t)*n_elems * sizeof(float));
    assert_true(q && img && deq);
    make_matrix(n_rows, q, deq);
    p->repack(n_per_row, q, n_rows, img);
    free(deq);
    free(q);
    return img;
}

void test_repack_check_validate(void)
{
    const struct splash_format_type *f = test_format_find(rc->repacked),
                                    *p = test_format_find(rc->plain);
    const int64_t n_rows = rc->validate_rows ? rc->validate_rows : 40, n_elems = n_rows * n_per_row;
    const size_t bytes = (size_t)n_rows * row_bytes;
    uint8_t *q = malloc(bytes), *img = malloc(bytes);
    float *deq = malloc((size_t)n_elems * sizeof(float));
    assert_true(q && img && deq);
    make_matrix(n_rows, q, deq);
    p->repack(n_per_row, q, n_rows, img);
    struct splash_err err = {{0}};
    assert_int_equal(f->validate(img, bytes, n_elems, &err), SPLASH_OK);
    assert_int_equal(f->validate(img, bytes - 1, n_elems, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, rc->repacked));
    assert_int_equal(f->validate(img, bytes - rc->block_bytes, n_elems, &err), SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes - GROUP * rc->block_bytes, n_elems, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(f->validate(img, bytes, n_elems - 100, &err), SPLASH_ERR_INVALID);
    free(deq);
    free(img);
    free(q);
}
