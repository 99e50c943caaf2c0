/* DFlash2 drafts from the Hub or a local directory. */
#include "server/hub/draft.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model_check.h"
#include "core/paths.h"
#include "server/hub/cache.h"
#include "server/hub/fetch.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcmp(s + n - m, suffix);
}

int splash_hub_draft_wants_file(const char *path)
{
    if (strchr(path, '/'))
        return 0;
    return !strcmp(path, "config.json") || !strcmp(path, "model.safetensors.index.json") ||
           ends_with(path, ".safetensors");
}

enum splash_status splash_hub_draft_check(const struct splash_registry *r, const char *target_path,
                                          const char *draft_dir, unsigned flags,
                                          struct splash_err *err)
{
    if (!r)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: no plugin registry to "
                                                       "check it against the target", draft_dir);
    struct splash_check_result res;
    enum splash_status st =
        splash_model_check_draft_flags(r, target_path, draft_dir, flags, &res, err);
    if (st && !res.draft_checked) {
        /* the target itself was refused: say so rather than blame the draft */
        struct splash_err inner = *err;
        splash_err_set(err, st, "the target %.200s: %s", target_path, inner.msg);
    }
    splash_check_result_free(&res);
    return st;
}

static enum splash_status add(struct splash_hub_draft *out, const char *path, uint64_t size,
                              const char *blob, int lfs, const char *source,
                              struct splash_err *err)
{
    if (out->n == SPLASH_DRAFT_MAX_FILES)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft: more than %d files",
                              SPLASH_DRAFT_MAX_FILES);
    size_t i = out->n++;
    snprintf(out->path[i], sizeof out->path[i], "%s", path);
    snprintf(out->link[i], sizeof out->link[i], "draft/%s", path);
    snprintf(out->source[i], sizeof out->source[i], "%s", source);
    snprintf(out->blob[i], sizeof out->blob[i], "%s", blob);
    out->files[i] = (struct splash_assembly_file){.path = out->path[i],
                                                  .source = out->source[i], .size = size,
                                                  .blob = out->blob[i], .lfs = lfs,
                                                  .link = out->link[i]};
    return SPLASH_OK;
}

static void quiet(const char *line)
{
    (void)line;
}

static enum splash_status download(const struct splash_hub_env *env, const char *repo_id,
                                   const char *repo_dir, const char *commit,
                                   const struct splash_hub_file *const *files, size_t n,
                                   splash_hub_line_fn line, int tty, struct splash_err *err)
{
    struct splash_hub_job jobs[SPLASH_DRAFT_MAX_FILES];
    const char *labels[SPLASH_DRAFT_MAX_FILES];
    uint64_t sizes[SPLASH_DRAFT_MAX_FILES], total = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (splash_hub_cache_has_blob(repo_dir, files[i]->blob, files[i]->size))
            continue;
        struct splash_hub_job *j = &jobs[k];
        memset(j, 0, sizeof *j);
        j->name = files[i]->path;
        splash_hub_file_url(env, repo_id, commit, files[i]->path, j->url, sizeof j->url);
        splash_hub_cache_blob_path(repo_dir, files[i]->blob, j->dest, sizeof j->dest);
        j->size = files[i]->size;
        snprintf(j->digest, sizeof j->digest, "%s", files[i]->blob);
        j->lfs = files[i]->lfs;
        labels[k] = files[i]->path;
        sizes[k] = files[i]->size;
        total += files[i]->size;
        k++;
    }
    if (!k)
        return SPLASH_OK;
    char blobs[PATH_MAX];
    snprintf(blobs, sizeof blobs, "%.4000s/blobs", repo_dir);
    enum splash_status st = splash_make_dirs(blobs, 0755, err);
    if (st)
        return st;
    if (line) {
        char msg[600], amount[32];
        splash_hub_format_bytes(total, amount, sizeof amount);
        snprintf(msg, sizeof msg, "Downloading · draft %.200s at %.12s: %zu file%s, %s", repo_id,
                 commit, k, k == 1 ? "" : "s", amount);
        line(msg);
    }
    struct splash_hub_progress *p =
        splash_hub_progress_start(labels, sizes, k, tty, 5.0, line ? line : quiet);
    st = splash_hub_download(env, jobs, k, 4, p, err);
    splash_hub_progress_stop(p);
    return st;
}

