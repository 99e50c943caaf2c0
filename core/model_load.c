/* Model loading: the same checks as model-check, then the family's model_create. */
#include "core/model_load.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/family.h"
#include "core/load_progress.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/st_target.h"
#include "core/target.h"
#include "core/threadpool.h"

enum splash_status splash_model_load(const struct splash_registry *r, const char *path,
                                     const struct splash_model_opts *opts, int n_threads,
                                     struct splash_loaded_model **out, struct splash_err *err)
{
    char target[PATH_MAX];
    enum splash_status st;
    struct splash_target t;
    if ((st = splash_target_select(path, NULL, &t, err)))
        return st;
    snprintf(target, sizeof target, "%s", t.path);
    struct splash_loaded_model *lm = calloc(1, sizeof *lm);
    if (!lm)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    if (t.kind == SPLASH_TARGET_SAFETENSORS) {
        /* MLX, Model Optimizer, compressed-tensors: imported into the formats' blocks */
        if ((st = splash_st_target_open(r, target, SPLASH_ST_DEFER_EXPERTS, &lm->meta, err)))
            goto out_free;
    } else {
        if ((st = splash_meta_open_gguf(target, 0, &lm->meta, err)))
            goto out_free;
        splash_meta_bind_formats(lm->meta, r);
    }
    struct splash_check_result res;
    memset(&res, 0, sizeof res);
    st = splash_model_check_meta(r, lm->meta, 0, &lm->family, &res, err);
    lm->verdict = res.verdict;
    splash_check_result_free(&res);
    if (st)
        goto out_close;
    struct splash_model_opts o = *opts;
    if (!o.pool) {
        lm->pool = splash_pool_create(n_threads);
        lm->owns_pool = 1;
        o.pool = lm->pool;
    } else {
        lm->pool = o.pool;
    }
    /* the share of the model's tensor bytes the kernels have prepared, every few seconds */
    const struct splash_meta_api *api = splash_meta_api_get();
    uint64_t total = 0;
    for (size_t i = 0; i < api->n_tensors(lm->meta); i++)
        total += api->tensor_at(lm->meta, i)->n_bytes;
    struct splash_load_progress *progress = splash_load_progress_start(target, total);
    st = splash_family_model_create(r, lm->family, lm->meta, &o, &lm->model, &lm->info, err);
    splash_load_progress_stop(progress);
    if (st)
        goto out_pool;
    *out = lm;
    return SPLASH_OK;
out_pool:
    if (lm->owns_pool)
        splash_pool_destroy(lm->pool);
out_close:
    splash_meta_close(lm->meta);
out_free:
    free(lm);
    return st;
}

void splash_model_unload(struct splash_loaded_model *lm)
{
    if (!lm)
        return;
    splash_family_model_destroy(lm->family, lm->model);
    if (lm->owns_pool)
        splash_pool_destroy(lm->pool);
    splash_meta_close(lm->meta);
    free(lm);
}
