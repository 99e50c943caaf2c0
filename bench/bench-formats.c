/* Format kernel benchmark: the machine's read bandwidth, then for every
 * registered format type its mat-vec speed (GB/s of weights read, and that as a
 * fraction of read bandwidth on as many threads) on 1 and 2 threads, the same
 * mat-vec with its weights in cache (the kernel's compute speed, which must be well
 * above a thread's share of bandwidth for the memory-resident one to reach it), and
 * 2-thread mat-mat GFLOP/s with 8 and 512 activation rows.
 *
 * Products run the way the engine's matmul runs them (kernels/matmul.c): the
 * engine's thread pool splits the weight rows into chunks, and each chunk calls the
 * kernel row's mul_rows once per tile of up to 8 activation rows (a mat-vec is
 * mul_rows with one activation row). A format with a load-time repack gets a second
 * row, named after its repacked format, measured on the image the engine would run
 * (its kernels take up to 128 activation rows per call). The mat-vec matrix (512 MiB) is larger than
 * every cache of the machine, so it streams from memory as a model's weights do.
 *
 * The machine may be shared: every figure is the best of several passes.
 *
 * usage: bench-formats [TYPE...]   (no arguments: every type of every plugin) */
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/read_bandwidth.h"
#include "core/host_impl.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/format.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define BW_BYTES (1ull << 30)    /* read-bandwidth buffer */
#define MAT_BYTES (512ull << 20) /* mat-vec weights: twice the largest cache (260 MiB L3) */
#define K_COLS 4096              /* inputs per weight row */
#define MV_PASSES 5              /* mat-vec passes per thread count; the best counts */
#define MVC_BYTES (768ull << 10) /* in-cache mat-vec weights: fit one core's L2 (2 MiB) */
#define MVC_SECONDS 0.2          /* time budget of each in-cache mat-vec measurement */
#define MM_SECONDS 0.25          /* time budget of each mat-mat measurement */
#define ACT_TILE 8               /* activation rows per mul_rows call, as in kernels/matmul.c */
#define MM_ROWS 4096             /* weight rows of the mat-mat measurements */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- products, as kernels/matmul.c runs them ---------------------------------- */

struct mm_task {
    const struct splash_kernel_row *row;
    const uint8_t *w;
    size_t w_stride;
    const uint8_t *act;
    size_t act_stride;
    int64_t n_act;
    float *out; /* (n_act, out_stride) */
    size_t out_stride;
    int64_t unit;     /* rows per interleaved group of a repacked layout, else 1 */
    int64_t act_tile; /* activation rows per mul_rows call */
    int64_t n_w;      /* rows in the product (pieces count units) */
};

static void mm_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct mm_task *m = ctx;
    begin *= m->unit;
    end = end * m->unit < m->n_w ? end * m->unit : m->n_w;
    for (int64_t j = 0; j < m->n_act; j += m->act_tile) {
        int64_t nj = m->n_act - j < m->act_tile ? m->n_act - j : m->act_tile;
        splash_format_mul_rows(m->row, K_COLS, m->w + (size_t)begin * m->w_stride, m->w_stride,
                               end - begin, m->act + (size_t)j * m->act_stride, m->act_stride, nj,
                               m->out + (size_t)j * m->out_stride + (size_t)begin, m->out_stride);
    }
}

/* Products of the first n_rows weight rows with n_act activation rows on the pool,
 * repeated until `budget` seconds passed (at least once); returns GFLOP/s, and the
 * seconds of one product in *one. */
static double run_mm(struct splash_pool *pool, struct mm_task *m, int64_t n_rows, double budget,
                     double *one)
{
    double t0 = now(), t = t0, best = 1e30;
    int64_t reps = 0;
    do {
        double s = now();
        m->n_w = n_rows;
        splash_pool_parallel_for(pool, (n_rows + m->unit - 1) / m->unit,
                                 (16 + m->unit - 1) / m->unit, mm_rows, m);
        t = now();
        if (t - s < best)
            best = t - s;
        reps++;
    } while (t - t0 < budget);
    if (one)
        *one = best;
    return 2.0 * (double)n_rows * K_COLS * (double)m->n_act / best / 1e9;
}

