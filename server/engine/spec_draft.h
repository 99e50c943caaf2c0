/* The DFlash2 draft as the engine's proposer (--draft-model): loaded and checked against
 * the target, a context per request fed the target's taps of its committed rows, and a
 * block of proposals per cycle (server/engine/speculate.h for the cycle itself). */
#ifndef SPLASH_ENGINE_SPEC_DRAFT_H
#define SPLASH_ENGINE_SPEC_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "splash/draft.h"
#include "splash/family.h"
#include "splash/status.h"

struct splash_registry;
struct splash_meta;
struct splash_pool;

struct splash_spec_draft {
    const struct splash_draft_plugin *plugin;
    struct splash_meta *meta;
    void *model;
    struct splash_draft_info info;
    struct splash_draft_verdict verdict;
    float *taps;        /* a step's rows' taps: rows x n_taps x n_embd */
    size_t taps_rows;
};

/* Opens the draft directory, selects the plugin that takes it with this target (its
 * refusal names the key) and builds it. */
enum splash_status splash_spec_draft_load(struct splash_spec_draft *d,
                                          const struct splash_registry *r, const char *dir,
                                          const struct splash_meta *target,
                                          struct splash_pool *pool, struct splash_err *err);
void splash_spec_draft_free(struct splash_spec_draft *d);
/* Room for a step's rows of taps; NULL when out of memory. */
float *splash_spec_draft_taps(struct splash_spec_draft *d, size_t rows);
/* Floats one row's taps hold. */
int64_t splash_spec_draft_tap_width(const struct splash_spec_draft *d);

#endif
