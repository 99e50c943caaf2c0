/* Elastic expert chunks (server.md "Streamed experts"; PLATFORM.md: Linux PSI and
 * MemAvailable stand for macOS's memory pressure). An automatic store starts at its floor
 * and takes its released chunks while the host leaves room for them beside the 1 GiB
 * margin. Between commands, once a second, the engine samples /proc/pressure/memory and
 * the host's room (MemAvailable, the cgroup limit): while memory is short it gives back
 * the store's last chunk above the floor, one a second; after 30 s of calm (no shortage,
 * no chunk given back, no try) it tries to take one back, which needs the margin and the
 * chunk to spare. Each chunk given or taken back logs a line.
 *
 * Memory is short when PSI's some avg10 reaches 10% or its full avg10 2% (tasks stalled
 * on memory), or the host's room falls under the margin. Test hooks: SPLASH_TEST_PSI_FILE
 * and SPLASH_TEST_MEMINFO_FILE replace /proc/pressure/memory and /proc/meminfo (files in
 * their own formats), SPLASH_TEST_CLOCK_FILE a file holding the seconds the clock reads. */
#ifndef SPLASH_ENGINE_EXPERT_MEMORY_ELASTIC_H
#define SPLASH_ENGINE_EXPERT_MEMORY_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "core/registry.h"

#define SPLASH_EXPERT_CALM_SECONDS 30.0
#define SPLASH_PSI_SOME_SHORT 10.0
#define SPLASH_PSI_FULL_SHORT 2.0

/* One look at the host's memory. */
struct splash_memory_sample {
    int psi;            /* 1: the PSI file was read */
    double some10, full10; /* avg10 of its some and full lines, in percent */
    uint64_t room;      /* MemAvailable, or the cgroup's room where that is less */
    int short_of_memory;
    char why[160];      /* what made it short, for the console line */
};

/* PSI (psi_path NULL: /proc/pressure/memory; a kernel without it counts as calm) and the
 * room (meminfo_path NULL: /proc/meminfo). Returns 0, or -1 when MemAvailable cannot be
 * read. */
int splash_memory_sample_read(const char *psi_path, const char *meminfo_path,
                              struct splash_memory_sample *out);

struct splash_expert_elastic {
    int on;
    const struct splash_family_plugin *family;
    void *model;
    const char *psi_path, *meminfo_path, *clock_path; /* the hooks, or NULL */
    double last_sample, last_unrest;
    int released; /* the weights were released: no chunk comes back until a request runs */
};

/* on: the model's store is elastic (its floor below its cap). Reads the hooks. */
void splash_expert_elastic_init(struct splash_expert_elastic *x,
                                const struct splash_family_plugin *family, void *model);
/* Seconds on the elastic clock (CLOCK_MONOTONIC, or the clock hook's). */
double splash_expert_elastic_now(const struct splash_expert_elastic *x);
/* At the start: takes chunks while the room holds them beside the margin. Returns the
 * chunks taken; a line for each goes to log. */
int splash_expert_elastic_start(struct splash_expert_elastic *x,
                                void (*log)(void *ctx, const char *line), void *ctx);
/* Between commands: -1 a chunk was given back, 1 one was taken back, 0 neither. busy:
 * requests are in the engine (after a release, the weights are back). */
int splash_expert_elastic_tick(struct splash_expert_elastic *x, int busy,
                               void (*log)(void *ctx, const char *line), void *ctx);
/* The weights' release (idle, POST /v1/memory/release): every chunk above the floor goes;
 * they come back a chunk at a time, as after pressure, once requests run again. Returns
 * the bytes given back. */
uint64_t splash_expert_elastic_release(struct splash_expert_elastic *x,
                                       void (*log)(void *ctx, const char *line), void *ctx);

#endif
