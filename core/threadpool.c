/* Worker pool. Decode issues hundreds of short parallel sections per token, so
 * workers spin briefly on a generation counter before sleeping on a condvar. */
#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERATIONS 20000

struct splash_pool {
    int n_threads;
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint generation;
    atomic_int sleepers;
    atomic_int stop;
    /* the current task */
    splash_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
    atomic_int pending; /* workers still inside the task */
};

struct worker_arg {
    struct splash_pool *pool;
    int index;
};

static void run_chunks(struct splash_pool *p, int thread)
{
    for (;;) {
        int64_t begin = atomic_fetch_add(&p->next, p->chunk);
        if (begin >= p->n)
            break;
        int64_t end = begin + p->chunk < p->n ? begin + p->chunk : p->n;
        p->fn(p->ctx, begin, end, thread);
    }
}

static void *worker_main(void *arg)
{
    struct worker_arg *wa = arg;
    struct splash_pool *p = wa->pool;
    int index = wa->index;
    free(wa);
    /* the generation at creation (0), not at thread start: a task issued before this
     * thread first ran is still waiting for it */
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERATIONS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->lock);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->lock);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = atomic_load(&p->generation);
        run_chunks(p, index);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

int splash_physical_cores(void)
{
    /* count distinct (physical id, core id) pairs in /proc/cpuinfo */
    FILE *f = fopen("/proc/cpuinfo", "r");
    int pairs[1024][2];
    int n_pairs = 0, phys = 0, core = -1;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "physical id", 11))
                sscanf(strchr(line, ':') + 1, "%d", &phys);
            else if (!strncmp(line, "core id", 7))
                sscanf(strchr(line, ':') + 1, "%d", &core);
            else if (line[0] == '\n' && core >= 0) {
                int dup = 0;
                for (int i = 0; i < n_pairs; i++)
                    dup |= pairs[i][0] == phys && pairs[i][1] == core;
                if (!dup && n_pairs < 1024) {
                    pairs[n_pairs][0] = phys;
                    pairs[n_pairs][1] = core;
                    n_pairs++;
                }
                core = -1;
            }
        }
        fclose(f);
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_pairs > 0 && n_pairs <= online)
        return n_pairs;
    return online > 0 ? (int)online : 1;
}

struct splash_pool *splash_pool_create(int n_threads)
{
    if (n_threads <= 0)
        n_threads = splash_physical_cores();
    struct splash_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        wa->pool = p;
        wa->index = i;
        if (pthread_create(&p->workers[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n_threads = i;
            break;
        }
    }
    return p;
}

void splash_pool_destroy(struct splash_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

int splash_pool_threads(const struct splash_pool *p)
{
    return p ? p->n_threads : 1;
}

void splash_pool_parallel_for(struct splash_pool *p, int64_t n, int64_t grain, splash_range_fn fn,
                              void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->n_threads == 1 || n <= grain) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* a few chunks per thread balance uneven rows without much contention */
    int64_t chunk = (n + (int64_t)p->n_threads * 4 - 1) / ((int64_t)p->n_threads * 4);
    if (chunk < grain)
        chunk = grain;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    run_chunks(p, 0);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        cpu_relax();
}
