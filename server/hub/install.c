/* Installation: the Hub's answer, the cache and the assembly, one start at a time. */
#include "server/hub/install.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"
#include "core/target.h"
#include "server/hub/api.h"
#include "server/hub/assembly.h"
#include "server/hub/cache.h"
#include "server/hub/draft.h"
#include "server/hub/env.h"
#include "server/hub/fetch.h"
#include "server/hub/header_check.h"
#include "server/hub/projector.h"
#include "server/hub/retire.h"
#include "server/hub/shards.h"

#define REVISION_TIMEOUT 5.0 /* server.md "Revisions": one request of at most 5 s */
#define PARALLEL_DOWNLOADS 4

struct ctx {
    const struct splash_install_request *req;
    struct splash_hub_env env;
    struct splash_model_id id;
    char repo_id[2 * SPLASH_MODEL_ID_MAX + 2];
    const char *revision;  /* req->revision or "main" */
    char models_dir[PATH_MAX];
    char inst_name[512];   /* OWNER--REPO[--VARIANT][@REVISION][+language-only] */
    char inst_dir[PATH_MAX];
    char repo_dir[PATH_MAX]; /* the cache's models--OWNER--REPO */
    int draft_kind;        /* enum draft_kind */
    struct splash_hub_draft *draft;     /* this installation's; n 0: none */
    struct splash_hub_revision draft_rev; /* asked already this start, when have_draft_rev */
    int have_draft_rev;
};

enum draft_kind { DRAFT_FAMILY, DRAFT_NONE, DRAFT_REPO, DRAFT_DIR };

static void say(const struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct ctx *c, const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c->req->line)
        c->req->line(line);
}

enum splash_status splash_install_models_dir(char *out, size_t size, struct splash_err *err)
{
    return splash_dir_path(SPLASH_DIR_DATA, "models", 1, out, size, err);
}

/* A revision in a directory name: bytes other than [A-Za-z0-9._-] as %XX. */
static void name_part(const char *in, char *out, size_t size)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < size; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
    }
    out[o] = 0;
}

static int take_lock(const struct ctx *c, struct splash_err *err)
{
    return splash_install_lock(c->models_dir, c->req->line, err);
}

int splash_install_lock(const char *models_dir, splash_hub_line_fn line, struct splash_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.3900s/.lock", models_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        splash_err_set(err, SPLASH_ERR_IO, "%.200s: %s (the installation lock)", path,
                       strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        if (line) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "Installing · waiting for another installation in %s",
                     models_dir);
            line(msg);
        }
        if (flock(fd, LOCK_EX)) {
            close(fd);
            splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot lock it", path);
            return -1;
        }
    }
    return fd;
}

/* refs/splash/INSTALLATION: the commit this installation uses, kept by cache pruning. */
static enum splash_status pin(const struct ctx *c, const char *commit, struct splash_err *err)
{
    char ref[600];
    snprintf(ref, sizeof ref, "splash/%s", c->inst_name);
    return splash_hub_cache_write_ref(c->repo_dir, ref, commit, err);
}

/* ---- from the cache alone ------------------------------------------------------- */

/* Assembles the target of snapshot `commit` as the cache holds it (another tool's download,
 * or ours whose assembly was damaged): no request. */