enum splash_status splash_hub_draft_install(const struct splash_hub_env *env, const char *repo_id,
                                            const struct splash_hub_revision *rev,
                                            const char *pin, const struct splash_registry *r,
                                            const char *target_path, splash_hub_line_fn line,
                                            int tty, struct splash_hub_draft *out,
                                            struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->repo_id, sizeof out->repo_id, "%s", repo_id);
    snprintf(out->commit, sizeof out->commit, "%s", rev->commit);
    char owner[128], repo[128];
    const char *slash = strchr(repo_id, '/');
    if (!slash || slash == repo_id || (size_t)(slash - repo_id) >= sizeof owner ||
        strlen(slash + 1) >= sizeof repo || !slash[1])
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: not OWNER/REPO", repo_id);
    snprintf(owner, sizeof owner, "%.*s", (int)(slash - repo_id), repo_id);
    snprintf(repo, sizeof repo, "%s", slash + 1);
    if (!splash_hub_cache_repo_dir(env->cache, owner, repo, out->repo_dir, sizeof out->repo_dir))
        return splash_err_set(err, SPLASH_ERR_INVALID, "HF_HUB_CACHE: path too long");
    const struct splash_hub_file *files[SPLASH_DRAFT_MAX_FILES];
    const struct splash_hub_file *config = NULL;
    size_t n = 0, weights = 0;
    for (size_t i = 0; i < rev->n_files; i++) {
        const struct splash_hub_file *f = &rev->files[i];
        if (!splash_hub_draft_wants_file(f->path))
            continue;
        if (n == SPLASH_DRAFT_MAX_FILES)
            return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: more than %d files",
                                  repo_id, SPLASH_DRAFT_MAX_FILES);
        files[n++] = f;
        if (!strcmp(f->path, "config.json"))
            config = f;
        weights += ends_with(f->path, ".safetensors");
    }
    if (!config || !weights)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "draft %.200s at %.12s: no %s (a DFlash2 draft holds config.json "
                              "and model.safetensors)",
                              repo_id, rev->commit, config ? "safetensors weights" : "config.json");
    /* config.json first: a draft the target cannot carry moves no weight */
    enum splash_status st =
        download(env, repo_id, out->repo_dir, rev->commit, &config, 1, NULL, 0, err);
    char blob[PATH_MAX];
    splash_hub_cache_blob_path(out->repo_dir, config->blob, blob, sizeof blob);
    if (!st) {
        /* the config alone, in a directory of its own beside the cache's blobs */
        char dir[PATH_MAX], link[PATH_MAX + 16];
        struct splash_err inner;
        snprintf(dir, sizeof dir, "%.4000s/.draft-check-%d", out->repo_dir, (int)getpid());
        snprintf(link, sizeof link, "%s/config.json", dir);
        if ((st = splash_make_dirs(dir, 0700, err)) == SPLASH_OK) {
            if (symlink(blob, link))
                st = splash_err_set(err, SPLASH_ERR_IO, "%s: %s", link, strerror(errno));
            else if ((st = splash_hub_draft_check(r, target_path, dir,
                                                  SPLASH_CHECK_DRAFT_CONFIG_ONLY, &inner)))
                splash_err_set(err, st, "draft %.200s at %.12s: %s", repo_id, rev->commit,
                               !strncmp(inner.msg, "draft ", 6) && strchr(inner.msg, ':')
                                   ? strchr(inner.msg, ':') + 2
                                   : inner.msg);
            unlink(link);
            rmdir(dir);
        }
    }
    if (!st)
        st = download(env, repo_id, out->repo_dir, rev->commit, files, n, line, tty, err);
    for (size_t i = 0; i < n && !st; i++) {
        char snap[PATH_MAX];
        st = splash_hub_cache_link(out->repo_dir, rev->commit, files[i]->path, files[i]->blob,
                                   err);
        splash_hub_cache_snapshot_path(out->repo_dir, rev->commit, files[i]->path, snap,
                                       sizeof snap);
        if (!st)
            st = add(out, files[i]->path, files[i]->size, files[i]->blob, files[i]->lfs, snap,
                     err);
    }
    if (!st)
        st = splash_hub_cache_write_ref(out->repo_dir, "main", rev->commit, err);
    char ref[600];
    snprintf(ref, sizeof ref, "splash/%.500s", pin);
    if (!st)
        st = splash_hub_cache_write_ref(out->repo_dir, ref, rev->commit, err);
    return st;
}

