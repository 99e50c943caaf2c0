#include "tests/support/kernel_rows.h"

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"
#include "splash/fp.h"

#define SENTINEL -12345.0f

int test_cpu_has(uint64_t features, const char *what)
{
    const uint64_t lacking = features & ~splash_cpu_features();
    if (!lacking)
        return 1;
    const char *require = getenv("SPLASH_TEST_REQUIRE_ISA");
    if (require && !strcmp(require, "1")) {
        char have[256];
        splash_cpu_describe(have, sizeof have);
        fail_msg("%s needs CPU features (0x%llx) this CPU lacks (it has: %s); "
                 "SPLASH_TEST_REQUIRE_ISA=1 forbids skipping it",
                 what, (unsigned long long)lacking, have);
    }
    return 0;
}

int test_row_runs_here(const struct splash_kernel_row *row)
{
    char what[96];
    snprintf(what, sizeof what, "kernel row %s", row->isa);
    return test_cpu_has(row->cpu_requires, what);
}

double test_abs_dot(const float *w, const float *a, int64_t n)
{
    double s = 0.0;
    for (int64_t k = 0; k < n; k++)
        s += fabs((double)w[k] * (double)a[k]);
    return s;
}

double test_vec_dot_near(const char *name, const struct splash_kernel_row *row,
                         const struct test_rows *rows, const float *wf, const float *af,
                         const float *want, double tol, float *one)
{
    const int64_t n = rows->n, n_w = rows->n_w;
    const char *w = rows->w, *act = rows->act;
    double worst = 0.0;
    for (int j = 0; j < rows->n_act; j++)
        for (int i = 0; i < n_w; i++) {
            float *s = &one[j * n_w + i];
            const float ref = want[j * n_w + i];
            row->vec_dot(n, s, w + i * rows->w_stride, act + j * rows->act_stride);
            double e = fabs((double)*s - (double)ref) / test_abs_dot(wf + i * n, af + j * n, n);
            if (e > worst)
                worst = e;
            if (!(e <= tol))
                fail_msg("%s %s: dot[%d][%d] = %.9g, scalar %.9g (rel %.3g)", name, row->isa, i, j,
                         (double)*s, (double)ref, e);
        }
    return worst;
}

void test_mul_rows_match(const char *name, const struct splash_kernel_row *row,
                         const struct test_rows *rows, const struct test_mul_rows_rule *rule,
                         const float *one)
{
    const int64_t n_w = rows->n_w, max_act = rows->n_act, stride = rule->out_stride;
    float *out = malloc((size_t)(max_act * stride) * sizeof *out);
    assert_non_null(out);
    if (rule->own)
        assert_non_null(row->mul_rows);
    for (int64_t n_act = 1; n_act <= max_act; n_act++) {
        for (int64_t k = 0; k < max_act * stride; k++)
            out[k] = SENTINEL;
        splash_format_mul_rows(row, rows->n, rows->w, rows->w_stride, n_w, rows->act,
                               rows->act_stride, n_act, out, (size_t)stride);
        for (int64_t j = 0; j < max_act; j++)
            for (int64_t i = 0; i < stride; i++) {
                const float got = out[j * stride + i];
                if (j >= n_act || i >= n_w) {
                    if (got != SENTINEL)
                        fail_msg("%s %s mul_rows(%d rows) wrote out[%d][%d]", name, row->isa,
                                 (int)n_act, (int)j, (int)i);
                    continue;
                }
                const float want = one[j * n_w + i];
                if (rule->bitwise ? splash_fp32_to_bits(got) != splash_fp32_to_bits(want)
                                  : got != want)
                    fail_msg("%s %s mul_rows(%d rows)[%d][%d] = %.9g, %s %.9g", name, row->isa,
                             (int)n_act, (int)j, (int)i, (double)got, rule->vec_dot, (double)want);
            }
    }
    free(out);
}