static enum splash_status assemble_from_snapshot(struct ctx *c, const char *commit,
                                                 struct splash_installed *out,
                                                 struct splash_err *err)
{
    char **paths;
    size_t n;
    enum splash_status st = splash_hub_cache_list_snapshot(c->repo_dir, commit, &paths, &n, err);
    if (st)
        return st;
    struct splash_target t;
    st = splash_target_select_listing((const char *const *)paths, n, c->id.variant, &t, err);
    if (st) {
        struct splash_err inner = *err;
        splash_hub_free_paths(paths, n);
        return splash_err_set(err, st, "%s in the cache: %s", c->repo_id, inner.msg);
    }
    size_t n_files = t.kind == SPLASH_TARGET_SAFETENSORS ? n : (size_t)t.n_parts;
    struct splash_assembly_file *files = calloc(n_files ? n_files : 1, sizeof *files);
    char (*sources)[PATH_MAX] = calloc(n_files ? n_files : 1, PATH_MAX);
    char (*rel)[PATH_MAX] = calloc(n_files ? n_files : 1, PATH_MAX);
    char (*blobs)[65] = calloc(n_files ? n_files : 1, 65);
    if (!files || !sources || !rel || !blobs)
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_files && !st; i++) {
        if (t.kind == SPLASH_TARGET_SAFETENSORS)
            snprintf(rel[i], PATH_MAX, "%s", paths[i]);
        else
            splash_target_part_path(&t, (int)i + 1, rel[i], PATH_MAX);
        if (rel[i][0] == '/') /* a root target's path from the listing */
            memmove(rel[i], rel[i] + 1, strlen(rel[i]));
        char real[PATH_MAX];
        uint64_t size;
        st = splash_hub_cache_resolve(c->repo_dir, commit, rel[i], real, sizeof real, &size, err);
        if (st)
            break;
        char snap[PATH_MAX];
        splash_hub_cache_snapshot_path(c->repo_dir, commit, rel[i], snap, sizeof snap);
        snprintf(sources[i], PATH_MAX, "%s", snap);
        const char *slash = strrchr(real, '/');
        snprintf(blobs[i], 65, "%.64s", slash ? slash + 1 : real);
        files[i] = (struct splash_assembly_file){.path = rel[i], .source = sources[i],
                                                 .size = size, .blob = blobs[i],
                                                 .lfs = strlen(blobs[i]) == 64};
    }
    if (!st) {
        struct splash_hub_verdict verdict = {"", ""};
        if (t.kind != SPLASH_TARGET_SAFETENSORS && c->req->registry) {
            /* model-check on the files themselves (it reads their headers only) */
            struct splash_hub_file *hf = calloc(n_files, sizeof *hf);
            const struct splash_hub_file **list = calloc(n_files, sizeof *list);
            const char **src = calloc(n_files, sizeof *src), **urls = calloc(n_files, sizeof *urls);
            char work[PATH_MAX];
            snprintf(work, sizeof work, "%.3900s/.check-%d", c->models_dir, (int)getpid());
            if (!hf || !list || !src || !urls || splash_make_dirs(work, 0700, err))
                st = st ? st : splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
            for (size_t i = 0; !st && i < n_files; i++) {
                hf[i] = (struct splash_hub_file){.path = rel[i], .size = files[i].size};
                list[i] = &hf[i];
                src[i] = sources[i];
            }
            if (!st)
                st = splash_hub_check_gguf_headers(&c->env, c->req->registry, list, src, urls,
                                                   n_files, work, &verdict, err);
            for (size_t i = 0; i < n_files; i++) {
                char p[PATH_MAX];
                const char *slash = strrchr(rel[i], '/');
                snprintf(p, sizeof p, "%.3800s/%s", work, slash ? slash + 1 : rel[i]);
                unlink(p);
            }
            rmdir(work);
            free(hf), free(list), free(src), free(urls);
        }
        struct splash_assembly a = {.model = c->req->model, .repo_id = c->repo_id,
                                    .variant = c->id.variant, .revision = c->revision,
                                    .commit = commit, .endpoint = c->env.endpoint,
                                    .cache_repo_dir = c->repo_dir, .kind = t.kind,
                                    .family = verdict.family, .files = files,
                                    .n_files = n_files};
        if (!st)
            st = splash_assembly_publish(c->inst_dir, &a, out, err);
    }
    free(files), free(sources), free(rel), free(blobs);
    splash_hub_free_paths(paths, n);
    return st ? st : pin(c, commit, err);
}

/* ---- from the Hub ---------------------------------------------------------------- */

