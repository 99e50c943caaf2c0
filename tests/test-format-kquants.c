/* The kquants plugin's legacy and K-quant types against ggml's reference
 * vectors (../shared/testdata/quant, README.md section 5), and every SIMD
 * kernel row against the scalar reference row. */
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

#include "core/host_impl.h"
#include "core/registry.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/formats.h"
#include "tests/support/identical.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/quantref.h"
#include "tests/support/rng.h"

/* One of our types: ggml's file name, our format name, and the dot-product
 * tolerance against ggml's vec_dot as a fraction of sum |w_k * a_k|.
 *
 * Why the tolerances are what they are: our kernels compute the same integer
 * sums per (sub-)block as ggml's and only scale and accumulate them in float in
 * a possibly different order, so the difference is float rounding: at most
 * ~n_blocks * 2^-24 of sum |w * a| (32 blocks of Q8_0 in a 1024 row: 2e-6; the
 * K-quants' 4 super-blocks do better). index.json records the reference's own
 * spread against an exact float64 dot: <= 1.9e-7 for every type except
 * Q4_1/Q5_1 (3.2e-4, from the fp16 block sum s of Q8_1 - which we use too, so it
 * does not enter our difference). We allow 1e-5: 5x the worst rounding bound, and
 * far below any indexing or scale error (those are O(1e-2) and larger). */
struct kq_case {
    const char *file;  /* "q4_K" */
    const char *name;  /* "Q4_K" */
    int32_t gguf_type;
    uint32_t block_elems, block_bytes;
    const char *act;   /* expected act_type, NULL for activation-only */
    double dot_tol;
    /* from_float of src.f32 vs the .q file: 1 = byte-exact claimed. */
    int quant_exact;
};

static const struct kq_case kq_cases[] = {
    {"q4_0", "Q4_0", 2, 32, 18, "Q8_0", 1e-5, 1},
    {"q4_1", "Q4_1", 3, 32, 20, "Q8_1", 1e-5, 1},
    {"q5_0", "Q5_0", 6, 32, 22, "Q8_0", 1e-5, 1},
    {"q5_1", "Q5_1", 7, 32, 24, "Q8_1", 1e-5, 1},
    {"q8_0", "Q8_0", 8, 32, 34, "Q8_0", 1e-5, 1},
    {"q2_K", "Q2_K", 10, 256, 84, "Q8_K", 1e-5, 1},
    {"q3_K", "Q3_K", 11, 256, 110, "Q8_K", 1e-5, 1},
    {"q4_K", "Q4_K", 12, 256, 144, "Q8_K", 1e-5, 1},
    {"q5_K", "Q5_K", 13, 256, 176, "Q8_K", 1e-5, 1},
    {"q6_K", "Q6_K", 14, 256, 210, "Q8_K", 1e-5, 1},
    {"q8_K", "Q8_K", 15, 256, 292, NULL, 0, 1},
};
#define N_CASES (sizeof kq_cases / sizeof kq_cases[0])

/* Q8_1 has no reference file of its own: it is checked as Q4_1/Q5_1's actq. */

static json_t *index_json;
static int n_rows_ref, n_per_row_ref;

static int setup(void **state)
{
    if (test_formats_setup(state))
        return -1;
    char msg[768];
    index_json = test_quant_index_load(msg, sizeof msg);
    if (!index_json) {
        fprintf(stderr, "%s\n", msg);
        return -1;
    }
    n_rows_ref = (int)json_integer_value(json_object_get(index_json, "n_rows"));
    n_per_row_ref = (int)json_integer_value(json_object_get(index_json, "n_per_row"));
    return n_rows_ref > 0 && n_per_row_ref > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    json_decref(index_json);
    return test_formats_teardown(state);
}

static size_t ref_int(const char *file, const char *key)
{
    json_t *t = json_object_get(json_object_get(index_json, "types"), file);
    json_t *v = json_object_get(t, key);
    if (!json_is_integer(v))
        fail_msg("index.json: types.%s.%s missing", file, key);
    return (size_t)json_integer_value(v);
}

/* Prints the first few differing bytes; returns the number of differences. */
static size_t report_bytes(const char *what, const uint8_t *got, const uint8_t *want, size_t n,
                           size_t block_bytes)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s: ", what);
    size_t bad = test_count_byte_mismatches(prefix, got, want, n, block_bytes);
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu bytes differ\n", what, bad, n);
    return bad;
}

/* ---- descriptors ---------------------------------------------------------- */

