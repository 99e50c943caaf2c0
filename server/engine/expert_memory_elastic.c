/* Elastic expert chunks under memory pressure (see expert_memory_elastic.h). */
#include "server/engine/expert_memory_elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/family.h"
#include "core/memory_plan.h"

#define MIB (1024.0 * 1024.0)

/* /proc/pressure/memory: "some avg10=0.00 avg60=... total=N", then the same for "full". */
static int read_psi(const char *path, double *some10, double *full10)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        double v;
        if (sscanf(line, "some avg10=%lf", &v) == 1) {
            *some10 = v;
            found |= 1;
        } else if (sscanf(line, "full avg10=%lf", &v) == 1) {
            *full10 = v;
            found |= 2;
        }
    }
    fclose(f);
    return found == 3 ? 0 : -1;
}

int splash_memory_sample_read(const char *psi_path, const char *meminfo_path,
                              struct splash_memory_sample *out)
{
    memset(out, 0, sizeof *out);
    out->psi = read_psi(psi_path ? psi_path : "/proc/pressure/memory", &out->some10,
                        &out->full10) == 0;
    struct splash_memory_budget b;
    struct splash_err err;
    if (splash_memory_budget_read(0, meminfo_path, NULL, &b, &err))
        return -1;
    out->room = b.mem_available < b.cgroup_room ? b.mem_available : b.cgroup_room;
    if (out->psi && out->full10 >= SPLASH_PSI_FULL_SHORT)
        snprintf(out->why, sizeof out->why, "memory pressure: PSI full avg10 %.2f%%",
                 out->full10);
    else if (out->psi && out->some10 >= SPLASH_PSI_SOME_SHORT)
        snprintf(out->why, sizeof out->why, "memory pressure: PSI some avg10 %.2f%%",
                 out->some10);
    else if (out->room < SPLASH_MEMORY_MARGIN)
        snprintf(out->why, sizeof out->why,
                 "the host has %.1f MiB free (%s), under its 1 GiB margin", (double)out->room / MIB,
                 b.bound);
    out->short_of_memory = out->why[0] != 0;
    return 0;
}

void splash_expert_elastic_init(struct splash_expert_elastic *x,
                                const struct splash_family_plugin *family, void *model)
{
    memset(x, 0, sizeof *x);
    x->family = family;
    x->model = model;
    struct splash_expert_stats s;
    x->on = splash_family_expert_stats(family, model, &s) && s.floor_bytes < s.cap_bytes;
    x->psi_path = getenv("SPLASH_TEST_PSI_FILE");
    x->meminfo_path = getenv("SPLASH_TEST_MEMINFO_FILE");
    x->clock_path = getenv("SPLASH_TEST_CLOCK_FILE");
    x->last_sample = -1e9;
}

double splash_expert_elastic_now(const struct splash_expert_elastic *x)
{
    if (x->clock_path) {
        FILE *f = fopen(x->clock_path, "r");
        double t = 0;
        if (f) {
            if (fscanf(f, "%lf", &t) != 1)
                t = 0;
            fclose(f);
        }
        return t;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void chunk_line(const struct splash_expert_elastic *x, const char *verb, uint64_t bytes,
                       const char *why, void (*log)(void *, const char *), void *ctx)
{
    struct splash_expert_stats s;
    splash_family_expert_stats(x->family, x->model, &s);
    char line[384];
    snprintf(line, sizeof line,
             "Expert store %s a chunk of %.1f MiB (%s) · %d of %d chunks live, %d slots", verb,
             (double)bytes / MIB, why, s.chunks, s.cap_chunks, s.slots);
    log(ctx, line);
}

/* Takes back one chunk the room holds beside the margin (room: what is left of it). */
static int take_back(struct splash_expert_elastic *x, uint64_t *room,
                     void (*log)(void *, const char *), void *ctx)
{
    if (*room <= SPLASH_MEMORY_MARGIN)
        return 0;
    uint64_t spare = *room - SPLASH_MEMORY_MARGIN;
    uint64_t bytes = splash_family_expert_resize(x->family, x->model, 1, spare);
    if (!bytes)
        return 0;
    char why[128];
    snprintf(why, sizeof why, "%.1f MiB free beside the 1 GiB margin", (double)spare / MIB);
    chunk_line(x, "took back", bytes, why, log, ctx);
    *room -= bytes; /* the chunk's pages count once touched: count them now */
    return 1;
}

int splash_expert_elastic_start(struct splash_expert_elastic *x,
                                void (*log)(void *ctx, const char *line), void *ctx)
{
    if (!x->on)
        return 0;
    x->last_unrest = splash_expert_elastic_now(x); /* the start is a try */
    struct splash_memory_sample m;
    if (splash_memory_sample_read(x->psi_path, x->meminfo_path, &m) || m.short_of_memory)
        return 0;
    int n = 0;
    while (take_back(x, &m.room, log, ctx))
        n++;
    return n;
}

uint64_t splash_expert_elastic_release(struct splash_expert_elastic *x,
                                       void (*log)(void *ctx, const char *line), void *ctx)
{
    if (!x->on)
        return 0;
    uint64_t all = 0, bytes;
    while ((bytes = splash_family_expert_resize(x->family, x->model, 0, 0))) {
        chunk_line(x, "gave back", bytes, "the weights are released", log, ctx);
        all += bytes;
    }
    x->released = 1;
    x->last_unrest = splash_expert_elastic_now(x);
    return all;
}

int splash_expert_elastic_tick(struct splash_expert_elastic *x, int busy,
                               void (*log)(void *ctx, const char *line), void *ctx)
{
    if (!x->on)
        return 0;
    if (busy)
        x->released = 0;
    double now = splash_expert_elastic_now(x);
    if (now - x->last_sample < 1.0 && now >= x->last_sample)
        return 0;
    x->last_sample = now;
    struct splash_memory_sample m;
    if (splash_memory_sample_read(x->psi_path, x->meminfo_path, &m))
        return 0;
    if (m.short_of_memory) {
        x->last_unrest = now;
        uint64_t bytes = splash_family_expert_resize(x->family, x->model, 0, 0);
        if (!bytes)
            return 0;
        chunk_line(x, "gave back", bytes, m.why, log, ctx);
        return -1;
    }
    if (x->released || now - x->last_unrest < SPLASH_EXPERT_CALM_SECONDS)
        return 0;
    x->last_unrest = now; /* a try, taken or not, waits 30 s for the next */
    return take_back(x, &m.room, log, ctx);
}
