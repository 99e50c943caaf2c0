/* Format kernel benchmark: the machine's read bandwidth, then for every
 * registered format type its mat-vec speed (GB/s of weights read, and that as a
 * fraction of read bandwidth) on 1 and 2 threads, and 2-thread mat-mat GFLOP/s
 * with 8 and 512 activation rows.
 *
 * usage: bench-formats [TYPE...]   (no arguments: every type of every plugin) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/host_impl.h"
#include "core/registry.h"
#include "splash/format.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define BW_BYTES (1ull << 30)     /* read-bandwidth buffer */
#define MAT_BYTES (256ull << 20)  /* mat-vec weights: far larger than any cache */
#define K_COLS 4096               /* inputs per weight row */
#define MM_SECONDS 0.25           /* time budget of each mat-mat measurement */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- read bandwidth --------------------------------------------------------- */

struct sum_task {
    const uint64_t *p;
    size_t n;
    uint64_t result;
};

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    /* four independent accumulators so the loop is bound by loads only */
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        for (int k = 0; k < 4; k++) {
            a0 += p[i + k];
            a1 += p[i + 4 + k];
            a2 += p[i + 8 + k];
            a3 += p[i + 12 + k];
        }
    }
    return a0 + a1 + a2 + a3;
}

static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t a0 = 0, a1 = 0;
    for (size_t i = 0; i + 2 <= n; i += 2) {
        a0 += p[i];
        a1 += p[i + 1];
    }
    return a0 + a1;
}

static void *sum_thread(void *arg)
{
    struct sum_task *t = arg;
    t->result = __builtin_cpu_supports("avx2") ? sum_avx2(t->p, t->n) : sum_plain(t->p, t->n);
    return NULL;
}

/* Best of 3 passes over the buffer split between n_threads, in GB/s. */
static double read_bandwidth(const uint64_t *buf, size_t n_words, int n_threads)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[N_THREADS];
        struct sum_task tasks[N_THREADS];
        size_t per = n_words / (size_t)n_threads;
        double t0 = now();
        for (int t = 0; t < n_threads; t++) {
            tasks[t] = (struct sum_task){buf + (size_t)t * per, per, 0};
            pthread_create(&th[t], NULL, sum_thread, &tasks[t]);
        }
        uint64_t total = 0;
        for (int t = 0; t < n_threads; t++) {
            pthread_join(th[t], NULL);
            total += tasks[t].result;
        }
        double dt = now() - t0;
        if (total == 42) /* keep the sum alive */
            fputc(' ', stderr);
        double gbs = (double)(per * (size_t)n_threads * 8) / dt / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

/* ---- kernels ------------------------------------------------------------------- */

struct mm_task {
    const struct splash_kernel_row *row;
    const uint8_t *w;
    size_t w_stride;
    int64_t w_begin, w_end; /* weight rows of this thread */
    const uint8_t *act;
    size_t act_stride;
    int64_t n_act;
    float *out;             /* per-thread scratch: n_act x chunk */
    double deadline;        /* 0: one pass over [w_begin, w_end) */
    double flops;
};

enum { CHUNK = 64 };

static void *mm_thread(void *arg)
{
    struct mm_task *t = arg;
    int64_t i = t->w_begin;
    double flops = 0;
    for (;;) {
        int64_t n_w = t->w_end - i < CHUNK ? t->w_end - i : CHUNK;
        splash_format_mul_rows(t->row, K_COLS, t->w + (size_t)i * t->w_stride, t->w_stride, n_w,
                               t->act, t->act_stride, t->n_act, t->out, CHUNK);
        flops += 2.0 * (double)n_w * K_COLS * (double)t->n_act;
        i += n_w;
        if (i >= t->w_end) {
            if (!t->deadline)
                break;
            i = t->w_begin;
        }
        if (t->deadline && now() >= t->deadline)
            break;
    }
    t->flops = flops;
    return NULL;
}