static void test_kquants_descriptors_are_consistent(void **state)
{
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        assert_ptr_equal(f, splash_registry_format_by_gguf(test_formats_registry(), k->gguf_type));
        assert_int_equal(f->gguf_type, k->gguf_type);
        assert_int_equal(f->block_elems, k->block_elems);
        assert_int_equal(f->block_bytes, k->block_bytes);
        assert_int_equal(f->block_elems, ref_int(k->file, "block_size"));
        assert_int_equal(f->block_bytes, ref_int(k->file, "type_size"));
        assert_non_null(f->validate);
        assert_non_null(f->to_float);
        assert_non_null(f->from_float);
        if (!k->act) {
            assert_true(f->flags & SPLASH_FORMAT_ACTIVATION_ONLY);
            assert_null(f->act_type);
            continue;
        }
        assert_non_null(f->act_type);
        assert_string_equal(f->act_type, k->act);
        assert_non_null(test_format_find(f->act_type)->from_float);
        /* rows end in the portable scalar reference */
        assert_true(f->n_rows >= 1);
        assert_int_equal(f->rows[f->n_rows - 1].cpu_requires, 0);
        assert_string_equal(f->rows[f->n_rows - 1].isa, "scalar");
        for (uint32_t r = 0; r < f->n_rows; r++)
            assert_non_null(f->rows[r].vec_dot);
    }
    const struct splash_format_type *q81 = test_format_find("Q8_1");
    assert_int_equal(q81->gguf_type, 9);
    assert_int_equal(q81->block_bytes, 36);
    assert_true(q81->flags & SPLASH_FORMAT_ACTIVATION_ONLY);
}

/* ---- reference vectors ---------------------------------------------------- */

static void test_kquants_to_float_matches_reference_bitwise(void **state)
{
    (void)state;
    size_t total_bad = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        size_t n = (size_t)n_rows_ref * n_per_row_ref;
        uint8_t *q =
            test_quant_load(k->file, "q", n_rows_ref * ref_int(k->file, "row_bytes"), NULL);
        float *want = test_quant_load(k->file, "deq.f32", n * sizeof(float), NULL);
        float *got = malloc(n * sizeof(float));
        assert_non_null(got);
        f->to_float(q, got, (int64_t)n);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s deq: ", k->name);
        size_t bad = test_count_float_mismatches(prefix, got, want, n, n_per_row_ref);
        if (bad)
            fprintf(stderr, "%s: %zu of %zu dequantized values differ\n", k->name, bad, n);
        total_bad += bad;
        free(got);
        free(want);
        free(q);
    }
    assert_int_equal(total_bad, 0);
}

static void test_kquants_act_quantizer_matches_reference_bytes(void **state)
{
    (void)state;
    size_t total_bad = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        if (!k->act)
            continue;
        const struct splash_format_type *a = test_format_find(k->act);
        size_t act_row_bytes = ref_int(k->file, "act_row_bytes");
        assert_int_equal(act_row_bytes, splash_format_row_bytes(a, n_per_row_ref));
        float *x =
            test_quant_load(k->file, "act.f32", (size_t)n_rows_ref * n_per_row_ref * 4, NULL);
        uint8_t *want = test_quant_load(k->file, "actq", n_rows_ref * act_row_bytes, NULL);
        uint8_t *got = calloc(n_rows_ref, act_row_bytes);
        assert_non_null(got);
        for (int r = 0; r < n_rows_ref; r++)
            a->from_float(x + (size_t)r * n_per_row_ref, got + r * act_row_bytes, n_per_row_ref,
                          NULL);
        char what[64];
        snprintf(what, sizeof what, "%s actq (%s)", k->name, k->act);
        total_bad += report_bytes(what, got, want, n_rows_ref * act_row_bytes, a->block_bytes);
        free(got);
        free(want);
        free(x);
    }
    assert_int_equal(total_bad, 0);
}

static void test_kquants_from_float_matches_reference_blocks(void **state)
{
    (void)state;
    size_t total_bad = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        size_t row_bytes = ref_int(k->file, "row_bytes");
        float *x =
            test_quant_load(k->file, "src.f32", (size_t)n_rows_ref * n_per_row_ref * 4, NULL);
        uint8_t *want = test_quant_load(k->file, "q", n_rows_ref * row_bytes, NULL);
        uint8_t *got = calloc(n_rows_ref, row_bytes);
        assert_non_null(got);
        for (int r = 0; r < n_rows_ref; r++)
            f->from_float(x + (size_t)r * n_per_row_ref, got + r * row_bytes, n_per_row_ref, NULL);
        char what[64];
        snprintf(what, sizeof what, "%s from_float", k->name);
        size_t bad = report_bytes(what, got, want, n_rows_ref * row_bytes, f->block_bytes);
        if (k->quant_exact)
            total_bad += bad;
        free(got);
        free(want);
        free(x);
    }
    assert_int_equal(total_bad, 0);
}