/* ---- one format ------------------------------------------------------------ */

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int wanted(const char *name, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return 1;
    return 0;
}

/* Activation rows a repacked kernel takes per call, as in kernels/matmul.c. */
#define PACKED_ACT_BLOCK 128

/* f's rows, or with `packed` its load-time layout (the repacked format's kernels over
 * the image f->repack makes), as kernels/matmul.c runs them. */
static void bench_type(struct splash_registry *r, struct splash_pool *pools[], const char *plugin,
                       const struct splash_format_type *f,
                       const struct splash_format_type *packed, const double bw[])
{
    const struct splash_format_type *a =
        f->act_type ? splash_registry_format_by_name(r, f->act_type) : NULL;
    size_t row_bytes = splash_format_row_bytes(f, K_COLS);
    size_t act_bytes = a ? splash_format_row_bytes(a, K_COLS) : 0;
    const struct splash_kernel_row *row =
        splash_format_pick_row(packed ? packed : f, splash_cpu_features());
    if (!row || !a || !a->from_float || !row_bytes || !act_bytes) {
        printf("%-11s %-9s  (skipped: no kernel row, activation format or %d-wide rows)\n", f->name,
               plugin, K_COLS);
        return;
    }
    int64_t n_rows = (int64_t)(MAT_BYTES / row_bytes);
    uint8_t *w = splash_alloc_aligned(64, (size_t)n_rows * row_bytes);
    uint8_t *act = splash_alloc_aligned(64, 512 * act_bytes);
    float *x = malloc(sizeof(float) * K_COLS);
    size_t out_floats =
        (size_t)n_rows > 512 * (size_t)MM_ROWS ? (size_t)n_rows : 512 * (size_t)MM_ROWS;
    float *out = malloc(sizeof(float) * out_floats);
    if (!w || !act || !x || !out) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* 16 distinct quantized rows, repeated (contents do not change the speed) */
    enum { DISTINCT = 16 };
    for (int i = 0; i < DISTINCT && i < n_rows; i++) {
        for (int k = 0; k < K_COLS; k++)
            x[k] = rnd();
        if (f->from_float)
            f->from_float(x, w + (size_t)i * row_bytes, K_COLS, NULL);
        else
            memset(w + (size_t)i * row_bytes, 0x11, row_bytes);
    }
    for (int64_t i = DISTINCT; i < n_rows; i++)
        memcpy(w + (size_t)i * row_bytes, w + (size_t)(i % DISTINCT) * row_bytes, row_bytes);
    for (int j = 0; j < 512; j++) {
        for (int k = 0; k < K_COLS; k++)
            x[k] = rnd();
        a->from_float(x, act + (size_t)j * act_bytes, K_COLS, NULL);
    }
    struct mm_task m = {row, w, row_bytes, act, act_bytes, 1, out, (size_t)n_rows, 1, ACT_TILE, 0};
    if (packed) {
        uint8_t *img = splash_alloc_aligned(64, (size_t)n_rows * row_bytes);
        if (!img) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        f->repack(K_COLS, w, n_rows, img);
        splash_free_aligned(w);
        m.w = w = img;
        m.unit = packed->row_group;
        m.act_tile = PACKED_ACT_BLOCK;
    }
    double mv[N_THREADS] = {0};
    for (int nt = 1; nt <= N_THREADS; nt++) {
        for (int rep = 0; rep < MV_PASSES; rep++) {
            double dt;
            run_mm(pools[nt - 1], &m, n_rows, 0, &dt);
            double gbs = (double)n_rows * (double)row_bytes / dt / 1e9;
            if (gbs > mv[nt - 1])
                mv[nt - 1] = gbs;
        }
    }
    /* the same mat-vec over the first MVC_BYTES of weights, again and again: in cache */
    int64_t n_mvc = (int64_t)(MVC_BYTES / row_bytes);
    double mvc[N_THREADS] = {0};
    for (int nt = 1; nt <= N_THREADS; nt++) {
        double dt;
        run_mm(pools[nt - 1], &m, n_mvc, MVC_SECONDS, &dt);
        mvc[nt - 1] = (double)n_mvc * (double)row_bytes / dt / 1e9;
    }
    /* mat-mat: compute-bound, over the first MM_ROWS weight rows */
    int64_t n_mm = n_rows < MM_ROWS ? n_rows : MM_ROWS;
    m.out_stride = (size_t)n_mm;
    m.n_act = 8;
    double gf8 = run_mm(pools[N_THREADS - 1], &m, n_mm, MM_SECONDS, NULL);
    m.n_act = 512;
    double gf512 = run_mm(pools[N_THREADS - 1], &m, n_mm, MM_SECONDS, NULL);
    printf("%-11s %-9s %-11s %5.2f %8.2f %5.0f%% %8.2f %5.0f%% %9.2f %9.2f %9.1f %10.1f\n",
           packed ? packed->name : f->name,
           plugin, row->isa, f->bits_per_weight, mv[0], 100 * mv[0] / bw[0], mv[1],
           100 * mv[1] / bw[1], mvc[0], mvc[1], gf8, gf512);
    fflush(stdout);
    free(out);
    free(x);
    splash_free_aligned(act);
    splash_free_aligned(w);
}

