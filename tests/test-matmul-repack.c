/* The load-time repack as the engine runs it (kernels/matmul.c): for every format with
 * a repacked layout, weights made from a real file mapping give the products the rows
 * as stored give (within float summation order), for mat-vecs, batches and expert
 * stacks, with tails of fewer rows than a group; the mapped source rows still read
 * correctly after their pages were dropped; and a released image is made again with
 * bit-identical results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/file_map.h"
#include "core/host_impl.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "kernels/kernels_impl.h"
#include "tests/support/kernel_rows.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;

static int setup(void **state)
{
    (void)state;
    struct splash_registry *r = splash_registry_global();
    if (!splash_registry_format_by_name(r, "Q8_K"))
        splash_registry_add_builtins(r, splash_builtin_plugins);
    pool = splash_pool_create(2);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    splash_pool_destroy(pool);
    return 0;
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* A weight tensor of `rows` x n_in (x n_experts) in format f, quantized from random
 * values, written to a temporary file and mapped from it as a model file would be. */
struct mapped_weight {
    struct splash_tensor_info t;
    void *map;
    size_t size;
};

static void mapped_weight_make(struct mapped_weight *mw, const struct splash_format_type *f,
                               int64_t n_in, int64_t rows, int64_t n_experts)
{
    size_t row_bytes = splash_format_row_bytes(f, n_in);
    assert_true(row_bytes > 0);
    mw->size = row_bytes * (size_t)rows * (size_t)n_experts;
    char *bytes = malloc(mw->size);
    float *x = malloc((size_t)n_in * sizeof *x);
    assert_non_null(bytes);
    assert_non_null(x);
    for (int64_t r = 0; r < rows * n_experts; r++) {
        for (int64_t k = 0; k < n_in; k++)
            x[k] = frand() * (1.0f + (float)(r % 5));
        f->from_float(x, bytes + (size_t)r * row_bytes, n_in, NULL);
    }
    char path[] = "/tmp/splash-repack-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, bytes, mw->size), (ssize_t)mw->size);
    mw->map = splash_file_map(fd, mw->size);
    close(fd);
    assert_true(mw->map != MAP_FAILED);
    assert_memory_equal(mw->map, bytes, mw->size);
    free(bytes);
    free(x);
    mw->t = (struct splash_tensor_info){.name = "blk.0.test.weight", .dtype = f->gguf_type,
                                        .type_name = f->name, .n_dims = n_experts > 1 ? 3 : 2,
                                        .ne = {n_in, rows, n_experts, 1}, .n_bytes = mw->size,
                                        .data = mw->map, .format = f};
}

static void mapped_weight_free(struct mapped_weight *mw)
{
    splash_file_unmap(mw->map, mw->size);
}

static struct splash_weight *weight_make(const struct splash_tensor_info *t, int packed)
{
    const struct splash_kernels *k = splash_kernels_get();
    struct splash_weight *w = NULL;
    struct splash_err err = {0};
    if (!packed)
        setenv("SPLASH_NO_REPACK", "1", 1);
    enum splash_status st = k->weight_create(t, &w, &err);
    unsetenv("SPLASH_NO_REPACK");
    if (st != SPLASH_OK)
        fail_msg("weight_create: %s", err.msg);
    return w;
}

/* Every product of a and b agrees to float summation order: the integer block sums are
 * exact in both, only the order of adding the scaled block sums differs, so the
 * difference is a few ulps of the sum of the terms' magnitudes, which |y| bounds here
 * within the factor the per-row spread of the random weights allows. */