int splash_install_wants_file(const char *path, int language_only)
{
    static const char *const names[] = {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "chat_template.jinja", "chat_template.json", "vocab.json",
        "merges.txt", "model.safetensors.index.json", "preprocessor_config.json",
        "processor_config.json", "mask_embedding.safetensors"};
    if (strchr(path, '/'))
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(path, names[i]))
            return !(language_only && (!strcmp(path, "preprocessor_config.json") ||
                                       !strcmp(path, "processor_config.json")));
    size_t n = strlen(path);
    return n > 12 && !strcmp(path + n - 12, ".safetensors");
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Downloads the files' blobs the cache lacks (all of them, or with weights 0 all but the
 * .safetensors shards), with progress. */
static enum splash_status fetch_missing(struct ctx *c, const struct splash_hub_revision *rev,
                                        const struct splash_hub_file **files, size_t n,
                                        char (*urls)[4096], char (*blob_paths)[PATH_MAX],
                                        int weights, struct splash_err *err)
{
    uint64_t to_fetch = 0;
    size_t n_fetch = 0;
    int *pick = calloc(n ? n : 1, sizeof *pick);
    if (!pick)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(files[i]->path);
        int shard = len > 12 && !strcmp(files[i]->path + len - 12, ".safetensors");
        if ((weights || !shard) &&
            !splash_hub_cache_has_blob(c->repo_dir, files[i]->blob, files[i]->size)) {
            pick[i] = 1;
            to_fetch += files[i]->size;
            n_fetch++;
        }
    }
    enum splash_status st = SPLASH_OK;
    char blobs_dir[PATH_MAX];
    snprintf(blobs_dir, sizeof blobs_dir, "%.3900s/blobs", c->repo_dir);
    if (!n_fetch || (st = splash_make_dirs(blobs_dir, 0755, err))) {
        free(pick);
        return st;
    }
    char total[32];
    splash_hub_format_bytes(to_fetch, total, sizeof total);
    say(c, "Downloading · %s at %.12s: %zu file%s, %s", c->req->model, rev->commit, n_fetch,
        n_fetch == 1 ? "" : "s", total);
    struct splash_hub_job *jobs = calloc(n_fetch, sizeof *jobs);
    const char **labels = calloc(n_fetch, sizeof *labels);
    uint64_t *sizes = calloc(n_fetch, sizeof *sizes);
    if (!jobs || !labels || !sizes)
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    size_t j = 0;
    for (size_t i = 0; i < n && !st; i++) {
        if (!pick[i])
            continue;
        struct splash_hub_job *job = &jobs[j];
        job->name = files[i]->path;
        snprintf(job->url, sizeof job->url, "%s", urls[i]);
        snprintf(job->dest, sizeof job->dest, "%s", blob_paths[i]);
        job->size = files[i]->size;
        snprintf(job->digest, sizeof job->digest, "%s", files[i]->blob);
        job->lfs = files[i]->lfs;
        labels[j] = base_name(files[i]->path);
        sizes[j] = files[i]->size;
        j++;
    }
    if (!st) {
        struct splash_hub_progress *p =
            splash_hub_progress_start(labels, sizes, j, c->req->tty, 5.0, c->req->line);
        st = splash_hub_download(&c->env, jobs, j, PARALLEL_DOWNLOADS, p, err);
        splash_hub_progress_stop(p);
    }
    free(jobs), free(labels), free(sizes), free(pick);
    return st;
}

/* A safetensors target's shards: those its index names (a subdirectory's too), less the
 * vision tower's own with --language-only; without an index, the root's. Compacts the
 * arrays and returns the new count. */