void test_simd_rows_near_scalar(const struct splash_format_type *f, const struct test_rows *rows,
                                const float *wf, const float *af, const float *want, double tol,
                                int print_worst)
{
    const struct test_mul_rows_rule rule = {
        .vec_dot = "vec_dot", .own = 1, .bitwise = 1, .out_stride = rows->n_w + 3};
    float *one = malloc((size_t)(rows->n_act * rows->n_w) * sizeof *one);
    assert_non_null(one);
    for (uint32_t r = 0; r + 1 < f->n_rows; r++) {
        const struct splash_kernel_row *row = &f->rows[r];
        if (!test_row_runs_here(row)) {
            print_message("  %s %s: not on this CPU, skipped\n", f->name, row->isa);
            continue;
        }
        double worst = test_vec_dot_near(f->name, row, rows, wf, af, want, tol, one);
        test_mul_rows_match(f->name, row, rows, &rule, one);
        if (print_worst)
            print_message("  %s %s: max rel. diff to scalar %.3g, mul_rows 1..%d rows = vec_dot\n",
                          f->name, row->isa, worst, (int)rows->n_act);
        else
            print_message("  %s %s: matches scalar, mul_rows 1..%d rows = vec_dot\n", f->name,
                          row->isa, (int)rows->n_act);
    }
    free(one);
}

int test_row_gives_scalar_bits(const struct splash_format_type *f, const char *isa, int64_t n,
                               const void *w, size_t w_stride, const void *act,
                               size_t act_stride, int n_rows)
{
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1], *row = NULL;
    for (uint32_t r = 0; r + 1 < f->n_rows; r++)
        if (!strcmp(f->rows[r].isa, isa))
            row = &f->rows[r];
    if (!row)
        fail_msg("%s has no %s row", f->name, isa);
    if (!test_row_runs_here(row))
        return 0;
    for (int i = 0; i < n_rows; i++)
        for (int j = 0; j < n_rows; j++) {
            const void *wr = (const char *)w + i * w_stride, *ar = (const char *)act + j * act_stride;
            float got, want;
            row->vec_dot(n, &got, wr, ar);
            ref->vec_dot(n, &want, wr, ar);
            if (memcmp(&got, &want, sizeof got))
                fail_msg("%s %s: w row %d x act row %d: %.9g, the scalar row %.9g", f->name, isa,
                         i, j, (double)got, (double)want);
        }
    return 1;
}

int test_mul_rows_give_scalar_bits(const struct splash_format_type *f, const char *isa,
                                   int64_t n, const void *w, size_t w_stride, int n_w,
                                   const void *act, size_t act_stride, int n_act)
{
    const struct splash_kernel_row *ref = &f->rows[f->n_rows - 1], *row = NULL;
    for (uint32_t r = 0; r + 1 < f->n_rows; r++)
        if (!strcmp(f->rows[r].isa, isa))
            row = &f->rows[r];
    if (!row)
        fail_msg("%s has no %s row", f->name, isa);
    if (!row->mul_rows)
        fail_msg("%s %s has no mul_rows of its own", f->name, isa);
    if (!test_row_runs_here(row))
        return 0;
    const size_t stride = (size_t)n_w + 3;
    float *out = malloc(sizeof(float) * stride * (size_t)n_act);
    assert_non_null(out);
    for (size_t k = 0; k < stride * (size_t)n_act; k++)
        out[k] = SENTINEL;
    row->mul_rows(n, w, w_stride, n_w, act, act_stride, n_act, out, stride);
    for (int j = 0; j < n_act; j++) {
        for (int i = 0; i < n_w; i++) {
            float want;
            ref->vec_dot(n, &want, (const char *)w + i * w_stride, (const char *)act + j * act_stride);
            const float got = out[(size_t)j * stride + (size_t)i];
            if (memcmp(&got, &want, sizeof got))
                fail_msg("%s %s mul_rows (%d x %d rows): w row %d x act row %d: %.9g, the scalar "
                         "row %.9g", f->name, isa, n_w, n_act, i, j, (double)got, (double)want);
        }
        for (size_t i = (size_t)n_w; i < stride; i++)
            if (out[(size_t)j * stride + i] != SENTINEL)
                fail_msg("%s %s mul_rows wrote past weight row %d", f->name, isa, n_w);
    }
    free(out);
    return 1;
}