static void assert_close(const float *a, const float *b, int64_t n, const char *what)
{
    float scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmaxf(scale, fabsf(b[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 2e-5f * scale + 1e-6f))
            fail_msg("%s: element %lld is %.9g, rows as stored give %.9g", what, (long long)i,
                     a[i], b[i]);
}

/* The formats with a repacked layout this CPU runs with SIMD (the engine repacks those). */
static int repacked_on_this_cpu(const struct splash_format_type *f)
{
    if (!f->repack_to || !f->repack)
        return 0;
    const struct splash_format_type *to =
        splash_registry_format_by_name(splash_registry_global(), f->repack_to);
    if (!to)
        fail_msg("%s repacks to %s, which is not registered", f->name, f->repack_to);
    assert_true(to->flags & SPLASH_FORMAT_REPACKED);
    /* a SIMD row of the repacked format runs here (a required one must) */
    for (uint32_t r = 0; r + 1 < to->n_rows; r++)
        if (test_row_runs_here(&to->rows[r]))
            return 1;
    return 0;
}

static void check_format(const struct splash_format_type *f)
{
    const struct splash_kernels *k = splash_kernels_get();
    const int64_t n_in = 512;
    /* 2 whole groups of 16 and a tail, and a matrix smaller than one group */
    const int64_t row_counts[] = {40, 7};
    const int64_t batch[] = {1, 8, 20, 300};
    for (size_t rc = 0; rc < sizeof row_counts / sizeof row_counts[0]; rc++) {
        const int64_t rows = row_counts[rc];
        struct mapped_weight mw;
        mapped_weight_make(&mw, f, n_in, rows, 1);
        float *before = malloc((size_t)(rows * n_in) * sizeof *before);
        float *after = malloc((size_t)(rows * n_in) * sizeof *after);
        assert_non_null(before);
        assert_non_null(after);
        k->to_float(&mw.t, before);
        struct splash_weight *plain = weight_make(&mw.t, 0);
        struct splash_weight *packed = weight_make(&mw.t, 1);
        /* the source pages were dropped; the file gives them back unchanged */
        k->to_float(&mw.t, after);
        assert_memory_equal(before, after, (size_t)(rows * n_in) * sizeof *before);
        for (size_t b = 0; b < sizeof batch / sizeof batch[0]; b++) {
            const int64_t n = batch[b];
            float *x = malloc((size_t)(n * n_in) * sizeof *x);
            float *y0 = malloc((size_t)(n * rows) * sizeof *y0);
            float *y1 = malloc((size_t)(n * rows) * sizeof *y1);
            float *y2 = malloc((size_t)(n * rows) * sizeof *y2);
            assert_true(x && y0 && y1 && y2);
            for (int64_t i = 0; i < n * n_in; i++)
                x[i] = frand();
            k->matmul(pool, plain, x, n, y0);
            k->matmul(pool, packed, x, n, y1);
            char what[96];
            snprintf(what, sizeof what, "%s, %lld rows, %lld activation rows", f->name,
                     (long long)rows, (long long)n);
            assert_close(y1, y0, n * rows, what);
            /* a row's products do not depend on the rows sharing the call: a lane of a
             * batch gets the bits it gets alone */
            for (int64_t j = 0; j < n; j += 7) {
                float *alone = malloc((size_t)rows * sizeof *alone);
                assert_non_null(alone);
                k->matmul(pool, packed, x + j * n_in, 1, alone);
                assert_memory_equal(alone, y1 + j * rows, (size_t)rows * sizeof *alone);
                free(alone);
            }
            /* released and made again on use: the same image, the same bits */
            assert_true(splash_matmul_release_images() > 0);
            k->matmul(pool, packed, x, n, y2);
            assert_memory_equal(y1, y2, (size_t)(n * rows) * sizeof *y1);
            free(x);
            free(y0);
            free(y1);
            free(y2);
        }
        k->weight_destroy(plain);
        k->weight_destroy(packed);
        free(before);
        free(after);
        mapped_weight_free(&mw);
    }
}

static void check_experts(const struct splash_format_type *f)
{
    const struct splash_kernels *k = splash_kernels_get();
    const int64_t n_in = 256, rows = 80, n_experts = 5, n = 37;
    struct mapped_weight mw;
    mapped_weight_make(&mw, f, n_in, rows, n_experts);
    struct splash_weight *plain = weight_make(&mw.t, 0);
    struct splash_weight *packed = weight_make(&mw.t, 1);
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    float *y0 = calloc((size_t)(n * rows), sizeof *y0);
    float *y1 = calloc((size_t)(n * rows), sizeof *y1);
    int32_t expert[37];
    assert_true(x && y0 && y1);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand();
    for (int64_t r = 0; r < n; r++)
        expert[r] = r % 7 == 3 ? -1 : (int32_t)((r * 3) % n_experts); /* some rows skip */
    k->matmul_experts(pool, plain, x, expert, n, y0);
    k->matmul_experts(pool, packed, x, expert, n, y1);
    char what[64];
    snprintf(what, sizeof what, "%s expert stack", f->name);
    assert_close(y1, y0, n * rows, what);
    for (int64_t r = 0; r < n; r++)
        if (expert[r] < 0)
            for (int64_t i = 0; i < rows; i++)
                assert_true(y1[r * rows + i] == 0.0f);
    k->weight_destroy(plain);
    k->weight_destroy(packed);
    free(x);
    free(y0);
    free(y1);
    mapped_weight_free(&mw);
}

/* A weight of several MB repacks in pieces on a pool: every piece lands where it
 * belongs, the tail rows after the last group included. */
static void check_large(const struct splash_format_type *f)
{
    const struct splash_kernels *k = splash_kernels_get();
    /* whole groups past the engine's parallel-repack size, then a tail of 8 rows */
    const int64_t n_in = 4096, n = 3;
    const int64_t rows =
        (int64_t)((9u << 19) / splash_format_row_bytes(f, n_in) + 15) / 16 * 16 + 8;
    struct mapped_weight mw;
    mapped_weight_make(&mw, f, n_in, rows, 1);
    assert_true(mw.size >= (4u << 20));
    struct splash_weight *plain = weight_make(&mw.t, 0);
    struct splash_weight *packed = weight_make(&mw.t, 1);
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    float *y0 = malloc((size_t)(n * rows) * sizeof *y0);
    float *y1 = malloc((size_t)(n * rows) * sizeof *y1);
    assert_true(x && y0 && y1);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand();
    k->matmul(pool, plain, x, n, y0);
    k->matmul(pool, packed, x, n, y1);
    char what[64];
    snprintf(what, sizeof what, "%s, %lld rows of %lld", f->name, (long long)rows,
             (long long)n_in);
    assert_close(y1, y0, n * rows, what);
    k->weight_destroy(plain);
    k->weight_destroy(packed);
    free(x);
    free(y0);
    free(y1);
    mapped_weight_free(&mw);
}

static void test_repack_matches_rows_as_stored(void **state)
{
    (void)state;
    struct splash_registry *r = splash_registry_global();
    int checked = 0;
    for (size_t p = 0; p < splash_registry_n_formats(r); p++) {
        const struct splash_format_plugin *fp = splash_registry_format(r, p);
        for (uint32_t i = 0; i < fp->n_types; i++) {
            const struct splash_format_type *f = fp->types[i];
            if (!f || !f->from_float || !repacked_on_this_cpu(f))
                continue;
            check_format(f);
            check_experts(f);
            check_large(f);
            checked++;
        }
    }
    if (!checked)
        skip(); /* no format repacks on this CPU: the engine reads rows as stored */
}

/* Pages are dropped only from file mappings: memory of the process's own is never
 * touched (it would read back as zeros). */
static void test_repack_drops_only_file_pages(void **state)
{
    (void)state;
    const size_t size = 64 << 10;
    char *own = malloc(size);
    assert_non_null(own);
    memset(own, 0x5a, size);
    assert_int_equal(splash_file_map_drop(own, size), 0);
    for (size_t i = 0; i < size; i++)
        assert_int_equal(own[i], 0x5a);
    free(own);
}

/* A per-tensor scale (llama.cpp's NVFP4 NAME.scale) multiplies the products exactly: a
 * power of two on every path (matmul, matmul_many, experts with one scale each), repacked
 * or not; other counts and non-finite values are refused. */
static void test_weight_scale_multiplies_products(void **state)
{
    (void)state;
    const struct splash_kernels *k = splash_kernels_get();
    if (!SPLASH_KERNELS_HAS(k, weight_set_scale))
        fail_msg("the kernel table has no weight_set_scale");
    const struct splash_format_type *f =
        splash_registry_format_by_name(splash_registry_global(), "NVFP4");
    assert_non_null(f);
    assert_true(f->flags & SPLASH_FORMAT_TENSOR_SCALE);
    const int64_t n_in = 256, rows = 40, n_experts = 3, n = 5;
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    float *y0 = calloc((size_t)(n * rows), sizeof *y0), *y1 = calloc((size_t)(n * rows), sizeof *y1);
    assert_true(x && y0 && y1);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand();
    for (int packed = 0; packed < 2; packed++) {
        struct mapped_weight mw;
        mapped_weight_make(&mw, f, n_in, rows, 1);
        struct splash_weight *w = weight_make(&mw.t, packed);
        k->matmul(pool, w, x, n, y0);
        struct splash_err err = {0};
        const float half = 0.5f, bad[2] = {1.0f, 2.0f}, inf = INFINITY;
        assert_int_not_equal(k->weight_set_scale(w, bad, 2, &err), SPLASH_OK);
        assert_int_not_equal(k->weight_set_scale(w, &inf, 1, &err), SPLASH_OK);
        assert_int_equal(k->weight_set_scale(w, &half, 1, &err), SPLASH_OK);
        k->matmul(pool, w, x, n, y1);
        for (int64_t i = 0; i < n * rows; i++)
            assert_true(y1[i] == 0.5f * y0[i]);
        const struct splash_weight *ws[2] = {w, w};
        float *y2 = calloc((size_t)(n * rows), sizeof *y2);
        assert_non_null(y2);
        float *ys[2] = {y1, y2};
        memset(y1, 0, (size_t)(n * rows) * sizeof *y1);
        k->matmul_many(pool, ws, 2, x, n, ys);
        for (int64_t i = 0; i < n * rows; i++)
            assert_true(y1[i] == 0.5f * y0[i] && y2[i] == 0.5f * y0[i]);
        free(y2);
        k->weight_destroy(w);
        mapped_weight_free(&mw);

        mapped_weight_make(&mw, f, n_in, rows, n_experts);
        w = weight_make(&mw.t, packed);
        int32_t expert[5] = {0, 2, 1, 2, 0};
        k->matmul_experts(pool, w, x, expert, n, y0);
        const float scales[3] = {2.0f, 0.25f, 8.0f};
        assert_int_equal(k->weight_set_scale(w, scales, n_experts, &err), SPLASH_OK);
        k->matmul_experts(pool, w, x, expert, n, y1);
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < rows; i++)
                assert_true(y1[r * rows + i] == scales[expert[r]] * y0[r * rows + i]);
        k->weight_destroy(w);
        mapped_weight_free(&mw);
    }
    free(x);
    free(y0);
    free(y1);
}

