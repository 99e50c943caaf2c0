/* Choosing a GGUF repository's mmproj by its header. */
#include "server/hub/projector.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/gguf.h"
#include "server/hub/cache.h"
#include "server/hub/header_check.h"

int splash_hub_is_projector(const char *path)
{
    size_t n = strlen(path);
    if (strchr(path, '/') || n < 5 || strcasecmp(path + n - 5, ".gguf"))
        return 0;
    for (const char *p = path; *p; p++)
        if (!strncasecmp(p, "mmproj", 6))
            return 1;
    return 0;
}

const char *splash_hub_projector_kind(const char *header_path, char *why, size_t why_size)
{
    static const char *const kinds[] = {"BF16", "F32", "F16"};
    struct splash_gguf *g = NULL;
    struct splash_err err;
    if (splash_gguf_open(header_path, SPLASH_GGUF_HEADERS_ONLY, &g, &err)) {
        snprintf(why, why_size, "%s", err.msg);
        return NULL;
    }
    const char *kind = NULL;
    const struct splash_gguf_kv *arch = splash_gguf_find_kv(g, "general.architecture");
    if (!arch || arch->type != GGUF_STRING || strcmp(arch->v.str, "clip")) {
        snprintf(why, why_size, "not a clip projector (general.architecture %.40s)",
                 arch && arch->type == GGUF_STRING ? arch->v.str : "missing");
    } else {
        /* the type of its matrices: every 2-D weight must be one of the three */
        const char *seen = NULL;
        int mixed = 0;
        for (size_t i = 0; i < g->n_tensors && !mixed; i++) {
            const struct splash_tensor_info *t = &g->tensors[i].info;
            if (t->n_dims < 2 || t->ne[1] < 2)
                continue; /* 1-D tensors are F32 in every projector */
            if (!seen)
                seen = t->type_name;
            else if (strcmp(seen, t->type_name))
                mixed = 1;
        }
        for (size_t k = 0; seen && !mixed && k < sizeof kinds / sizeof kinds[0]; k++)
            if (!strcmp(seen, kinds[k]))
                kind = kinds[k];
        if (!kind)
            snprintf(why, why_size, "its weights are %s, not BF16, F32 or F16",
                     mixed ? "of mixed types" : seen ? seen : "absent");
    }
    splash_gguf_close(g);
    return kind;
}

static int rank(const char *kind)
{
    return !strcmp(kind, "BF16") ? 3 : !strcmp(kind, "F32") ? 2 : 1;
}

const struct splash_hub_file *splash_hub_choose_projector(const struct splash_hub_env *env,
                                                          const char *repo_id,
                                                          const struct splash_hub_revision *rev,
                                                          const char *repo_dir,
                                                          const char *work_dir, char *why,
                                                          size_t why_size)
{
    const struct splash_hub_file *best = NULL;
    int best_rank = 0;
    snprintf(why, why_size, "no mmproj GGUF in the repository's root");
    for (size_t i = 0; i < rev->n_files; i++) {
        const struct splash_hub_file *f = &rev->files[i];
        if (!splash_hub_is_projector(f->path))
            continue;
        char url[4096], blob[PATH_MAX], copy[PATH_MAX], reason[200];
        splash_hub_file_url(env, repo_id, rev->commit, f->path, url, sizeof url);
        splash_hub_cache_blob_path(repo_dir, f->blob, blob, sizeof blob);
        snprintf(copy, sizeof copy, "%.3800s/%.200s", work_dir, f->path);
        struct splash_err err;
        const char *source = splash_hub_cache_has_blob(repo_dir, f->blob, f->size) ? blob : NULL;
        const char *kind = NULL;
        if (splash_hub_copy_gguf_header(env, f, source, url, copy, &err))
            snprintf(reason, sizeof reason, "%.199s", err.msg);
        else
            kind = splash_hub_projector_kind(copy, reason, sizeof reason);
        unlink(copy);
        if (kind && rank(kind) > best_rank) {
            best = f;
            best_rank = rank(kind);
        } else if (!kind && !best) {
            int named = !strncmp(reason, f->path, strlen(f->path)); /* the parser's words */
            snprintf(why, why_size, "%.120s%s%.200s", named ? "" : f->path, named ? "" : ": ",
                     reason);
        }
    }
    return best;
}