static size_t keep_needed_shards(struct ctx *c, const struct splash_hub_revision *rev,
                                 const struct splash_hub_file **files, char (*urls)[4096],
                                 char (*blob_paths)[PATH_MAX], size_t n)
{
    (void)rev;
    json_t *index = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(files[i]->path, "model.safetensors.index.json"))
            index = json_load_file(blob_paths[i], 0, NULL);
    json_t *weight_map = json_object_get(index, "weight_map");
    size_t kept = 0, vision = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = files[i]->path;
        size_t len = strlen(p);
        int shard = len > 12 && !strcmp(p + len - 12, ".safetensors") &&
                    strcmp(p, "mask_embedding.safetensors");
        if (shard && !splash_hub_shard_wanted(weight_map, p, c->req->language_only)) {
            vision += c->req->language_only && splash_hub_shard_wanted(weight_map, p, 0);
            continue;
        }
        if (kept != i) {
            files[kept] = files[i];
            memcpy(urls[kept], urls[i], sizeof urls[i]);
            memcpy(blob_paths[kept], blob_paths[i], sizeof blob_paths[i]);
        }
        kept++;
    }
    if (vision)
        say(c, "Vision · --language-only: %zu shard%s holding only what the text model leaves "
               "out (vision tower, projector, MTP layers) not downloaded",
            vision, vision == 1 ? "" : "s");
    json_decref(index);
    return kept;
}

/* The assembly's draft fields and folder name (the target's commit with the draft's). */
static void set_draft(struct ctx *c, struct splash_assembly *a, const char *commit,
                      char name[41])
{
    const struct splash_hub_draft *d = c->draft;
    if (!d->n)
        return;
    char key[300] = "";
    if (d->repo_id[0]) {
        a->draft_repo = d->repo_id;
        a->draft_commit = d->commit;
        a->draft_cache = d->repo_dir;
        snprintf(key, sizeof key, "%.200s@%s", d->repo_id, d->commit);
    } else {
        a->draft_dir = d->local_dir;
        size_t o = snprintf(key, sizeof key, "dir:");
        for (size_t i = 0; i < d->n && o + 13 < sizeof key; i++)
            o += (size_t)snprintf(key + o, sizeof key - o, "%.12s", d->blob[i]);
    }
    splash_assembly_name(commit, key, name);
    a->name = name;
}

/* The draft beside the target: the family's (verdict) or --draft-model's repository, asked
 * for its default branch's commit unless asked already, or a local directory. A family's
 * draft that cannot be installed leaves the target without one, said in a line; one that
 * --draft-model names is an error. */
static enum splash_status choose_draft(struct ctx *c, const struct splash_hub_verdict *v,
                                       const char *target_path, struct splash_err *err)
{
    c->draft->n = 0;
    if (c->draft_kind == DRAFT_NONE)
        return SPLASH_OK;
    if (c->draft_kind == DRAFT_DIR) {
        enum splash_status st = splash_hub_draft_local(c->req->draft_model, c->req->registry,
                                                       target_path, c->draft, err);
        for (size_t i = 0; !st && i < c->draft->n; i++)
            st = splash_hub_file_digest(c->draft->source[i], 0, c->draft->blob[i], err);
        return st;
    }
    const char *repo = c->draft_kind == DRAFT_REPO ? c->req->draft_model : v->draft_repo;
    if (!*repo)
        return SPLASH_OK; /* the family names no draft for this size */
    struct splash_err derr;
    enum splash_status st = SPLASH_OK;
    if (!c->have_draft_rev || strcmp(c->draft->repo_id, repo)) {
        if (c->have_draft_rev)
            splash_hub_revision_free(&c->draft_rev);
        c->have_draft_rev = 0;
        st = splash_hub_revision_fetch(&c->env, repo, "main", REVISION_TIMEOUT, &c->draft_rev,
                                       &derr);
        c->have_draft_rev = st == SPLASH_OK;
    }
    char pin[600];
    snprintf(pin, sizeof pin, "%s", c->inst_name);
    if (!st)
        st = splash_hub_draft_install(&c->env, repo, &c->draft_rev, pin, c->req->registry,
                                      target_path, c->req->line, c->req->tty, c->draft, &derr);
    if (!st)
        return SPLASH_OK;
    c->draft->n = 0;
    if (c->draft_kind == DRAFT_REPO)
        return splash_err_set(err, st, "--draft-model %s: %s", repo, derr.msg);
    say(c, "Draft · %s names %s as its DFlash2 draft, which cannot be installed (%s); it "
           "decodes without one",
        v->family, repo, derr.msg);
    return SPLASH_OK;
}