/* |y - the float product of the decoded weights| for a SPLASH_FORMAT_FINE_ACT weight: each
 * input's split activation is within half a step of it, a step at most amax / 16383 of its
 * 32-value block (rounded up to an fp16: a factor 1 + 2^-10), so the product is within
 * Σ |w| amax / 32000, plus float summation. Q8_0 activations (a step of amax / 127) miss
 * this by far: before the flag af4g64's first product was 4.91 times the bound. */
static double fine_excess(const float *wf, const float *x, int64_t n_in, const float *y)
{
    double ref = 0, mag = 0, bound = 0;
    for (int64_t k0 = 0; k0 < n_in; k0 += 32) {
        float amax = 0;
        for (int k = 0; k < 32; k++)
            amax = fmaxf(amax, fabsf(x[k0 + k]));
        for (int k = 0; k < 32; k++) {
            ref += (double)wf[k0 + k] * x[k0 + k];
            mag += fabs((double)wf[k0 + k] * x[k0 + k]);
            bound += fabs((double)wf[k0 + k]) * amax / 32000.0;
        }
    }
    return fabs(*y - ref) / (bound + 2e-6 * mag + 1e-6);
}

/* Affine (MLX) products follow the float product of the decoded weights on every path
 * (matmul, matmul_many, experts; repacked and as stored; tails of fewer than 16 rows),
 * with activations whose blocks hold an outlier (where Q8_0's step is widest). */
