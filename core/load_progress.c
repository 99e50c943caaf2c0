#include "core/load_progress.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/host_impl.h"

#define PROGRESS_PERIOD_S 2

static atomic_uint_least64_t bytes_prepared;

void splash_load_progress_add(uint64_t bytes)
{
    atomic_fetch_add(&bytes_prepared, bytes);
}

struct splash_load_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    int done;
    char name[256];
    uint64_t total, base; /* base: the kernels' count when the load began */
};

static void *progress_main(void *arg)
{
    struct splash_load_progress *p = arg;
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        at.tv_sec += PROGRESS_PERIOD_S;
        while (!p->done) {
            int rc = pthread_cond_timedwait(&p->done_cond, &p->lock, &at);
            if (rc == ETIMEDOUT)
                break;
        }
        if (p->done)
            break;
        uint64_t got = atomic_load(&bytes_prepared) - p->base;
        double share = p->total ? 100.0 * (double)got / (double)p->total : 0;
        splash_log(SPLASH_LOG_INFO, NULL, "Loading · %s · %.0f%% of %.2f GiB of weights",
                   p->name, share > 100 ? 100 : share,
                   (double)p->total / (1024.0 * 1024.0 * 1024.0));
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

struct splash_load_progress *splash_load_progress_start(const char *name, uint64_t total_bytes)
{
    struct splash_load_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    const char *base = strrchr(name, '/');
    snprintf(p->name, sizeof p->name, "%s", base ? base + 1 : name);
    p->total = total_bytes;
    p->base = atomic_load(&bytes_prepared);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->done_cond, NULL);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        pthread_cond_destroy(&p->done_cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void splash_load_progress_stop(struct splash_load_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = 1;
    pthread_cond_signal(&p->done_cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->done_cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