/* Installs revision `rev` (the Hub's answer): header check, downloads of the blobs the
 * cache lacks, snapshot links, refs and the assembly. */
static enum splash_status install_revision(struct ctx *c, const struct splash_hub_revision *rev,
                                           struct splash_installed *out, struct splash_err *err)
{
    const char **names = calloc(rev->n_files ? rev->n_files : 1, sizeof *names);
    if (!names)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < rev->n_files; i++)
        names[i] = rev->files[i].path;
    struct splash_target t;
    enum splash_status st = splash_target_select_listing(names, rev->n_files, c->id.variant, &t,
                                                         err);
    free(names);
    if (st) {
        struct splash_err inner = *err;
        return splash_err_set(err, st, "%s: %s", c->repo_id, inner.msg);
    }
    /* the files to install, a GGUF's parts first and in order */
    size_t n = 0;
    const struct splash_hub_file **files = calloc(rev->n_files + 1, sizeof *files);
    if (!files)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    if (t.kind == SPLASH_TARGET_SAFETENSORS) {
        for (size_t i = 0; i < rev->n_files; i++) {
            const char *p = rev->files[i].path;
            size_t len = strlen(p);
            /* a shard in a subdirectory counts when the index names it (below) */
            if (splash_install_wants_file(p, c->req->language_only) ||
                (len > 12 && !strcmp(p + len - 12, ".safetensors")))
                files[n++] = &rev->files[i];
        }
    } else {
        for (int k = 1; k <= t.n_parts && !st; k++) {
            char rel[PATH_MAX];
            splash_target_part_path(&t, k, rel, sizeof rel);
            const char *p = rel[0] == '/' ? rel + 1 : rel;
            if (!(files[n] = splash_hub_revision_find(rev, p)))
                st = splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: %.120s is not listed",
                                    c->repo_id, p);
            n++;
        }
    }
    char (*urls)[4096] = calloc(n + 1, 4096);   /* + a projector */
    char (*blob_paths)[PATH_MAX] = calloc(n + 1, PATH_MAX);
    if (!urls || !blob_paths)
        st = st ? st : splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        splash_hub_file_url(&c->env, c->repo_id, rev->commit, files[i]->path, urls[i], 4096);
        splash_hub_cache_blob_path(c->repo_dir, files[i]->blob, blob_paths[i], PATH_MAX);
    }
    /* a safetensors target's small files come first: model-check reads its config.json */
    if (!st && t.kind == SPLASH_TARGET_SAFETENSORS)
        st = fetch_missing(c, rev, files, n, urls, blob_paths, 0, err);
    if (!st && t.kind == SPLASH_TARGET_SAFETENSORS)
        n = keep_needed_shards(c, rev, files, urls, blob_paths, n);
    /* model-check on the headers before any weight moves */
    struct splash_hub_verdict verdict = {"", ""};
    if (!st && c->req->registry) {
        const char **src = calloc(n, sizeof *src), **u = calloc(n, sizeof *u);
        char work[PATH_MAX];
        snprintf(work, sizeof work, "%.3900s/.check-%d", c->models_dir, (int)getpid());
        if (!src || !u)
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        else if (!(st = splash_make_dirs(work, 0700, err))) {
            for (size_t i = 0; i < n; i++) {
                int have = splash_hub_cache_has_blob(c->repo_dir, files[i]->blob, files[i]->size);
                src[i] = have ? blob_paths[i] : NULL;
                u[i] = urls[i];
            }
            st = t.kind == SPLASH_TARGET_SAFETENSORS
                     ? splash_hub_check_safetensors_headers(&c->env, c->req->registry, files, src,
                                                            u, n, work, &verdict, err)
                     : splash_hub_check_gguf_headers(&c->env, c->req->registry, files, src, u, n,
                                                     work, &verdict, err);
            if (st) {
                struct splash_err inner = *err;
                splash_err_set(err, st, "%s: %s", c->req->model, inner.msg);
            }
            /* the draft is held to the target's header copies, before they go */
            char target_path[PATH_MAX];
            if (t.kind == SPLASH_TARGET_SAFETENSORS)
                snprintf(target_path, sizeof target_path, "%s", work);
            else
                snprintf(target_path, sizeof target_path, "%.3800s/%s", work,
                         base_name(files[0]->path));
            if (!st)
                st = choose_draft(c, &verdict, target_path, err);
            for (size_t i = 0; i < n; i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%.3800s/%s", work, base_name(files[i]->path));
                unlink(p);
            }
            rmdir(work);
        }
        free(src), free(u);
    } else if (!st && (c->draft_kind == DRAFT_REPO || c->draft_kind == DRAFT_DIR)) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: a draft is checked against the target's "
                                                      "headers, which need the plugin registry",
                            c->req->model);
    }
    /* a GGUF repository's projector, unless --language-only */
    const struct splash_hub_file *projector = NULL;
    if (!st && t.kind != SPLASH_TARGET_SAFETENSORS && !c->req->language_only) {
        char work[PATH_MAX], why[400];
        snprintf(work, sizeof work, "%.3900s/.check-%d", c->models_dir, (int)getpid());
        if (!(st = splash_make_dirs(work, 0700, err))) {
            projector = splash_hub_choose_projector(&c->env, c->repo_id, rev, c->repo_dir, work,
                                                    why, sizeof why);
            rmdir(work);
            if (projector) {
                files[n] = projector;
                splash_hub_file_url(&c->env, c->repo_id, rev->commit, projector->path, urls[n],
                                    4096);
                splash_hub_cache_blob_path(c->repo_dir, projector->blob, blob_paths[n], PATH_MAX);
                n++;
            } else if (strstr(why, "mmproj GGUF in the repository's root") == NULL) {
                say(c, "Vision · %s: %s; it serves text only", c->req->model, why);
            }
        }
    }
    if (!st)
        st = fetch_missing(c, rev, files, n, urls, blob_paths, 1, err);
    /* snapshot links, refs, the assembly */
    size_t n_draft = c->draft->n;
    struct splash_assembly_file *af = calloc(n + n_draft + 1, sizeof *af);
    char (*sources)[PATH_MAX] = calloc(n + 1, PATH_MAX);
    char (*links)[300] = calloc(n + 1, 300);
    if (!st && (!af || !sources))
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        st = splash_hub_cache_link(c->repo_dir, rev->commit, files[i]->path, files[i]->blob, err);
        splash_hub_cache_snapshot_path(c->repo_dir, rev->commit, files[i]->path, sources[i],
                                       PATH_MAX);
        af[i] = (struct splash_assembly_file){.path = files[i]->path, .source = sources[i],
                                              .size = files[i]->size, .blob = files[i]->blob,
                                              .lfs = files[i]->lfs};
        if (files[i] == projector) {
            snprintf(links[i], 300, "mmproj/%.250s", files[i]->path);
            af[i].link = links[i];
            af[i].role = "mmproj";
        }
    }
    for (size_t i = 0; i < n_draft && !st; i++) {
        af[n + i] = c->draft->files[i];
        af[n + i].role = "draft";
    }
    if (!st && strcmp(c->revision, rev->commit))
        st = splash_hub_cache_write_ref(c->repo_dir, c->revision, rev->commit, err);
    if (!st) {
        struct splash_assembly a = {.model = c->req->model, .repo_id = c->repo_id,
                                    .variant = c->id.variant, .revision = c->revision,
                                    .commit = rev->commit, .endpoint = c->env.endpoint,
                                    .cache_repo_dir = c->repo_dir, .kind = t.kind,
                                    .family = verdict.family, .files = af,
                                    .n_files = n + n_draft};
        char name[41];
        set_draft(c, &a, rev->commit, name);
        st = splash_assembly_publish(c->inst_dir, &a, out, err);
    }
    if (!st)
        st = pin(c, rev->commit, err);
    free(af), free(sources), free(links), free(urls), free(blob_paths), free(files);
    return st;
}