/* The dot tolerance of a type (kq_cases). */
static double k_tol(const char *name)
{
    for (size_t c = 0; c < N_CASES; c++)
        if (!strcmp(kq_cases[c].name, name))
            return kq_cases[c].dot_tol;
    return 0;
}

static void test_kquants_vec_dot_matches_reference(void **state)
{
    (void)state;
    size_t total_bad = 0, n_checked = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        if (!k->act)
            continue;
        const struct splash_format_type *f = test_format_find(k->name),
                                        *a = test_format_find(k->act);
        size_t row_bytes = ref_int(k->file, "row_bytes");
        size_t act_row_bytes = ref_int(k->file, "act_row_bytes");
        size_t n = (size_t)n_rows_ref * n_per_row_ref;
        uint8_t *q = test_quant_load(k->file, "q", n_rows_ref * row_bytes, NULL);
        uint8_t *aq = test_quant_load(k->file, "actq", n_rows_ref * act_row_bytes, NULL);
        float *want =
            test_quant_load(k->file, "dot.f32", (size_t)n_rows_ref * n_rows_ref * 4, NULL);
        float *wdeq = malloc(n * sizeof(float)), *adeq = malloc(n * sizeof(float));
        assert_non_null(wdeq);
        assert_non_null(adeq);
        f->to_float(q, wdeq, (int64_t)n);
        a->to_float(aq, adeq, (int64_t)n);
        for (uint32_t r = 0; r < f->n_rows; r++) {
            const struct splash_kernel_row *row = &f->rows[r];
            if (!test_row_runs_here(row))
                continue;
            for (int i = 0; i < n_rows_ref; i++) {
                for (int j = 0; j < n_rows_ref; j++) {
                    float got = NAN;
                    row->vec_dot(n_per_row_ref, &got, q + i * row_bytes, aq + j * act_row_bytes);
                    double ref = want[i * n_rows_ref + j];
                    double scale = test_abs_dot(wdeq + (size_t)i * n_per_row_ref,
                                                adeq + (size_t)j * n_per_row_ref, n_per_row_ref);
                    double tol = k->dot_tol * scale + 1e-30;
                    n_checked++;
                    if (!(fabs(got - ref) <= tol)) {
                        if (total_bad < 16)
                            fprintf(stderr,
                                    "  %s %s: w row %d x act row %d: got %.9g, want %.9g "
                                    "(|diff| %.3g > tol %.3g)\n",
                                    k->name, row->isa, i, j, got, ref, fabs(got - ref), tol);
                        total_bad++;
                    }
                }
            }
        }
        free(adeq);
        free(wdeq);
        free(want);
        free(aq);
        free(q);
    }
    assert_true(n_checked > 0);
    assert_int_equal(total_bad, 0);
}

#if defined(__aarch64__)
/* The NEON rows sum each (sub-)block in int32 lanes and then take the scalar row's own float
 * steps in its order (formats/kquants/kq_neon.h, kquants_i8mm_neon.c), so on ggml's vectors
 * each gives the scalar row's bits: every NEON row (Armv8.0, sdot, smmla) of each type that
 * has it, vec_dot and mul_rows over every split of the reference rows into even and odd
 * weight and activation counts, each run here (qemu's default CPU has the dot product and
 * i8mm; SPLASH_TEST_REQUIRE_ISA=1 fails a skip). */
