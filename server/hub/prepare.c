/* splash_prepare_local_model: local files assembled as a download is. */
#include "server/hub/prepare.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/checkpoint_rules.h"
#include "core/model_check.h"
#include "core/paths.h"
#include "core/target.h"
#include "server/hub/assembly.h"
#include "server/hub/draft.h"
#include "server/hub/fetch.h"
#include "server/hub/header_check.h"
#include "server/hub/install.h"
#include "server/hub/retire.h"

#define MAX_FILES 512

struct local_file {
    char real[PATH_MAX];
    char link[300];
    char name[256];
    uint64_t size;
    struct timespec mtime;
    char digest[65];
};

struct plan {
    struct local_file *files;
    size_t n;
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static enum splash_status add(struct plan *p, const char *path, const char *dir_in_assembly,
                              struct splash_err *err)
{
    if (p->n == MAX_FILES)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: more than %d files", path,
                              MAX_FILES);
    struct local_file *f = &p->files[p->n];
    memset(f, 0, sizeof *f);
    struct stat sb;
    if (!realpath(path, f->real) || stat(f->real, &sb))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: not a regular file", path);
    f->size = (uint64_t)sb.st_size;
    f->mtime = sb.st_mtim;
    snprintf(f->name, sizeof f->name, "%s", base_name(path));
    snprintf(f->link, sizeof f->link, "%s/%s", dir_in_assembly, f->name);
    p->n++;
    return SPLASH_OK;
}

/* A draft directory's config.json and safetensors, held to the target by model-check. */
static enum splash_status add_draft(struct plan *p, const char *dir,
                                    const struct splash_registry *registry, const char *target,
                                    struct splash_err *err)
{
    struct splash_hub_draft *d = calloc(1, sizeof *d);
    if (!d)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = splash_hub_draft_local(dir, registry, target, d, err);
    for (size_t i = 0; !st && i < d->n; i++)
        st = add(p, d->source[i], "draft", err);
    free(d);
    return st;
}

/* The SHA-256 of a file, from its name when it is a Hugging Face blob (already its digest). */
static enum splash_status digest(struct local_file *f, struct splash_err *err)
{
    const char *name = base_name(f->real);
    size_t dir_len = (size_t)(name - f->real);
    int hex = strlen(name) == 64;
    for (const char *c = name; hex && *c; c++)
        hex = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f');
    if (hex && dir_len > 7 && !strncmp(name - 7, "/blobs/", 7)) {
        memcpy(f->digest, name, 65);
        return SPLASH_OK;
    }
    return splash_hub_file_digest(f->real, 0, f->digest, err);
}

/* KEY: the SHA-1 of each file's role, real path, size and modification time. */
static void plan_key(const struct plan *p, char key[41])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha1(), NULL);
    for (size_t i = 0; i < p->n; i++) {
        char line[PATH_MAX + 400];
        int n = snprintf(line, sizeof line, "%s\n%s\n%llu %lld.%09ld\n", p->files[i].link,
                         p->files[i].real, (unsigned long long)p->files[i].size,
                         (long long)p->files[i].mtime.tv_sec, p->files[i].mtime.tv_nsec);
        EVP_DigestUpdate(ctx, line, (size_t)n);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; i < 20; i++)
        snprintf(key + 2 * i, 3, "%02x", md[i]);
}

static void short_hash(const char *text, char out[9])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(text, strlen(text), md, &len, EVP_sha1(), NULL);
    snprintf(out, 9, "%02x%02x%02x%02x", md[0], md[1], md[2], md[3]);
}

static enum splash_status plan_target(const struct splash_registry *registry, const char *target,
                                      const char *variant, struct plan *p,
                                      struct splash_target *t, struct splash_err *err)
{
    struct stat sb;
    if (stat(target, &sb))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: no such file or directory",
                              target);
    char mlx[256];
    if (S_ISDIR(sb.st_mode) && splash_checkpoint_is_package(target, mlx, sizeof mlx))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%.150s is a Splash package, a format Splash no longer loads: serve "
                              "the MLX model %.80s instead",
                              base_name(target), mlx);
    enum splash_status st = splash_target_select(target, variant, t, err);
    if (st)
        return st;
    if (t->kind == SPLASH_TARGET_SAFETENSORS) {
        DIR *d = opendir(t->dir);
        struct dirent *e;
        while (!st && d && (e = readdir(d))) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%.3800s/%.250s", t->dir, e->d_name);
            if (e->d_name[0] != '.' && splash_install_wants_file(e->d_name, 0))
                st = add(p, path, "target", err);
        }
        if (d)
            closedir(d);
    } else {
        for (int k = 1; k <= t->n_parts && !st; k++) {
            char part[PATH_MAX];
            splash_target_part_path(t, k, part, sizeof part);
            st = add(p, part, "target", err);
        }
    }
    if (st)
        return st;
    /* checked as a download is: model-check on the headers */
    struct splash_check_result res;
    struct splash_err cerr = {{0}};
    if (registry && (st = splash_model_check(registry, t->path, &res, &cerr))) {
        char line[200];
        snprintf(line, sizeof line, "%.199s", res.problems ? res.problems : cerr.msg);
        line[strcspn(line, "\n")] = 0;
        splash_err_set(err, st, "%.150s: refused by model-check: %s", t->path, line);
    }
    if (registry)
        splash_check_result_free(&res);
    return st;
}

