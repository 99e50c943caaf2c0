/* Progress bars and lines for downloads. */
#include "server/hub/progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct splash_hub_progress {
    size_t n;
    const char *const *names;
    const uint64_t *sizes;
    _Atomic uint64_t *done;
    uint64_t *start_bytes; /* bytes present when the first byte moved: a resume's head start */
    uint64_t total;
    int tty;
    double line_seconds;
    splash_hub_line_fn line;
    double started;
    int drawn_lines;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stopping;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void splash_hub_format_bytes(uint64_t b, char *buf, size_t size)
{
    if (b >= 1000000000ull)
        snprintf(buf, size, "%.2f GB", (double)b / 1e9);
    else if (b >= 1000000ull)
        snprintf(buf, size, "%.1f MB", (double)b / 1e6);
    else if (b >= 1000ull)
        snprintf(buf, size, "%.1f kB", (double)b / 1e3);
    else
        snprintf(buf, size, "%llu B", (unsigned long long)b);
}

static void format_eta(double seconds, char *buf, size_t size)
{
    if (seconds < 0 || seconds > 99 * 3600)
        snprintf(buf, size, "--:--");
    else if (seconds >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", (int)seconds / 3600, (int)seconds / 60 % 60,
                 (int)seconds % 60);
    else
        snprintf(buf, size, "%d:%02d", (int)seconds / 60, (int)seconds % 60);
}

/* "[#####.....] 12.3 MB / 45.6 MB  3.4 MB/s  ETA 0:12" for done of size. */
static void bar(char *buf, size_t size, const char *label, uint64_t done, uint64_t total,
                double rate)
{
    char have[32], all[32], speed[32], eta[16];
    int width = 24, filled = total ? (int)((double)done / (double)total * width) : width;
    char cells[32];
    for (int i = 0; i < width; i++)
        cells[i] = i < filled ? '#' : '.';
    cells[width] = 0;
    splash_hub_format_bytes(done, have, sizeof have);
    splash_hub_format_bytes(total, all, sizeof all);
    splash_hub_format_bytes((uint64_t)rate, speed, sizeof speed);
    format_eta(rate > 0 ? (double)(total - done) / rate : -1, eta, sizeof eta);
    snprintf(buf, size, "%-28.28s [%s] %9s / %-9s %9s/s  ETA %s", label, cells, have, all, speed,
             eta);
}

static uint64_t sum_done(struct splash_hub_progress *p, uint64_t *moved)
{
    uint64_t d = 0, m = 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t v = atomic_load(&p->done[i]);
        d += v;
        m += v > p->start_bytes[i] ? v - p->start_bytes[i] : 0;
    }
    *moved = m;
    return d;
}

static void draw(struct splash_hub_progress *p, int final)
{
    uint64_t moved, done = sum_done(p, &moved);
    double elapsed = now() - p->started;
    double rate = elapsed > 0.2 ? (double)moved / elapsed : 0;
    char line[256];
    if (!p->tty) {
        char have[32], all[32], speed[32], eta[16];
        splash_hub_format_bytes(done, have, sizeof have);
        splash_hub_format_bytes(p->total, all, sizeof all);
        splash_hub_format_bytes((uint64_t)rate, speed, sizeof speed);
        format_eta(rate > 0 ? (double)(p->total - done) / rate : -1, eta, sizeof eta);
        snprintf(line, sizeof line, "Downloading · %s of %s (%d%%), %s/s, %s %s", have, all,
                 p->total ? (int)(100.0 * (double)done / (double)p->total) : 100, speed,
                 final ? "in" : "ETA", final ? "" : eta);
        if (final) {
            char took[16];
            format_eta(elapsed, took, sizeof took);
            snprintf(line, sizeof line, "Downloading · %s in %s (%s/s)", have, took, speed);
        }
        p->line(line);
        return;
    }
    if (p->drawn_lines)
        fprintf(stderr, "\033[%dA", p->drawn_lines);
    for (size_t i = 0; i < p->n; i++) {
        uint64_t d = atomic_load(&p->done[i]);
        double r = elapsed > 0.2 && d > p->start_bytes[i] ? (double)(d - p->start_bytes[i]) / elapsed
                                                          : 0;
        bar(line, sizeof line, p->names[i], d, p->sizes[i], r);
        fprintf(stderr, "\r%s\033[K\n", line);
    }
    bar(line, sizeof line, "total", done, p->total, rate);
    fprintf(stderr, "\r%s\033[K\n", line);
    p->drawn_lines = (int)p->n + 1;
    fflush(stderr);
}

static void *run(void *arg)
{
    struct splash_hub_progress *p = arg;
    double period = p->tty ? 0.5 : p->line_seconds;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)period;
        until.tv_nsec += (long)((period - (double)(time_t)period) * 1e9);
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->cond, &p->lock, &until);
        if (!p->stopping)
            draw(p, 0);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

struct splash_hub_progress *splash_hub_progress_start(const char *const *names,
                                                      const uint64_t *sizes, size_t n, int tty,
                                                      double line_seconds, splash_hub_line_fn line)
{
    struct splash_hub_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->done = calloc(n ? n : 1, sizeof *p->done);
    p->start_bytes = calloc(n ? n : 1, sizeof *p->start_bytes);
    if (!p->done || !p->start_bytes) {
        free(p->done);
        free(p->start_bytes);
        free(p);
        return NULL;
    }
    p->n = n;
    p->names = names;
    p->sizes = sizes;
    for (size_t i = 0; i < n; i++)
        p->total += sizes[i];
    p->tty = tty;
    p->line_seconds = line_seconds > 0 ? line_seconds : 5;
    p->line = line;
    p->started = now();
    for (size_t i = 0; i < n; i++)
        p->start_bytes[i] = UINT64_MAX;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->thread, NULL, run, p)) {
        free(p->done);
        free(p->start_bytes);
        free(p);
        return NULL;
    }
    return p;
}

void splash_hub_progress_set(struct splash_hub_progress *p, size_t i, uint64_t bytes)
{
    if (!p || i >= p->n)
        return;
    if (p->start_bytes[i] == UINT64_MAX || bytes < p->start_bytes[i])
        p->start_bytes[i] = bytes; /* racy only against the drawer, which tolerates it */
    atomic_store(&p->done[i], bytes);
}

void splash_hub_progress_stop(struct splash_hub_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    for (size_t i = 0; i < p->n; i++)
        if (p->start_bytes[i] == UINT64_MAX)
            p->start_bytes[i] = 0;
    draw(p, 1);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->done);
    free(p->start_bytes);
    free(p);
}