int main(int argc, char **argv)
{
    char cpu[256];
    splash_cpu_describe(cpu, sizeof cpu);
    printf("bench-formats: cpu %s; K = %d; mat-vec over %llu MiB of weights\n", cpu, K_COLS,
           (unsigned long long)(MAT_BYTES >> 20));

    uint64_t *buf = splash_alloc_aligned(64, BW_BYTES);
    if (!buf) {
        fprintf(stderr, "cannot allocate the bandwidth buffer\n");
        return 1;
    }
    for (size_t i = 0; i < BW_BYTES / 8; i++)
        buf[i] = i;
    double bw[N_THREADS];
    for (int nt = 1; nt <= N_THREADS; nt++)
        bw[nt - 1] = read_bandwidth(buf, BW_BYTES / 8, nt);
    splash_free_aligned(buf);
    printf("read bandwidth (1 GiB sum, best of 5): 1 thread %.2f GB/s, 2 threads %.2f GB/s\n\n",
           bw[0], bw[1]);

    struct splash_pool *pools[N_THREADS];
    for (int nt = 1; nt <= N_THREADS; nt++) {
        pools[nt - 1] = splash_pool_create(nt);
        if (!pools[nt - 1]) {
            fprintf(stderr, "cannot create a %d-thread pool\n", nt);
            return 1;
        }
    }
    struct splash_registry *r = splash_registry_create();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    printf("%-11s %-9s %-11s %5s %8s %6s %8s %6s %9s %9s %9s %10s\n", "type", "plugin", "isa",
           "bpw", "mv1 GB/s", "%bw1", "mv2 GB/s", "%bw2", "mvc1 GB/s", "mvc2 GB/s", "mm8 GF/s",
           "mm512 GF/s");
    for (size_t p = 0; p < splash_registry_n_formats(r); p++) {
        const struct splash_format_plugin *fp = splash_registry_format(r, p);
        for (uint32_t i = 0; i < fp->n_types; i++) {
            const struct splash_format_type *f = fp->types[i];
            if (!f || (f->flags & (SPLASH_FORMAT_ACTIVATION_ONLY | SPLASH_FORMAT_REPACKED)) ||
                !wanted(f->name, argc, argv))
                continue;
            bench_type(r, pools, fp->header.name, f, NULL, bw);
            const struct splash_format_type *to =
                f->repack_to ? splash_registry_format_by_name(r, f->repack_to) : NULL;
            if (to && f->repack && (to->flags & SPLASH_FORMAT_REPACKED))
                bench_type(r, pools, fp->header.name, f, to, bw);
        }
    }
    splash_registry_destroy(r);
    for (int nt = 1; nt <= N_THREADS; nt++)
        splash_pool_destroy(pools[nt - 1]);
    return 0;
}
