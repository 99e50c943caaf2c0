/* Model loading: the same checks as model-check, then the family's model_create. */
#include "core/model_load.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/host_impl.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/threadpool.h"

/* A directory's GGUF target: its only .gguf name (split parts count as one). */
static enum splash_status gguf_in_dir(const char *dir, char *out, size_t size,
                                      struct splash_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: cannot open directory", dir);
    struct dirent *e;
    char best[NAME_MAX + 1] = "";
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".gguf") || strstr(e->d_name, "mmproj"))
            continue;
        if (!best[0] || strcmp(e->d_name, best) < 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0])
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: no .gguf file in this directory", dir);
    snprintf(out, size, "%s/%s", dir, best);
    return SPLASH_OK;
}

enum splash_status splash_model_load(const struct splash_registry *r, const char *path,
                                     const struct splash_model_opts *opts, int n_threads,
                                     struct splash_loaded_model **out, struct splash_err *err)
{
    char target[PATH_MAX];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: no such file or directory", path);
    enum splash_status st;
    if (S_ISDIR(sb.st_mode)) {
        if ((st = gguf_in_dir(path, target, sizeof target, err)))
            return st;
    } else {
        snprintf(target, sizeof target, "%s", path);
    }
    struct splash_loaded_model *lm = calloc(1, sizeof *lm);
    if (!lm)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    if ((st = splash_meta_open_gguf(target, 0, &lm->meta, err)))
        goto out_free;
    splash_meta_bind_formats(lm->meta, r);
    struct splash_check_result res;
    memset(&res, 0, sizeof res);
    st = splash_model_check_meta(r, lm->meta, 0, &lm->family, &res, err);
    lm->verdict = res.verdict;
    splash_check_result_free(&res);
    if (st)
        goto out_close;
    if (!lm->family->model_create || !lm->family->forward) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "family plugin %s cannot run models",
                            lm->family->header.name);
        goto out_close;
    }
    struct splash_model_opts o = *opts;
    if (!o.pool) {
        lm->pool = splash_pool_create(n_threads);
        lm->owns_pool = 1;
        o.pool = lm->pool;
    } else {
        lm->pool = o.pool;
    }
    if ((st = lm->family->model_create(splash_host_get(), lm->meta, &o, &lm->model, err)))
        goto out_pool;
    lm->family->model_info(lm->model, &lm->info);
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
    if (lm->model)
        lm->family->model_destroy(lm->model);
    if (lm->owns_pool)
        splash_pool_destroy(lm->pool);
    splash_meta_close(lm->meta);
    free(lm);
}
