/* Worker pool. Decode issues hundreds of short parallel sections per token, so
 * workers spin briefly on a generation counter before sleeping on a condvar. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
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

/* Waiting threads pause this many times (~25 us), then yield the core until
 * SPIN_ITERATIONS, and a worker then sleeps: on a quiet machine the next section
 * comes within the pauses; on a busy one a yield lets a descheduled peer run. */
#define SPIN_PAUSES 2000
#define SPIN_ITERATIONS 20000

#define CACHE_LINE 64

#define GATE_CLOSED (1u << 30)

/* One thread's share of a section: [next, end), claimed a piece at a time from the
 * front by its owner and, once their own share is done, by the others. */
struct share {
    _Alignas(CACHE_LINE) atomic_llong next;
    int64_t end;
};

/* The counters every thread touches sit on lines of their own, apart from the task
 * the caller writes, so a worker polling `generation` does not steal the line the
 * others are claiming pieces on. */
struct splash_pool {
    int n_threads;
    pthread_t *workers;
    struct share *shares; /* n_threads */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_int sleepers;
    atomic_int stop;
    /* the current task */
    splash_range_fn fn;
    void *ctx;
    int64_t piece;
    atomic_ullong sections; /* sections handed to the workers (splash_pool_sections) */
    _Alignas(CACHE_LINE) atomic_uint generation;
    /* the section's gate: GATE_CLOSED once the caller has run (or taken) every piece, plus
     * the workers inside it. A worker enters by adding itself and backs out, touching
     * nothing, when the gate was closed; the caller waits only for those inside. */
    _Alignas(CACHE_LINE) atomic_uint gate;
    char pad[CACHE_LINE - sizeof(atomic_uint)];
};

struct worker_arg {
    struct splash_pool *pool;
    int index;
};

/* Each thread first runs its own contiguous share (claims on its own cache line cost
 * next to nothing), then helps the others with what is left of theirs, so equal
 * threads finish together within a small piece and one the OS took off its core is
 * covered by the rest (and, if it had not come in yet, does not hold the caller). */
static void run_chunks(struct splash_pool *p, int thread)
{
    int n_threads = p->n_threads;
    int64_t piece = p->piece;
    for (int k = 0; k < n_threads; k++) {
        struct share *sh = &p->shares[(thread + k) % n_threads];
        for (;;) {
            int64_t begin = atomic_fetch_add_explicit(&sh->next, piece, memory_order_relaxed);
            if (begin >= sh->end)
                break;
            int64_t end = begin + piece < sh->end ? begin + piece : sh->end;
            p->fn(p->ctx, begin, end, thread);
        }
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
                if (spins < SPIN_PAUSES)
                    cpu_relax();
                else
                    sched_yield();
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
        /* a section the caller finished without this thread (it was off its core) is
         * closed: nothing of it is read */
        if (!(atomic_fetch_add_explicit(&p->gate, 1, memory_order_acquire) & GATE_CLOSED))
            run_chunks(p, index);
        atomic_fetch_sub_explicit(&p->gate, 1, memory_order_release);
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
    struct splash_pool *p = aligned_alloc(CACHE_LINE, sizeof *p);
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->n_threads = n_threads;
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    p->shares = aligned_alloc(CACHE_LINE, (size_t)n_threads * sizeof *p->shares);
    if (!p->workers || !p->shares) {
        free(p->workers);
        free(p->shares);
        free(p);
        return NULL;
    }
    atomic_init(&p->gate, GATE_CLOSED);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n_threads = i;
            break;
        }
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
    free(p->shares);
    free(p);
}

unsigned long long splash_pool_sections(const struct splash_pool *p)
{
    return p ? atomic_load_explicit(&((struct splash_pool *)p)->sections, memory_order_relaxed)
             : 0;
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
    /* pieces of at least `grain`, some 32 to a share */
    int64_t per = (n + p->n_threads - 1) / p->n_threads;
    int64_t piece = per / 32 > grain ? per / 32 : grain;
    p->fn = fn;
    p->ctx = ctx;
    p->piece = piece;
    atomic_fetch_add_explicit(&p->sections, 1, memory_order_relaxed);
    for (int t = 0; t < p->n_threads; t++) {
        int64_t b = n * t / p->n_threads;
        p->shares[t].end = n * (t + 1) / p->n_threads;
        atomic_store_explicit(&p->shares[t].next, b, memory_order_relaxed);
    }
    /* open the gate (the task above published with it); a worker backing out of the last
     * section's closed gate is waited for, a moment */
    for (int spins = 0;; spins++) {
        unsigned closed = GATE_CLOSED;
        if (atomic_compare_exchange_weak_explicit(&p->gate, &closed, 0, memory_order_release,
                                                  memory_order_relaxed))
            break;
        if (spins < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield(); /* that worker was taken off its core between its two steps */
    }
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    run_chunks(p, 0);
    /* every piece is run or being run: close the gate and wait for the workers inside it
     * (each running its last piece). One the OS took off its core before it came in no
     * longer holds the section: it will find the gate closed. */
    atomic_fetch_or_explicit(&p->gate, GATE_CLOSED, memory_order_acq_rel);
    for (int spins = 0;
         atomic_load_explicit(&p->gate, memory_order_acquire) != GATE_CLOSED; spins++) {
        if (spins < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}