/* Without the Hub: the installed model, else one rebuilt from the cache's snapshot of the
 * revision (the commit pinned for this installation, the ref's, or the 40-hex revision). */
static enum splash_status without_hub(struct ctx *c, const char *why, struct splash_installed *out,
                                      struct splash_err *err)
{
    struct splash_err damage;
    if (!splash_assembly_current(c->inst_dir, out, &damage)) {
        say(c, "Hub · %s; starting the installed %s at %.12s", why, c->req->model, out->commit);
        return SPLASH_OK;
    }
    char commit[41] = "", ref[600];
    struct splash_err ignored;
    snprintf(ref, sizeof ref, "splash/%s", c->inst_name);
    if (splash_hub_cache_read_ref(c->repo_dir, ref, commit, &ignored) &&
        splash_hub_cache_read_ref(c->repo_dir, c->revision, commit, &ignored) &&
        splash_hub_is_commit(c->revision))
        snprintf(commit, sizeof commit, "%s", c->revision);
    if (!commit[0])
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s: %s, and neither an installation nor the Hugging Face cache "
                              "(%.120s) holds revision %.40s",
                              c->req->model, why, c->env.cache, c->revision);
    enum splash_status st = assemble_from_snapshot(c, commit, out, err);
    if (!st)
        say(c, "Hub · %s; installed %s at %.12s from the Hugging Face cache", why, c->req->model,
            commit);
    return st;
}