static void test_fine_activations(void **state)
{
    (void)state;
    const struct splash_kernels *k = splash_kernels_get();
    const char *names[] = {"af4g64", "af3g32", "af8g128", "af2g64"};
    const int64_t n_in = 512, rows = 40, n = 9, n_experts = 3;
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    float *wf = malloc((size_t)(n_experts * rows * n_in) * sizeof *wf);
    float *y = malloc((size_t)(n * rows) * sizeof *y), *y2 = malloc((size_t)(n * rows) * sizeof *y2);
    assert_true(x && wf && y && y2);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand() * (i % 32 == 5 ? 40.0f : 1.0f);
    double worst = 0;
    for (size_t f_i = 0; f_i < sizeof names / sizeof names[0]; f_i++) {
        const struct splash_format_type *f =
            splash_registry_format_by_name(splash_registry_global(), names[f_i]);
        assert_non_null(f);
        assert_true(f->flags & SPLASH_FORMAT_FINE_ACT);
        for (int packed = 0; packed < 2; packed++) {
            char what[96];
            struct mapped_weight mw;
            mapped_weight_make(&mw, f, n_in, rows, 1);
            k->to_float(&mw.t, wf);
            struct splash_weight *w = weight_make(&mw.t, packed);
            const struct splash_weight *ws[2] = {w, w};
            float *ys[2] = {y, y2};
            for (int path = 0; path < 2; path++) {
                if (path == 0)
                    k->matmul(pool, w, x, n, y);
                else
                    k->matmul_many(pool, ws, 2, x, n, ys);
                for (int64_t j = 0; j < n; j++)
                    for (int64_t i = 0; i < rows; i++) {
                        const double e = fine_excess(wf + i * n_in, x + j * n_in, n_in,
                                                     y + j * rows + i);
                        worst = fmax(worst, e);
                        snprintf(what, sizeof what, "%s%s %s", f->name,
                                 packed ? " repacked" : "", path ? "matmul_many" : "matmul");
                        if (e > 1.0)
                            fail_msg("%s: row %lld of activation %lld is %.3g times the "
                                     "split activations' bound",
                                     what, (long long)i, (long long)j, e);
                        if (path == 1 && y2[j * rows + i] != y[j * rows + i])
                            fail_msg("%s: the two weights' products differ", what);
                    }
            }
            k->weight_destroy(w);
            mapped_weight_free(&mw);

            mapped_weight_make(&mw, f, n_in, rows, n_experts);
            k->to_float(&mw.t, wf);
            w = weight_make(&mw.t, packed);
            int32_t expert[9] = {0, 2, 1, 2, 0, 1, 1, 2, 0};
            k->matmul_experts(pool, w, x, expert, n, y);
            for (int64_t j = 0; j < n; j++)
                for (int64_t i = 0; i < rows; i++) {
                    const double e = fine_excess(wf + (expert[j] * rows + i) * n_in,
                                                 x + j * n_in, n_in, y + j * rows + i);
                    worst = fmax(worst, e);
                    if (e > 1.0)
                        fail_msg("%s%s experts: row %lld of activation %lld is %.3g times "
                                 "the split activations' bound",
                                 f->name, packed ? " repacked" : "", (long long)i,
                                 (long long)j, e);
                }
            k->weight_destroy(w);
            mapped_weight_free(&mw);
        }
    }
    printf("  worst product at %.3f of the split activations' bound\n", worst);
    free(x), free(wf), free(y), free(y2);
}

