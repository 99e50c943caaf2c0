/* Loading the DFlash2 draft for the engine, the step's taps buffer and the contexts kept
 * beside restore points. */
#include "server/engine/spec_draft.h"

#include <stdlib.h>
#include <string.h>

#include "core/draft.h"
#include "core/meta.h"

enum splash_status splash_spec_draft_load(struct splash_spec_draft *d,
                                          const struct splash_registry *r, const char *dir,
                                          const struct splash_meta *target,
                                          struct splash_pool *pool, struct splash_err *err)
{
    memset(d, 0, sizeof *d);
    enum splash_status st;
    if ((st = splash_draft_open(r, dir, 0, &d->meta, err)))
        return st;
    if ((st = splash_draft_select(r, d->meta, target, &d->plugin, &d->verdict, err))) {
        splash_spec_draft_free(d);
        return st;
    }
    const struct splash_draft_opts opts = {.pool = pool};
    if ((st = splash_draft_create(r, d->plugin, d->meta, target, &opts, &d->model, &d->info,
                                  err))) {
        d->model = NULL;
        splash_spec_draft_free(d);
        return st;
    }
    return SPLASH_OK;
}

enum splash_status splash_spec_draft_load_nextn(struct splash_spec_draft *d,
                                                const struct splash_registry *r,
                                                const struct splash_meta *target,
                                                struct splash_pool *pool, struct splash_err *err)
{
    memset(d, 0, sizeof *d);
    enum splash_status st;
    if ((st = splash_draft_select_nextn(r, target, &d->plugin, &d->verdict, err)))
        return st;
    const struct splash_draft_opts opts = {.pool = pool};
    if ((st = splash_draft_create(r, d->plugin, target, target, &opts, &d->model, &d->info,
                                  err))) {
        d->model = NULL;
        splash_spec_draft_free(d);
        return st;
    }
    return SPLASH_OK;
}

void splash_spec_draft_free(struct splash_spec_draft *d)
{
    while (d->points)
        splash_spec_draft_forget(d, d->points->point);
    if (d->model)
        splash_draft_destroy(d->plugin, d->model);
    if (d->meta)
        splash_meta_close(d->meta);
    free(d->taps);
    memset(d, 0, sizeof *d);
}

int64_t splash_spec_draft_tap_width(const struct splash_spec_draft *d)
{
    return (int64_t)d->info.n_taps * d->info.n_embd;
}

float *splash_spec_draft_taps(struct splash_spec_draft *d, size_t rows)
{
    if (rows > d->taps_rows) {
        float *grown =
            realloc(d->taps, rows * (size_t)splash_spec_draft_tap_width(d) * sizeof *grown);
        if (!grown)
            return NULL;
        d->taps = grown;
        d->taps_rows = rows;
    }
    return d->taps;
}

int splash_spec_draft_can_keep(const struct splash_spec_draft *d)
{
    return d->model && d->plugin->header.abi_minor >= 4 && d->plugin->ctx_fork;
}

void splash_spec_draft_keep(struct splash_spec_draft *d, void *point, const int32_t *tokens,
                            int32_t n, const void *dctx)
{
    struct splash_err err;
    struct splash_spec_draft_point *p = calloc(1, sizeof *p);
    if (p && n > 0 && (p->tokens = malloc((size_t)n * sizeof *p->tokens)) &&
        splash_draft_ctx_fork(d->plugin, d->model, dctx, &p->dctx, &err) == SPLASH_OK) {
        memcpy(p->tokens, tokens, (size_t)n * sizeof *p->tokens);
        p->point = point;
        p->n = n;
        p->next = d->points;
        d->points = p;
        d->points_bytes += d->info.ctx_bytes;
        return;
    }
    if (p)
        free(p->tokens);
    free(p);
}

void splash_spec_draft_forget(struct splash_spec_draft *d, void *point)
{
    for (struct splash_spec_draft_point **pp = &d->points; *pp; pp = &(*pp)->next)
        if ((*pp)->point == point) {
            struct splash_spec_draft_point *p = *pp;
            *pp = p->next;
            d->points_bytes -= d->info.ctx_bytes;
            splash_draft_ctx_destroy(d->plugin, d->model, p->dctx);
            free(p->tokens);
            free(p);
            return;
        }
}

void *splash_spec_draft_resume(struct splash_spec_draft *d, const int32_t *tokens, int32_t n)
{
    struct splash_err err;
    for (struct splash_spec_draft_point *p = d->points; p; p = p->next)
        if (p->n == n && !memcmp(p->tokens, tokens, (size_t)n * sizeof *tokens)) {
            void *fork = NULL;
            return splash_draft_ctx_fork(d->plugin, d->model, p->dctx, &fork, &err) == SPLASH_OK
                       ? fork
                       : NULL;
        }
    return NULL;
}