/* Has the installed draft's repository a new commit? Asks once (the answer is kept for the
 * installation that follows); a draft repository that does not answer keeps the installed
 * one. */
static int draft_moved(struct ctx *c, const struct splash_installed *installed)
{
    if (!installed->draft_repo[0] || c->draft_kind == DRAFT_NONE || c->draft_kind == DRAFT_DIR)
        return 0;
    struct splash_err derr;
    snprintf(c->draft->repo_id, sizeof c->draft->repo_id, "%s", installed->draft_repo);
    if (splash_hub_revision_fetch(&c->env, installed->draft_repo, "main", REVISION_TIMEOUT,
                                  &c->draft_rev, &derr)) {
        say(c, "Hub · draft %s: %s; keeping its installed commit %.12s", installed->draft_repo,
            derr.msg, installed->draft_commit);
        return 0;
    }
    c->have_draft_rev = 1;
    return strcmp(c->draft_rev.commit, installed->draft_commit) != 0;
}

enum splash_status splash_install(const struct splash_install_request *req,
                                  struct splash_installed *out, struct splash_err *err)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    memset(out, 0, sizeof *out);
    c.req = req;
    enum splash_status st = splash_model_id_parse(req->model, &c.id, err);
    if (st || (st = splash_hub_env_read(&c.env, err)))
        return st;
    snprintf(c.repo_id, sizeof c.repo_id, "%s/%s", c.id.owner, c.id.repo);
    c.revision = req->revision && *req->revision ? req->revision : "main";
    if (req->models_dir)
        snprintf(c.models_dir, sizeof c.models_dir, "%s", req->models_dir);
    else if ((st = splash_install_models_dir(c.models_dir, sizeof c.models_dir, err)))
        return st;
    if ((st = splash_make_dirs(c.models_dir, 0755, err)))
        return st;
    char rev_part[300] = "";
    if (req->revision && *req->revision) {
        char enc[280];
        name_part(req->revision, enc, sizeof enc);
        snprintf(rev_part, sizeof rev_part, "@%s", enc);
    }
    /* --draft-model: a directory, none, or OWNER/REPO; a separate installation (models.md) */
    char draft_part[300] = "";
    struct stat sb;
    if (req->draft_model) {
        char enc[280];
        name_part(req->draft_model, enc, sizeof enc);
        snprintf(draft_part, sizeof draft_part, "+draft=%.200s", enc);
        const char *slash = strchr(req->draft_model, '/');
        if (!strcmp(req->draft_model, "none"))
            c.draft_kind = DRAFT_NONE;
        else if (!stat(req->draft_model, &sb) && S_ISDIR(sb.st_mode))
            c.draft_kind = DRAFT_DIR;
        else if (slash && slash != req->draft_model && slash[1] && !strchr(slash + 1, '/') &&
                 !strchr(req->draft_model, ':') && req->draft_model[0] != '.')
            c.draft_kind = DRAFT_REPO;
        else
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "--draft-model %.200s: neither a directory nor OWNER/REPO",
                                  req->draft_model);
    }
    snprintf(c.inst_name, sizeof c.inst_name, "%s--%s%s%s%s%s%s", c.id.owner, c.id.repo,
             c.id.variant[0] ? "--" : "", c.id.variant, rev_part,
             req->language_only ? "+language-only" : "", draft_part);
    snprintf(c.inst_dir, sizeof c.inst_dir, "%.3500s/%s", c.models_dir, c.inst_name);
    if (!splash_hub_cache_repo_dir(c.env.cache, c.id.owner, c.id.repo, c.repo_dir,
                                   sizeof c.repo_dir))
        return splash_err_set(err, SPLASH_ERR_INVALID, "HF_HUB_CACHE: path too long");
    if (!(c.draft = calloc(1, sizeof *c.draft)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    int lock = take_lock(&c, err);
    if (lock < 0) {
        free(c.draft);
        return SPLASH_ERR_IO;
    }

    struct splash_installed installed;
    struct splash_err damage;
    enum splash_status cur = splash_assembly_current(c.inst_dir, &installed, &damage);
    int have = cur == SPLASH_OK;
    if (req->offline || c.env.offline) {
        st = without_hub(&c, req->offline ? "--offline" : "HF_HUB_OFFLINE is set", out, err);
    } else if (have && splash_hub_is_commit(c.revision) && !strcmp(installed.commit, c.revision)) {
        *out = installed; /* a commit never moves: no request */
    } else {
        struct splash_hub_revision rev;
        struct splash_err herr;
        st = splash_hub_revision_fetch(&c.env, c.repo_id, c.revision, REVISION_TIMEOUT, &rev,
                                       &herr);
        if (st == SPLASH_ERR_IO) {
            st = without_hub(&c, herr.msg, out, err);
        } else if (st) {
            *err = herr;
        } else if (have && !strcmp(installed.commit, rev.commit) && !draft_moved(&c, &installed)) {
            *out = installed;
            if (strcmp(c.revision, rev.commit))
                st = splash_hub_cache_write_ref(c.repo_dir, c.revision, rev.commit, err);
        } else {
            if (cur != SPLASH_OK && cur != SPLASH_ERR_NOT_FOUND)
                say(&c, "Installing · %s: rebuilding a damaged installation (%s)", req->model,
                    damage.msg);
            st = install_revision(&c, &rev, out, err);
            if (st && have) {
                say(&c, "Hub · cannot install %s at %.12s (%s); starting the installed one at "
                        "%.12s",
                    req->model, rev.commit, err->msg, installed.commit);
                *out = installed;
                st = SPLASH_OK;
            } else if (!st) {
                say(&c, "Installed · %s at %.12s in %s", req->model, out->commit, out->dir);
                splash_hub_retire(c.inst_dir, out->name, c.repo_dir, req->line);
            }
        }
        splash_hub_revision_free(&rev);
    }
    if (!st)
        splash_hub_sweep(c.models_dir, req->line);
    close(lock);
    if (c.have_draft_rev)
        splash_hub_revision_free(&c.draft_rev);
    free(c.draft);
    return st;
}