/* The buffers a thread grows in the kernels (quantized activations, expert gathers) go
 * with the thread: threads that matmul and end leave the heap as it was (valgrind
 * reported each exited thread's activation scratch as lost). */
struct thread_job {
    const struct splash_kernels *k;
    const struct splash_weight *w;
    const float *x;
    int64_t n, rows;
};

static void *matmul_thread(void *arg)
{
    const struct thread_job *j = arg;
    float *y = malloc((size_t)(j->n * j->rows) * sizeof *y);
    int32_t *expert = calloc((size_t)j->n, sizeof *expert);
    if (y && expert) {
        j->k->matmul(pool, j->w, j->x, j->n, y);
        j->k->matmul_experts(pool, j->w, j->x, expert, j->n, y);
    }
    free(expert);
    free(y);
    return NULL;
}

static void test_thread_buffers_go_with_the_thread(void **state)
{
    (void)state;
    const struct splash_kernels *k = splash_kernels_get();
    const struct splash_format_type *f =
        splash_registry_format_by_name(splash_registry_global(), "Q8_0");
    assert_non_null(f);
    const int64_t n_in = 256, rows = 32, n = 64;
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand();
    struct mapped_weight mw;
    mapped_weight_make(&mw, f, n_in, rows, 1);
    struct splash_weight *w = weight_make(&mw.t, 0);
    struct thread_job job = {k, w, x, n, rows};
    pthread_t t;
    /* one thread first: whatever the kernels keep process-wide is made now */
    assert_int_equal(pthread_create(&t, NULL, matmul_thread, &job), 0);
    pthread_join(t, NULL);
    size_t before = mallinfo2().uordblks;
    for (int i = 0; i < 32; i++) {
        assert_int_equal(pthread_create(&t, NULL, matmul_thread, &job), 0);
        pthread_join(t, NULL);
    }
    size_t after = mallinfo2().uordblks;
    /* each thread grows ~17 KB of activations and ~80 KB of expert buffers */
    print_message("  heap in use after 32 threads: %+lld bytes\n", (long long)after - (long long)before);
    assert_true(after < before + 16384);
    k->weight_destroy(w);
    mapped_weight_free(&mw);
    free(x);
}