static void test_kquants_neon_rows_give_scalar_bits(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        int i8mm;
    } types[] = {{"q8_0", 1}, {"q4_0", 1}, {"q4_K", 1}, {"q5_K", 0}, {"q6_K", 0}};
    static const char *const isas[] = {"neon-i8mm", "neon-dotprod", "neon"};
    static const int shapes[][2] = {{8, 8}, {7, 5}, {2, 2}, {3, 1}, {1, 8}, {6, 7}, {5, 3}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const struct kq_case *k = NULL;
        for (size_t c = 0; c < N_CASES; c++)
            if (!strcmp(kq_cases[c].file, types[t].type))
                k = &kq_cases[c];
        assert_non_null(k);
        const struct splash_format_type *f = test_format_find(k->name);
        const size_t row_bytes = ref_int(k->file, "row_bytes");
        const size_t act_row_bytes = ref_int(k->file, "act_row_bytes");
        uint8_t *q = test_quant_load(k->file, "q", n_rows_ref * row_bytes, NULL);
        uint8_t *aq = test_quant_load(k->file, "actq", n_rows_ref * act_row_bytes, NULL);
        for (size_t s = types[t].i8mm ? 0 : 1; s < sizeof isas / sizeof isas[0]; s++) {
            if (!test_row_gives_scalar_bits(f, isas[s], n_per_row_ref, q, row_bytes, aq,
                                            act_row_bytes, n_rows_ref))
                continue;
            for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
                const int nw = shapes[h][0] < n_rows_ref ? shapes[h][0] : n_rows_ref;
                const int na = shapes[h][1] < n_rows_ref ? shapes[h][1] : n_rows_ref;
                /* start at row 1 where there is room, so pairs do not always begin at 0 */
                const int w0 = nw < n_rows_ref ? 1 : 0, a0 = na < n_rows_ref ? 1 : 0;
                assert_true(test_mul_rows_give_scalar_bits(
                    f, isas[s], n_per_row_ref, q + w0 * row_bytes, row_bytes, nw,
                    aq + a0 * act_row_bytes, act_row_bytes, na));
            }
            print_message("  %s %s: scalar bits on %d x %d reference dots, mul_rows too\n",
                          k->name, isas[s], n_rows_ref, n_rows_ref);
        }
        free(aq);
        free(q);
    }
}

/* A weight takes the i8mm row only where HWCAP2 says i8mm, the sdot row only with asimddp,
 * else the Armv8.0 one: tests/run-arm64.sh runs this under qemu's max CPU, a Neoverse N1
 * (dot product, no i8mm) and a Cortex-A53 (neither); a wrong pick there dies of SIGILL. */
static void test_kquants_neon_dispatch_follows_hwcaps(void **state)
{
    (void)state;
    const uint64_t have = splash_cpu_features();
    const char *want = (have & SPLASH_CPU_NEON_I8MM) && (have & SPLASH_CPU_NEON_DOTPROD)
                           ? "neon-i8mm"
                       : (have & SPLASH_CPU_NEON_DOTPROD) ? "neon-dotprod"
                       : (have & SPLASH_CPU_NEON)         ? "neon"
                                                          : "scalar";
    static const char *const names[] = {"Q8_0", "Q4_0", "Q4_K"};
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        const struct splash_kernel_row *row =
            splash_format_pick_row(test_format_find(names[t]), have);
        if (strcmp(row->isa, want))
            fail_msg("%s: picked the %s row on a CPU with 0x%llx, want %s", names[t], row->isa,
                     (unsigned long long)have, want);
    }
    char desc[256];
    splash_cpu_describe(desc, sizeof desc);
    print_message("  CPU %s: Q8_0, Q4_0, Q4_K take the %s row\n", desc, want);
}
#endif

/* ---- SIMD rows against the scalar row ------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    return test_splitmix64(&rng_state);
}

static float rng_normal(void)
{
    double u1 = ((rng_next() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (rng_next() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Random test matrices: rows of mixed character (gaussian, outliers, tiny, a
 * zero sub-block), quantized by the format's own from_float. */
static void random_floats(float *x, int64_t n, int kind)
{
    for (int64_t i = 0; i < n; i++) {
        float v = rng_normal();
        switch (kind % 4) {
        case 1:
            v *= (rng_next() % 50 == 0) ? 30.0f : 1.0f;
            break;
        case 2:
            v *= 1e-3f;
            break;
        case 3:
            v = (i % 256) < 40 ? 0.0f : v + 0.5f;
            break;
        }
        x[i] = v;
    }
}

enum { SIMD_N = 2048, SIMD_W = 11, SIMD_A = 9 };