enum splash_status splash_prepare_local_model(const struct splash_registry *registry,
                                              const char *target, const char *variant,
                                              const char *draft, const char *mmproj,
                                              const char *models_dir,
                                              struct splash_prepared *out,
                                              struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    struct plan p = {.files = calloc(MAX_FILES, sizeof *p.files)};
    if (!p.files)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    struct splash_target t;
    enum splash_status st = plan_target(registry, target, variant, &p, &t, err);
    size_t n_target = p.n;
    if (!st && mmproj) {
        size_t len = strlen(mmproj);
        if (len < 5 || strcmp(mmproj + len - 5, ".gguf"))
            st = splash_err_set(err, SPLASH_ERR_INVALID, "mmproj %.200s: not a GGUF file", mmproj);
        else if (t.kind == SPLASH_TARGET_SAFETENSORS)
            st = splash_err_set(err, SPLASH_ERR_INVALID,
                                "mmproj %.200s: an MLX target uses its own vision tower", mmproj);
        else
            st = add(&p, mmproj, "mmproj", err);
    }
    if (!st && draft)
        st = add_draft(&p, draft, registry, t.path, err);
    char dir[PATH_MAX];
    if (!st && !models_dir) {
        st = splash_install_models_dir(dir, sizeof dir, err);
        models_dir = dir;
    }
    int lock = -1;
    if (!st && (st = splash_make_dirs(models_dir, 0755, err)) == SPLASH_OK &&
        (lock = splash_install_lock(models_dir, NULL, err)) < 0)
        st = SPLASH_ERR_IO;
    char key[41], inst_dir[PATH_MAX], hash[9], name[128];
    if (!st) {
        plan_key(&p, key);
        short_hash(p.files[0].real, hash);
        const char *label = t.kind == SPLASH_TARGET_SAFETENSORS ? base_name(t.dir) : t.name;
        size_t o = 0;
        for (const char *c = label; *c && o < 80; c++)
            name[o++] = (*c == '/' || *c == '.' || (unsigned char)*c < 0x20) ? '_' : *c;
        name[o] = 0;
        snprintf(inst_dir, sizeof inst_dir, "%.3800s/local--%s--%s", models_dir, name, hash);
        struct splash_installed cur;
        struct splash_err ignored;
        if (!splash_assembly_current(inst_dir, &cur, &ignored) && !strcmp(cur.commit, key)) {
            /* the same files: the same directory, after a stat of each */
            snprintf(out->dir, sizeof out->dir, "%s", cur.dir);
            snprintf(out->target, sizeof out->target, "%s", cur.target);
            out->kind = cur.kind;
            splash_hub_sweep(models_dir, NULL);
            close(lock);
            free(p.files);
            return SPLASH_OK;
        }
    }
    for (size_t i = 0; i < p.n && !st; i++)
        st = digest(&p.files[i], err);
    if (!st) {
        struct splash_assembly_file *af = calloc(p.n, sizeof *af);
        if (!af)
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !st && i < p.n; i++)
            af[i] = (struct splash_assembly_file){.path = p.files[i].name,
                                                  .source = p.files[i].real,
                                                  .size = p.files[i].size,
                                                  .blob = p.files[i].digest, .lfs = 1,
                                                  .link = p.files[i].link};
        for (size_t i = n_target; !st && i < p.n; i++)
            af[i].role = strncmp(p.files[i].link, "draft/", 6) ? "mmproj" : "draft";
        char target_path[PATH_MAX];
        if (!realpath(target, target_path))
            snprintf(target_path, sizeof target_path, "%s", target);
        struct splash_assembly a = {.model = target_path, .repo_id = "", .variant = variant,
                                    .revision = "local", .commit = key, .endpoint = "",
                                    .cache_repo_dir = "", .kind = t.kind, .family = "",
                                    .files = af, .n_files = n_target};
        /* model.json lists every file; the target is the first */
        a.n_files = p.n;
        char draft_real[PATH_MAX];
        if (draft && realpath(draft, draft_real))
            a.draft_dir = draft_real;
        struct splash_installed inst;
        if (!st && !(st = splash_assembly_publish(inst_dir, &a, &inst, err))) {
            snprintf(out->dir, sizeof out->dir, "%s", inst.dir);
            snprintf(out->target, sizeof out->target, "%s", inst.target);
            out->kind = inst.kind;
            splash_hub_retire(inst_dir, key, "", NULL);
        }
        free(af);
    }
    if (!st)
        splash_hub_sweep(models_dir, NULL);
    if (lock >= 0)
        close(lock);
    free(p.files);
    return st;
}