/* A second weight over the same mapped rows (a draft's head over its target's) shares the
 * first one's repacked image: released once, alive until its last user goes, and neither
 * takes a scale the other would see. */
static void test_same_tensor_shares_its_image(void **state)
{
    (void)state;
    const struct splash_kernels *k = splash_kernels_get();
    const struct splash_format_type *f =
        splash_registry_format_by_name(splash_registry_global(), "Q6_K"); /* a K-quant model's head */
    assert_non_null(f);
    if (!repacked_on_this_cpu(f))
        skip(); /* its rows are read as stored: nothing to share */
    const int64_t n_in = 256, rows = 64, n = 3;
    struct mapped_weight mw;
    mapped_weight_make(&mw, f, n_in, rows, 1);
    float *x = malloc((size_t)(n * n_in) * sizeof *x);
    float *y0 = calloc((size_t)(n * rows), sizeof *y0), *y1 = calloc((size_t)(n * rows), sizeof *y1);
    assert_true(x && y0 && y1);
    for (int64_t i = 0; i < n * n_in; i++)
        x[i] = frand();
    splash_matmul_release_images();
    struct splash_weight *a = weight_make(&mw.t, 1);
    k->matmul(pool, a, x, n, y0);
    size_t one = splash_matmul_release_images();
    assert_int_equal(one, splash_format_row_bytes(f, n_in) * (size_t)rows);
    struct splash_weight *b = weight_make(&mw.t, 1);
    k->matmul(pool, a, x, n, y0);
    k->matmul(pool, b, x, n, y1);
    assert_memory_equal(y0, y1, (size_t)(n * rows) * sizeof *y0);
    assert_int_equal(splash_matmul_release_images(), one); /* one image, not two */
    struct splash_err err = {0};
    const float half = 0.5f;
    assert_int_equal(k->weight_set_scale(b, &half, 1, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "shared"));
    k->weight_destroy(a);
    memset(y1, 0, (size_t)(n * rows) * sizeof *y1);
    k->matmul(pool, b, x, n, y1);
    assert_memory_equal(y0, y1, (size_t)(n * rows) * sizeof *y0);
    /* alone again, it takes a scale; a scaled weight is its owner's alone */
    assert_int_equal(k->weight_set_scale(b, &half, 1, &err), SPLASH_OK);
    struct splash_weight *c = weight_make(&mw.t, 1);
    assert_ptr_not_equal(c, b);
    k->weight_destroy(c);
    k->weight_destroy(b);
    mapped_weight_free(&mw);
    free(x);
    free(y0);
    free(y1);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repack_matches_rows_as_stored),
        cmocka_unit_test(test_fine_activations),
        cmocka_unit_test(test_repack_drops_only_file_pages),
        cmocka_unit_test(test_weight_scale_multiplies_products),
        cmocka_unit_test(test_thread_buffers_go_with_the_thread),
        cmocka_unit_test(test_same_tensor_shares_its_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