static void test_kquants_simd_rows_match_scalar(void **state)
{
    (void)state;
    size_t total_bad = 0, n_rows_tested = 0;
    float *x = malloc(sizeof(float) * SIMD_N * SIMD_W), *wdeq = malloc(sizeof(float) * SIMD_N);
    float *adeq = malloc(sizeof(float) * SIMD_N * SIMD_A);
    assert_non_null(x);
    assert_non_null(wdeq);
    assert_non_null(adeq);
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        if (!k->act)
            continue;
        const struct splash_format_type *f = test_format_find(k->name),
                                        *a = test_format_find(k->act);
        size_t wrb = splash_format_row_bytes(f, SIMD_N), arb = splash_format_row_bytes(a, SIMD_N);
        uint8_t *w = malloc(wrb * SIMD_W), *act = malloc(arb * SIMD_A);
        assert_non_null(w);
        assert_non_null(act);
        for (int i = 0; i < SIMD_W; i++) {
            random_floats(x, SIMD_N, i);
            f->from_float(x, w + i * wrb, SIMD_N, NULL);
        }
        /* the last weight row is random bytes (every block redrawn until its
         * scales are finite): bit patterns the quantizer may never produce */
        uint8_t *rb = w + (SIMD_W - 1) * wrb;
        for (size_t b = 0; b < wrb; b += f->block_bytes) {
            struct splash_err err;
            do {
                for (size_t o = 0; o < f->block_bytes; o++)
                    rb[b + o] = (uint8_t)rng_next();
            } while (f->validate(rb + b, f->block_bytes, f->block_elems, &err) != SPLASH_OK);
        }
        for (int j = 0; j < SIMD_A; j++) {
            random_floats(x, SIMD_N, j + 1);
            a->from_float(x, act + j * arb, SIMD_N, NULL);
            a->to_float(act + j * arb, adeq + (size_t)j * SIMD_N, SIMD_N);
        }
        /* reference: the scalar row's vec_dot for every pair */
        const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
        float want[SIMD_W][SIMD_A];
        double scale[SIMD_W][SIMD_A];
        for (int i = 0; i < SIMD_W; i++) {
            f->to_float(w + i * wrb, wdeq, SIMD_N);
            for (int j = 0; j < SIMD_A; j++) {
                ref->vec_dot(SIMD_N, &want[i][j], w + i * wrb, act + j * arb);
                scale[i][j] = test_abs_dot(wdeq, adeq + (size_t)j * SIMD_N, SIMD_N);
            }
        }
        for (uint32_t r = 0; r + 1 < f->n_rows; r++) {
            const struct splash_kernel_row *row = &f->rows[r];
            if (!test_row_runs_here(row)) {
                fprintf(stderr, "  (%s %s: CPU lacks it, skipped)\n", k->name, row->isa);
                continue;
            }
            n_rows_tested++;
            for (int i = 0; i < SIMD_W; i++) {
                for (int j = 0; j < SIMD_A; j++) {
                    float got = NAN;
                    row->vec_dot(SIMD_N, &got, w + i * wrb, act + j * arb);
                    double tol = k->dot_tol * scale[i][j] + 1e-30;
                    if (!(fabs(got - want[i][j]) <= tol)) {
                        if (total_bad < 16)
                            fprintf(stderr, "  %s %s vec_dot: w %d x a %d: got %.9g, scalar %.9g\n",
                                    k->name, row->isa, i, j, got, want[i][j]);
                        total_bad++;
                    }
                }
            }
            /* mul_rows with 1..9 activation rows, through the core's dispatcher
             * (the row's own mul_rows when it has one); out has a wider stride */
            for (int n_act = 1; n_act <= SIMD_A; n_act++) {
                float out[SIMD_A][SIMD_W + 3];
                for (int j = 0; j < SIMD_A; j++)
                    for (int i = 0; i < SIMD_W + 3; i++)
                        out[j][i] = -12345.0f;
                splash_format_mul_rows(row, SIMD_N, w, wrb, SIMD_W, act, arb, n_act, &out[0][0],
                                       SIMD_W + 3);
                for (int j = 0; j < SIMD_A; j++) {
                    for (int i = 0; i < SIMD_W + 3; i++) {
                        int inside = j < n_act && i < SIMD_W;
                        int ok = inside ? fabs(out[j][i] - want[i][j]) <= k->dot_tol * scale[i][j]
                                        : out[j][i] == -12345.0f;
                        if (!ok) {
                            if (total_bad < 16)
                                fprintf(stderr,
                                        "  %s %s mul_rows n_act %d: out[%d][%d] = %.9g, want %.9g\n",
                                        k->name, row->isa, n_act, j, i, out[j][i],
                                        inside ? want[i][j] : -12345.0f);
                            total_bad++;
                        }
                    }
                }
            }
        }
        free(act);
        free(w);
    }
    free(adeq);
    free(wdeq);
    free(x);
    fprintf(stderr, "  %zu SIMD rows checked against scalar\n", n_rows_tested);
    assert_int_equal(total_bad, 0);
}

/* The mat-vec tiles (several weight rows against one activation row) and the
 * mat-mat passes of every SIMD row, over 37 weight rows (whole tiles and a
 * remainder) and lengths whose Q8_0 blocks do not fill the last group of 16 (nor,
 * for 2080, a pair): mul_rows equals the row's own vec_dot bit for bit, each pair
 * going through the same operations whatever the tile, and the scalar row within
 * the dot tolerance. */
enum { TILE_W = 37, TILE_A = 9 };

