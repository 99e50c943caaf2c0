/* Loading the DFlash2 draft for the engine and the step's taps buffer. */
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

void splash_spec_draft_free(struct splash_spec_draft *d)
{
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