enum splash_status splash_hub_draft_local(const char *dir, const struct splash_registry *r,
                                          const char *target_path, struct splash_hub_draft *out,
                                          struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (!realpath(dir, out->local_dir) || stat(out->local_dir, &sb) || !S_ISDIR(sb.st_mode))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "draft %.200s: not a directory", dir);
    char config[PATH_MAX];
    snprintf(config, sizeof config, "%.4000s/config.json", out->local_dir);
    if (stat(config, &sb))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "draft %.200s: no config.json (a DFlash2 draft directory holds "
                              "config.json and model.safetensors)",
                              dir);
    enum splash_status st = splash_hub_draft_check(r, target_path, out->local_dir, 0, err);
    struct dirent **entries = NULL;
    int n = st ? 0 : scandir(out->local_dir, &entries, NULL, alphasort);
    size_t weights = 0;
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%.3800s/%.250s", out->local_dir, name);
        if (!st && name[0] != '.' && splash_hub_draft_wants_file(name)) {
            if (stat(path, &sb) || !S_ISREG(sb.st_mode))
                st = splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: not a regular file",
                                    path);
            else
                st = add(out, name, (uint64_t)sb.st_size, "", 1, path, err);
            weights += ends_with(name, ".safetensors");
        }
        free(entries[i]);
    }
    free(entries);
    if (!st && !weights)
        st = splash_err_set(err, SPLASH_ERR_NOT_FOUND, "draft %.200s: no safetensors weights",
                            dir);
    return st;
}

enum splash_status splash_hub_draft_cached(const char *cache, const char *repo_id, char *dir,
                                           size_t size, struct splash_err *err)
{
    dir[0] = 0;
    const char *slash = strchr(repo_id, '/');
    char owner[128], repo_dir[PATH_MAX], commit[41], config[PATH_MAX];
    if (!slash || slash == repo_id || !slash[1] || strchr(slash + 1, '/') ||
        (size_t)(slash - repo_id) >= sizeof owner)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: not OWNER/REPO", repo_id);
    snprintf(owner, sizeof owner, "%.*s", (int)(slash - repo_id), repo_id);
    if (splash_hub_cache_repo_dir(cache, owner, slash + 1, repo_dir, sizeof repo_dir) < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: path too long", repo_id);
    struct splash_err e;
    uint64_t bytes = 0;
    /* the default branch's commit as the cache last saw it, its config.json inside the cache */
    if (splash_hub_cache_read_ref(repo_dir, "main", commit, &e) != SPLASH_OK ||
        splash_hub_cache_resolve(repo_dir, commit, "config.json", config, sizeof config, &bytes,
                                 &e) != SPLASH_OK)
        return SPLASH_OK;
    if (splash_hub_cache_snapshot_path(repo_dir, commit, "", dir, size) < 0) {
        dir[0] = 0;
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft %.200s: path too long", repo_id);
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;
    return SPLASH_OK;
}