static void test_kquants_mul_rows_tiles_match_vec_dot(void **state)
{
    (void)state;
    const char *types[] = {"Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
    const int64_t lens[] = {256, 1280, 2080, 4096};
    uint64_t cpu = splash_cpu_features();
    size_t bad = 0, checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const struct splash_format_type *f = test_format_find(types[ti]),
                                        *a = test_format_find(f->act_type);
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            if (n % f->block_elems)
                continue;
            size_t wrb = splash_format_row_bytes(f, n), arb = splash_format_row_bytes(a, n);
            uint8_t *w = malloc(wrb * TILE_W), *act = malloc(arb * TILE_A);
            float *x = malloc(sizeof(float) * (size_t)n), *wdeq = malloc(sizeof(float) * (size_t)n);
            float *adeq = malloc(sizeof(float) * (size_t)n * TILE_A);
            assert_non_null(w);
            assert_non_null(act);
            assert_non_null(x);
            assert_non_null(wdeq);
            assert_non_null(adeq);
            for (int i = 0; i < TILE_W; i++) {
                random_floats(x, n, i % 3);
                f->from_float(x, w + i * wrb, n, NULL);
            }
            for (int j = 0; j < TILE_A; j++) {
                random_floats(x, n, j % 2 + 1);
                a->from_float(x, act + j * arb, n, NULL);
                a->to_float(act + j * arb, adeq + (size_t)j * n, n);
            }
            const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1];
            for (uint32_t r = 0; r + 1 < f->n_rows; r++) {
                const struct splash_kernel_row *row = &f->rows[r];
                if (!test_row_runs_here(row))
                    continue;
                checked++;
                float one[TILE_A][TILE_W], want[TILE_A][TILE_W];
                double scale[TILE_A][TILE_W];
                for (int i = 0; i < TILE_W; i++) {
                    f->to_float(w + i * wrb, wdeq, n);
                    for (int j = 0; j < TILE_A; j++) {
                        row->vec_dot(n, &one[j][i], w + i * wrb, act + j * arb);
                        ref->vec_dot(n, &want[j][i], w + i * wrb, act + j * arb);
                        scale[j][i] = test_abs_dot(wdeq, adeq + (size_t)j * n, n);
                    }
                }
                const int n_acts[] = {1, 2, 3, 8, 9};
                for (size_t ai = 0; ai < sizeof n_acts / sizeof n_acts[0]; ai++) {
                    const int n_act = n_acts[ai];
                    float out[TILE_A][TILE_W + 3];
                    for (int j = 0; j < TILE_A; j++)
                        for (int i = 0; i < TILE_W + 3; i++)
                            out[j][i] = -12345.0f;
                    splash_format_mul_rows(row, n, w, wrb, TILE_W, act, arb, n_act, &out[0][0],
                                           TILE_W + 3);
                    for (int j = 0; j < TILE_A; j++) {
                        for (int i = 0; i < TILE_W + 3; i++) {
                            int inside = j < n_act && i < TILE_W;
                            float got = out[j][i];
                            int ok = inside ? splash_fp32_to_bits(got) ==
                                                      splash_fp32_to_bits(one[j][i]) &&
                                                  fabs(got - want[j][i]) <=
                                                      k_tol(types[ti]) * scale[j][i]
                                            : got == -12345.0f;
                            if (!ok) {
                                if (bad < 16)
                                    fprintf(stderr,
                                            "  %s %s n %lld mul_rows(%d acts): out[%d][%d] = %.9g, "
                                            "vec_dot %.9g, scalar %.9g\n",
                                            types[ti], row->isa, (long long)n, n_act, j, i, got,
                                            inside ? one[j][i] : -12345.0f,
                                            inside ? want[j][i] : -12345.0f);
                                bad++;
                            }
                        }
                    }
                }
            }
            free(adeq);
            free(wdeq);
            free(x);
            free(act);
            free(w);
        }
    }
    fprintf(stderr, "  %zu (type, length, SIMD row) tile checks\n", checked);
    if (cpu & SPLASH_CPU_AVX2)
        assert_true(checked > 0);
    assert_int_equal(bad, 0);
}

/* Q5_1 and Q2_K sum in the float steps of ggml's generic dot, which the golden logits
 * were made with (position 0 of the tiny Q5_1 model 0.030 off, of the MoE Q2_K model
 * 0.023 off, in any other order): every SIMD row of Q5_1 gives the scalar row's bits, and
 * so do the repacked Q5_1_R16 and Q2_K_R16 kernels over whole groups of 16 rows; the rows
 * after them get the plain type's row of the same kind (SIMD or scalar). */
