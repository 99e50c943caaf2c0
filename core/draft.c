/* The draft vtable behind one set of wrappers (core/draft.h). */
#include "core/draft.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/meta.h"
#include "core/registry.h"
#include "core/safetensors.h"

/* Files a draft release may ship beside its weights, added to its tensors. */
static const char *const extra_files[] = {"mask_embedding.safetensors", NULL};

enum splash_status splash_draft_open(const struct splash_registry *r, const char *dir,
                                     unsigned flags, struct splash_meta **out,
                                     struct splash_err *err)
{
    struct splash_meta *m = NULL;
    enum splash_status st = splash_safetensors_open_model(dir, flags, &m, err);
    if (st)
        return st;
    for (size_t i = 0; extra_files[i]; i++) {
        char path[PATH_MAX];
        struct stat sb;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, extra_files[i]) >= sizeof path) {
            splash_meta_close(m);
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", dir);
        }
        if (stat(path, &sb) != 0)
            continue;
        if ((st = splash_safetensors_add_file(m, path, flags, err))) {
            splash_meta_close(m);
            return st;
        }
    }
    splash_meta_bind_formats(m, r);
    *out = m;
    return SPLASH_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Whether p claims one of the config's "architectures". */
static int claims(const struct splash_draft_plugin *p, const struct splash_meta *m,
                  const char **arch)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    struct splash_err e;
    size_t n = 0;
    if (api->arr_len(m, "architectures", &n, &e) != SPLASH_OK)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char *a = NULL;
        if (api->arr_str(m, "architectures", i, &a, &e) != SPLASH_OK)
            continue;
        for (size_t j = 0; p->architectures[j]; j++)
            if (!strcmp(p->architectures[j], a)) {
                *arch = a;
                return 1;
            }
    }
    return 0;
}

enum splash_status splash_draft_select(const struct splash_registry *r,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       const struct splash_draft_plugin **plugin,
                                       struct splash_draft_verdict *verdict,
                                       struct splash_err *err)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    size_t n_arch = 0;
    struct splash_err e;
    if (draft->source != SPLASH_META_CONFIG ||
        api->arr_len(draft, "architectures", &n_arch, &e) != SPLASH_OK || n_arch == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: architectures is missing (a draft's config.json names its "
                              "architecture)",
                              base_name(draft->path));
    const struct splash_draft_plugin *best = NULL, *tie = NULL;
    struct splash_draft_verdict best_v;
    const char *arch = NULL;
    for (size_t i = 0; i < splash_registry_n_drafts(r); i++) {
        const struct splash_draft_plugin *p = splash_registry_draft(r, i);
        const char *a;
        if (!claims(p, draft, &a))
            continue;
        arch = a;
        struct splash_draft_verdict v;
        memset(&v, 0, sizeof v);
        enum splash_status st = p->check(splash_registry_host(r), draft, target, &v, err);
        if (st)
            return st;
        if (v.score <= 0)
            continue;
        if (!best || v.score > best_v.score) {
            best = p;
            best_v = v;
            tie = NULL;
        } else if (v.score == best_v.score) {
            tie = p;
        }
    }
    if (tie)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: draft plugins %s and %s claim architecture %s equally",
                              base_name(draft->path), best->header.name, tie->header.name, arch);
    if (!best) {
        const char *first = NULL;
        api->arr_str(draft, "architectures", 0, &first, &e);
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              arch ? "%s: draft architecture %s: its plugin declined this draft"
                                   : "%s: draft architecture %s is not one Splash runs (no draft "
                                     "plugin claims it)",
                              base_name(draft->path), arch ? arch : first ? first : "?");
    }
    *plugin = best;
    *verdict = best_v;
    return SPLASH_OK;
}

enum splash_status splash_draft_select_nextn(const struct splash_registry *r,
                                             const struct splash_meta *target,
                                             const struct splash_draft_plugin **plugin,
                                             struct splash_draft_verdict *verdict,
                                             struct splash_err *err)
{
    for (size_t i = 0; i < splash_registry_n_drafts(r); i++) {
        const struct splash_draft_plugin *p = splash_registry_draft(r, i);
        int claimed = 0;
        for (size_t j = 0; p->architectures && p->architectures[j]; j++)
            claimed |= !strcmp(p->architectures[j], SPLASH_DRAFT_NEXTN);
        if (!claimed)
            continue;
        /* its rows read the tokens too, which blocks carry from ABI 1.5 */
        if (p->header.abi_minor < 5)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "draft plugin %s predates ABI 1.5: its blocks carry no tokens",
                                  p->header.name);
        memset(verdict, 0, sizeof *verdict);
        enum splash_status st = p->check(splash_registry_host(r), target, target, verdict, err);
        if (st)
            return st;
        if (verdict->score <= 0)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: draft plugin %s declined the model's MTP layers",
                                  base_name(target->path), p->header.name);
        *plugin = p;
        return SPLASH_OK;
    }
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: no draft plugin runs a model's MTP layers (%s)",
                          base_name(target->path), SPLASH_DRAFT_NEXTN);
}

enum splash_status splash_draft_create(const struct splash_registry *r,
                                       const struct splash_draft_plugin *p,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       const struct splash_draft_opts *opts, void **model,
                                       struct splash_draft_info *info, struct splash_err *err)
{
    enum splash_status st = p->create(splash_registry_host(r), draft, target, opts, model, err);
    if (st)
        return st;
    memset(info, 0, sizeof *info);
    p->info(*model, info);
    return SPLASH_OK;
}

void splash_draft_destroy(const struct splash_draft_plugin *p, void *model)
{
    if (model)
        p->destroy(model);
}

enum splash_status splash_draft_ctx_create(const struct splash_draft_plugin *p, void *model,
                                           void **ctx, struct splash_err *err)
{
    return p->ctx_create(model, ctx, err);
}

void splash_draft_ctx_destroy(const struct splash_draft_plugin *p, void *model, void *ctx)
{
    if (ctx)
        p->ctx_destroy(model, ctx);
}

enum splash_status splash_draft_ctx_fork(const struct splash_draft_plugin *p, void *model,
                                         const void *ctx, void **out, struct splash_err *err)
{
    if (p->header.abi_minor < 4 || !p->ctx_fork)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "draft plugin %s predates ABI 1.4: its contexts cannot be forked",
                              p->header.name);
    return p->ctx_fork(model, ctx, out, err);
}

enum splash_status splash_draft_append_context(const struct splash_draft_plugin *p, void *model,
                                               void *ctx, const float *taps, int64_t stride,
                                               int32_t pos0, int32_t n, struct splash_err *err)
{
    return p->append_context(model, ctx, taps, stride, pos0, n, err);
}

enum splash_status splash_draft_rollback(const struct splash_draft_plugin *p, void *model,
                                         void *ctx, int32_t n_keep, struct splash_err *err)
{
    return p->rollback(model, ctx, n_keep, err);
}

enum splash_status splash_draft_propose(const struct splash_draft_plugin *p, void *model,
                                        void *ctx, const struct splash_draft_block *b,
                                        struct splash_err *err)
{
    return p->propose(model, ctx, b, err);
}
