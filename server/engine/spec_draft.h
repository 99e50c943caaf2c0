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

/* The draft's context at a prefix-cache restore point (a fork of the request's that took
 * the point), so that a request resumed there drafts as one that prefilled it. */
struct splash_spec_draft_point {
    void *point;      /* the restore point's sequence: its key */
    int32_t n;        /* tokens[0..n) */
    int32_t *tokens;
    void *dctx;
    struct splash_spec_draft_point *next;
};

struct splash_spec_draft {
    const struct splash_draft_plugin *plugin;
    struct splash_meta *meta; /* the draft's checkpoint (NULL: the target's own MTP layers) */
    void *model;
    struct splash_draft_info info;
    struct splash_draft_verdict verdict;
    float *taps;        /* a step's rows' taps: rows x n_taps x n_embd */
    size_t taps_rows;
    struct splash_spec_draft_point *points; /* newest first */
    uint64_t points_bytes;                  /* their contexts' (info.ctx_bytes each) */
};

/* Opens the draft directory, selects the plugin that takes it with this target (its
 * refusal names the key) and builds it. */
enum splash_status splash_spec_draft_load(struct splash_spec_draft *d,
                                          const struct splash_registry *r, const char *dir,
                                          const struct splash_meta *target,
                                          struct splash_pool *pool, struct splash_err *err);
/* The target's own MTP (nextn) layers as its draft (the target's meta is the draft's, not
 * owned); the refusal names the model and why. */
enum splash_status splash_spec_draft_load_nextn(struct splash_spec_draft *d,
                                                const struct splash_registry *r,
                                                const struct splash_meta *target,
                                                struct splash_pool *pool, struct splash_err *err);
void splash_spec_draft_free(struct splash_spec_draft *d);
/* 1 when the plugin forks contexts (ABI 1.4): restore points can keep them. */
int splash_spec_draft_can_keep(const struct splash_spec_draft *d);
/* Keeps a fork of dctx (which holds tokens[0..n)'s rows) beside the restore point; a
 * context that cannot be forked (out of memory) is not kept. */
void splash_spec_draft_keep(struct splash_spec_draft *d, void *point, const int32_t *tokens,
                            int32_t n, const void *dctx);
/* Drops what was kept beside the point, if anything. */
void splash_spec_draft_forget(struct splash_spec_draft *d, void *point);
/* A fork of the context kept at exactly tokens[0..n), or NULL (none kept there, or no
 * memory). */
void *splash_spec_draft_resume(struct splash_spec_draft *d, const int32_t *tokens, int32_t n);

/* Room for a step's rows of taps; NULL when out of memory. */
float *splash_spec_draft_taps(struct splash_spec_draft *d, size_t rows);
/* Floats one row's taps hold. */
int64_t splash_spec_draft_tap_width(const struct splash_spec_draft *d);

#endif