static void test_kquants_generic_order_rows_give_scalar_bits(void **state)
{
    (void)state;
    size_t row_bytes = ref_int("q5_1", "row_bytes"), act_row_bytes = ref_int("q5_1", "act_row_bytes");
    uint8_t *q = test_quant_load("q5_1", "q", n_rows_ref * row_bytes, NULL);
    uint8_t *aq = test_quant_load("q5_1", "actq", n_rows_ref * act_row_bytes, NULL);
#if defined(__x86_64__)
    test_row_gives_scalar_bits(test_format_find("Q5_1"), "avx2", n_per_row_ref, q, row_bytes, aq, act_row_bytes,
                               n_rows_ref);
#endif
    free(aq);
    free(q);
    const char *types[] = {"Q5_1", "Q2_K"};
    enum { N = 1024, ROWS = 35, ACTS = 3 }; /* two groups of 16 and a plain tail of 3 */
    size_t checked = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const struct splash_format_type *f = test_format_find(types[t]),
                                        *a = test_format_find(f->act_type),
                                        *r16 = test_format_find(f->repack_to);
        const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1], *plain = ref;
        for (uint32_t r = f->n_rows; r-- > 0;)
            if (test_row_runs_here(&f->rows[r]))
                plain = &f->rows[r]; /* the first row this CPU runs: the tail's */
        size_t wrb = splash_format_row_bytes(f, N), arb = splash_format_row_bytes(a, N);
        uint8_t *w = malloc(wrb * ROWS), *img = malloc(wrb * ROWS), *act = malloc(arb * ACTS);
        float *x = malloc(sizeof(float) * N);
        assert_true(w && img && act && x);
        for (int i = 0; i < ROWS; i++) {
            random_floats(x, N, i % 3);
            f->from_float(x, w + i * wrb, N, NULL);
        }
        for (int j = 0; j < ACTS; j++) {
            random_floats(x, N, j % 2 + 1);
            a->from_float(x, act + j * arb, N, NULL);
        }
        f->repack(N, w, ROWS, img);
        for (uint32_t r = 0; r < r16->n_rows; r++) {
            const struct splash_kernel_row *row = &r16->rows[r];
            if (!test_row_runs_here(row))
                continue;
            for (int n_act = 1; n_act <= ACTS; n_act++) {
                float out[ACTS][ROWS];
                splash_format_mul_rows(row, N, img, wrb, ROWS, act, arb, n_act, &out[0][0], ROWS);
                for (int j = 0; j < n_act; j++)
                    for (int i = 0; i < ROWS; i++) {
                        float want;
                        const int tail_simd = i >= ROWS / 16 * 16 && strcmp(row->isa, "scalar");
                        (tail_simd ? plain : ref)->vec_dot(N, &want, w + i * wrb, act + j * arb);
                        if (splash_fp32_to_bits(out[j][i]) != splash_fp32_to_bits(want))
                            fail_msg("%s %s (%d acts): w row %d x act row %d: %.9g, the scalar "
                                     "row %.9g",
                                     r16->name, row->isa, n_act, i, j, (double)out[j][i],
                                     (double)want);
                        checked++;
                    }
            }
        }
        free(x);
        free(act);
        free(img);
        free(w);
    }
    assert_true(checked > 0);
}

/* ---- validate --------------------------------------------------------------- */

/* The byte offset of the first fp16 scale (d) in each type's block. */
static size_t d_offset(const char *name)
{
    if (!strcmp(name, "Q2_K"))
        return 80;
    if (!strcmp(name, "Q3_K"))
        return 108;
    if (!strcmp(name, "Q6_K"))
        return 208;
    return 0; /* d leads the block in every other type (Q8_K: a float32) */
}

static void test_kquants_validate_refuses_bad_sizes(void **state)
{
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        int64_t n = 4 * (int64_t)f->block_elems;
        size_t bytes = 4 * f->block_bytes;
        uint8_t *buf = calloc(1, bytes);
        assert_non_null(buf);
        struct splash_err err = {{0}};
        assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_OK);

        /* truncated: one byte short */
        assert_int_equal(f->validate(buf, bytes - 1, n, &err), SPLASH_ERR_INVALID);
        char want[256];
        snprintf(want, sizeof want,
                 "%s: %zu bytes for %lld elements, expected %zu (4 blocks of %u)", k->name,
                 bytes - 1, (long long)n, bytes, f->block_bytes);
        assert_string_equal(err.msg, want);

        /* n_elems not a whole number of blocks */
        assert_int_equal(f->validate(buf, bytes, n - 1, &err), SPLASH_ERR_INVALID);
        snprintf(want, sizeof want, "%s: %lld elements is not a multiple of the %u-element block",
                 k->name, (long long)(n - 1), f->block_elems);
        assert_string_equal(err.msg, want);
        free(buf);
    }
}