/* Runs n_threads over weight rows [0, n_rows); returns seconds (and flops). */
static double run_mm(const struct splash_kernel_row *row, const uint8_t *w, size_t w_stride,
                     int64_t n_rows, const uint8_t *act, size_t act_stride, int64_t n_act,
                     float *scratch, int n_threads, double budget, double *flops)
{
    pthread_t th[N_THREADS];
    struct mm_task tasks[N_THREADS];
    double t0 = now();
    for (int t = 0; t < n_threads; t++) {
        int64_t b = n_rows * t / n_threads, e = n_rows * (t + 1) / n_threads;
        tasks[t] = (struct mm_task){row,    w,     w_stride, b, e, act, act_stride, n_act,
                                    scratch + (size_t)t * CHUNK * (size_t)n_act,
                                    budget ? t0 + budget : 0, 0};
        pthread_create(&th[t], NULL, mm_thread, &tasks[t]);
    }
    *flops = 0;
    for (int t = 0; t < n_threads; t++) {
        pthread_join(th[t], NULL);
        *flops += tasks[t].flops;
    }
    return now() - t0;
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

static void bench_type(struct splash_registry *r, const char *plugin,
                       const struct splash_format_type *f, double bw1, double bw2)
{
    const struct splash_format_type *a =
        f->act_type ? splash_registry_format_by_name(r, f->act_type) : NULL;
    size_t row_bytes = splash_format_row_bytes(f, K_COLS);
    size_t act_bytes = a ? splash_format_row_bytes(a, K_COLS) : 0;
    const struct splash_kernel_row *row = splash_format_pick_row(f, splash_cpu_features());
    if (!row || !a || !a->from_float || !row_bytes || !act_bytes) {
        printf("%-10s %-9s  (skipped: no kernel row, activation format or %d-wide rows)\n",
               f->name, plugin, K_COLS);
        return;
    }
    int64_t n_rows = (int64_t)(MAT_BYTES / row_bytes);
    uint8_t *w = splash_alloc_aligned(64, (size_t)n_rows * row_bytes);
    uint8_t *act = splash_alloc_aligned(64, 512 * act_bytes);
    float *x = malloc(sizeof(float) * K_COLS);
    float *scratch = malloc(sizeof(float) * CHUNK * 512 * N_THREADS);
    if (!w || !act || !x || !scratch) {
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
    double mv[2] = {0, 0}, flops;
    for (int nt = 1; nt <= 2; nt++) {
        for (int rep = 0; rep < 3; rep++) {
            double dt = run_mm(row, w, row_bytes, n_rows, act, act_bytes, 1, scratch, nt, 0, &flops);
            double gbs = (double)n_rows * (double)row_bytes / dt / 1e9;
            if (gbs > mv[nt - 1])
                mv[nt - 1] = gbs;
        }
    }
    double dt8 = run_mm(row, w, row_bytes, n_rows, act, act_bytes, 8, scratch, 2, 0, &flops);
    double gf8 = flops / dt8 / 1e9;
    /* 512 rows: compute-bound; a time budget over the first 4096 weight rows */
    int64_t n512 = n_rows < 4096 ? n_rows : 4096;
    double dt512 =
        run_mm(row, w, row_bytes, n512, act, act_bytes, 512, scratch, 2, MM_SECONDS, &flops);
    double gf512 = flops / dt512 / 1e9;
    printf("%-10s %-9s %-11s %5.2f %8.2f %5.0f%% %8.2f %5.0f%% %9.1f %9.1f\n", f->name, plugin,
           row->isa, f->bits_per_weight, mv[0], 100 * mv[0] / bw1, mv[1], 100 * mv[1] / bw2, gf8,
           gf512);
    fflush(stdout);
    free(scratch);
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
    double bw1 = read_bandwidth(buf, BW_BYTES / 8, 1);
    double bw2 = read_bandwidth(buf, BW_BYTES / 8, 2);
    splash_free_aligned(buf);
    printf("read bandwidth (1 GiB sum): 1 thread %.2f GB/s, 2 threads %.2f GB/s\n\n", bw1, bw2);

    struct splash_registry *r = splash_registry_create();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    printf("%-10s %-9s %-11s %5s %8s %6s %8s %6s %9s %9s\n", "type", "plugin", "isa", "bpw",
           "mv1 GB/s", "%bw1", "mv2 GB/s", "%bw2", "mm8 GF/s", "mm512 GF/s");
    for (size_t p = 0; p < splash_registry_n_formats(r); p++) {
        const struct splash_format_plugin *fp = splash_registry_format(r, p);
        for (uint32_t i = 0; i < fp->n_types; i++) {
            const struct splash_format_type *f = fp->types[i];
            if (!f || (f->flags & SPLASH_FORMAT_ACTIVATION_ONLY) || !wanted(f->name, argc, argv))
                continue;
            bench_type(r, fp->header.name, f, bw1, bw2);
        }
    }
    splash_registry_destroy(r);
    return 0;
}
