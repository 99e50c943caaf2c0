/* Holding a format's kernel rows (splash/format.h) to each other: every SIMD row against
 * the scalar row, mul_rows against vec_dot. */
#ifndef SPLASH_TEST_KERNEL_ROWS_H
#define SPLASH_TEST_KERNEL_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "splash/format.h"

/* Whether this CPU has every SPLASH_CPU_* bit of `features` (SPLASH_FORCE_ISA applied).
 * When it has not, the caller skips what needs them (`what`: "kernel row avx2") unless
 * SPLASH_TEST_REQUIRE_ISA=1 is set: then the test fails naming `what` and the missing
 * features, so a machine that should run every SIMD path (CI) cannot pass by skipping. */
int test_cpu_has(uint64_t features, const char *what);

/* test_cpu_has for a kernel row: whether this CPU runs it. */
int test_row_runs_here(const struct splash_kernel_row *row);

/* sum_k |w_k a_k| of two rows of values: the scale of a dot product's rounding error. */
double test_abs_dot(const float *w, const float *a, int64_t n);

/* Weight rows and activation rows of n values a kernel row is run on. */
struct test_rows {
    int64_t n;
    const void *w;
    size_t w_stride;
    int64_t n_w;
    const void *act;
    size_t act_stride;
    int64_t n_act;
};

/* row's vec_dot of every weight row i with every activation row j into one[j * n_w + i],
 * each within tol * sum|w a| (wf, af: the rows as values, n apart) of want[j * n_w + i];
 * fails naming the first pair that is not. Returns the largest relative difference. */
double test_vec_dot_near(const char *name, const struct splash_kernel_row *row,
                         const struct test_rows *rows, const float *wf, const float *af,
                         const float *want, double tol, float *one);

/* How test_mul_rows_match holds a row's mul_rows to its vec_dot. */
struct test_mul_rows_rule {
    const char *vec_dot; /* what messages call one[]: "vec_dot", "its vec_dot" */
    int own;             /* the row must have a mul_rows of its own */
    int bitwise;         /* the same bits, rather than equal as floats */
    int64_t out_stride;  /* > n_w: the columns past n_w must stay untouched */
};

/* For 1..rows->n_act activation rows at once, splash_format_mul_rows(row, ...) into an
 * output filled with a sentinel writes one[j * n_w + i] (row's vec_dot of weight row i and
 * activation row j) at out[j][i] for j < n_act and i < n_w, and nothing else; fails
 * naming the format (name) and the first difference. */
void test_mul_rows_match(const char *name, const struct splash_kernel_row *row,
                         const struct test_rows *rows, const struct test_mul_rows_rule *rule,
                         const float *one);

/* Every SIMD row of f (all rows but the last, the scalar one) this CPU runs, on rows: its
 * vec_dot within tol of want, the scalar row's results (test_vec_dot_near), and its own
 * mul_rows bit for bit its vec_dot with 1..n_act activation rows into an output 3 wider
 * than n_w (test_mul_rows_match). Prints a line per row, with the largest relative
 * difference when print_worst. */
void test_simd_rows_near_scalar(const struct splash_format_type *f, const struct test_rows *rows,
                                const float *wf, const float *af, const float *want, double tol,
                                int print_worst);

/* f's row named isa (fails when f has none) against its scalar row on n_rows x n_rows
 * (weight row, activation row) pairs of n values: every vec_dot the scalar row's bits;
 * fails naming the pair. Returns 0 when the row is not on this CPU (test_row_runs_here:
 * skipped, or failed under SPLASH_TEST_REQUIRE_ISA=1), 1 when it was held. */
int test_row_gives_scalar_bits(const struct splash_format_type *f, const char *isa, int64_t n,
                               const void *w, size_t w_stride, const void *act,
                               size_t act_stride, int n_rows);

/* test_row_gives_scalar_bits for f's row named isa's mul_rows: n_w weight rows against
 * n_act activation rows in one call (out n_w + 3 wide), every output the scalar row's
 * vec_dot bits and nothing past n_w written; fails naming the pair. Returns 0 when the
 * row is not on this CPU, 1 when it was held. */
int test_mul_rows_give_scalar_bits(const struct splash_format_type *f, const char *isa,
                                   int64_t n, const void *w, size_t w_stride, int n_w,
                                   const void *act, size_t act_stride, int n_act);

#endif