static void test_kquants_validate_refuses_nan_and_inf_scales(void **state)
{
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        int64_t n = 5 * (int64_t)f->block_elems;
        size_t bytes = 5 * f->block_bytes;
        uint8_t *buf = calloc(1, bytes);
        assert_non_null(buf);
        struct splash_err err = {{0}};
        uint8_t *d = buf + 3 * f->block_bytes + d_offset(k->name);
        char want[256];
        if (!strcmp(k->name, "Q8_K")) {
            float nan = NAN, inf = -INFINITY;
            memcpy(d, &nan, 4);
            assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_ERR_INVALID);
            assert_string_equal(err.msg, "Q8_K block 3: scale d is NaN");
            memcpy(d, &inf, 4);
            assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_ERR_INVALID);
            assert_string_equal(err.msg, "Q8_K block 3: scale d is Inf");
        } else {
            d[0] = 0x01, d[1] = 0x7e; /* fp16 NaN */
            assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_ERR_INVALID);
            snprintf(want, sizeof want, "%s block 3: scale d is NaN", k->name);
            assert_string_equal(err.msg, want);
            d[0] = 0x00, d[1] = 0xfc; /* fp16 -Inf */
            assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_ERR_INVALID);
            snprintf(want, sizeof want, "%s block 3: scale d is Inf", k->name);
            assert_string_equal(err.msg, want);
            d[0] = d[1] = 0;
            /* the second fp16 of types that have one: dmin / m */
            const char *second = NULL;
            size_t off = 0;
            if (!strcmp(k->name, "Q4_1") || !strcmp(k->name, "Q5_1"))
                second = "m", off = 2;
            else if (!strcmp(k->name, "Q4_K") || !strcmp(k->name, "Q5_K"))
                second = "dmin", off = 2;
            else if (!strcmp(k->name, "Q2_K"))
                second = "dmin", off = 82;
            if (second) {
                uint8_t *m = buf + 1 * f->block_bytes + off;
                m[0] = 0x00, m[1] = 0x7c; /* +Inf */
                assert_int_equal(f->validate(buf, bytes, n, &err), SPLASH_ERR_INVALID);
                snprintf(want, sizeof want, "%s block 1: scale %s is Inf", k->name, second);
                assert_string_equal(err.msg, want);
            }
        }
        free(buf);
    }
    /* Q8_1's block sum s is an fp16 too */
    const struct splash_format_type *q81 = test_format_find("Q8_1");
    uint8_t buf[72] = {0};
    buf[36 + 2] = 0x00, buf[36 + 3] = 0x7d; /* NaN in block 1, s */
    struct splash_err err;
    assert_int_equal(q81->validate(buf, sizeof buf, 64, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q8_1 block 1: scale s is NaN");
}

/* The reference files themselves pass validation. */
static void test_kquants_validate_accepts_reference_blocks(void **state)
{
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct kq_case *k = &kq_cases[c];
        const struct splash_format_type *f = test_format_find(k->name);
        size_t size;
        uint8_t *q = test_quant_load(k->file, "q", 0, &size);
        struct splash_err err = {{0}};
        enum splash_status st = f->validate(q, size, (int64_t)n_rows_ref * n_per_row_ref, &err);
        if (st != SPLASH_OK)
            fail_msg("%s: %s", k->name, err.msg);
        free(q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kquants_descriptors_are_consistent),
        cmocka_unit_test(test_kquants_to_float_matches_reference_bitwise),
        cmocka_unit_test(test_kquants_act_quantizer_matches_reference_bytes),
        cmocka_unit_test(test_kquants_from_float_matches_reference_blocks),
        cmocka_unit_test(test_kquants_vec_dot_matches_reference),
        cmocka_unit_test(test_kquants_simd_rows_match_scalar),
#if defined(__aarch64__)
        cmocka_unit_test(test_kquants_neon_rows_give_scalar_bits),
        cmocka_unit_test(test_kquants_neon_dispatch_follows_hwcaps),
#endif
        cmocka_unit_test(test_kquants_mul_rows_tiles_match_vec_dot),
        cmocka_unit_test(test_kquants_generic_order_rows_give_scalar_bits),
        cmocka_unit_test(test_kquants_validate_refuses_bad_sizes),
        cmocka_unit_test(test_kquants_validate_refuses_nan_and_inf_scales),
        cmocka_unit_test(test_kquants_validate_accepts_reference_blocks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
