/* The Hugging Face cache: blobs, snapshot links and refs. */
#include "server/hub/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"
#include "server/hub/api.h"

static int fits(int n, size_t size)
{
    return n >= 0 && (size_t)n < size;
}

int splash_hub_cache_repo_dir(const char *cache, const char *owner, const char *repo, char *out,
                              size_t size)
{
    return fits(snprintf(out, size, "%s/models--%s--%s", cache, owner, repo), size);
}

int splash_hub_cache_blob_path(const char *repo_dir, const char *blob, char *out, size_t size)
{
    return fits(snprintf(out, size, "%s/blobs/%s", repo_dir, blob), size);
}

int splash_hub_cache_snapshot_path(const char *repo_dir, const char *commit, const char *path,
                                   char *out, size_t size)
{
    return fits(snprintf(out, size, "%s/snapshots/%s/%s", repo_dir, commit, path), size);
}

static int ref_ok(const char *ref)
{
    if (!*ref || ref[0] == '/' || strlen(ref) > 200)
        return 0;
    for (const char *seg = ref; seg;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n <= 2 && !strncmp(seg, "..", n)))
            return 0;
        seg = end ? end + 1 : NULL;
    }
    return 1;
}

enum splash_status splash_hub_cache_read_ref(const char *repo_dir, const char *ref,
                                             char commit[41], struct splash_err *err)
{
    char path[PATH_MAX];
    commit[0] = 0;
    if (!ref_ok(ref) || !fits(snprintf(path, sizeof path, "%s/refs/%s", repo_dir, ref),
                              sizeof path))
        return splash_err_set(err, SPLASH_ERR_INVALID, "ref %.80s: not a ref name", ref);
    FILE *f = fopen(path, "r");
    if (!f)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: no such ref", path);
    char buf[64] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    buf[strcspn(buf, " \t\r\n")] = 0;
    if (!splash_hub_is_commit(buf))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: not a commit hash", path);
    memcpy(commit, buf, 41);
    return SPLASH_OK;
}

/* Writes text to path through a temporary file and a rename. */
static enum splash_status write_atomic(const char *path, const char *text, struct splash_err *err)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: %s", tmp, strerror(errno));
    int bad = fputs(text, f) < 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot write it", path);
    }
    return SPLASH_OK;
}

static enum splash_status make_parent(const char *path, struct splash_err *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return SPLASH_OK;
    *slash = 0;
    return splash_make_dirs(dir, 0755, err);
}

enum splash_status splash_hub_cache_write_ref(const char *repo_dir, const char *ref,
                                              const char *commit, struct splash_err *err)
{
    char path[PATH_MAX];
    if (!ref_ok(ref) || !fits(snprintf(path, sizeof path, "%s/refs/%s", repo_dir, ref),
                              sizeof path))
        return splash_err_set(err, SPLASH_ERR_INVALID, "ref %.80s: not a ref name", ref);
    enum splash_status st = make_parent(path, err);
    return st ? st : write_atomic(path, commit, err);
}

int splash_hub_cache_has_blob(const char *repo_dir, const char *blob, uint64_t size)
{
    char path[PATH_MAX];
    struct stat sb;
    return splash_hub_cache_blob_path(repo_dir, blob, path, sizeof path) && !lstat(path, &sb) &&
           S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == size;
}

enum splash_status splash_hub_cache_link(const char *repo_dir, const char *commit,
                                         const char *path, const char *blob,
                                         struct splash_err *err)
{
    char link[PATH_MAX], target[PATH_MAX], tmp[PATH_MAX + 32];
    if (!splash_hub_cache_snapshot_path(repo_dir, commit, path, link, sizeof link))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.100s: path too long", path);
    /* ../../blobs/BLOB from snapshots/COMMIT/, one more ../ per folder of PATH */
    size_t used = 0;
    used += (size_t)snprintf(target, sizeof target, "../../");
    for (const char *c = path; *c; c++)
        if (*c == '/' && used + 4 < sizeof target)
            used += (size_t)snprintf(target + used, sizeof target - used, "../");
    snprintf(target + used, sizeof target - used, "blobs/%s", blob);
    enum splash_status st = make_parent(link, err);
    if (st)
        return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", link, (int)getpid());
    unlink(tmp);
    if (symlink(target, tmp) || rename(tmp, link)) {
        unlink(tmp);
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot link it (%s)", link,
                              strerror(errno));
    }
    return SPLASH_OK;
}

enum splash_status splash_hub_cache_resolve(const char *repo_dir, const char *commit,
                                            const char *path, char *out, size_t size,
                                            uint64_t *bytes, struct splash_err *err)
{
    char snap[PATH_MAX], real[PATH_MAX], root[PATH_MAX], blobs[PATH_MAX], snap_root[PATH_MAX];
    if (!splash_hub_cache_snapshot_path(repo_dir, commit, path, snap, sizeof snap))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.100s: path too long", path);
    struct stat sb;
    if (lstat(snap, &sb))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: not in the cache", snap);
    if (!realpath(snap, real))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: a broken link (its blob is gone)",
                              snap);
    if (!realpath(repo_dir, root))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: missing", repo_dir);
    snprintf(blobs, sizeof blobs, "%.4000s/blobs/", root);
    snprintf(snap_root, sizeof snap_root, "%.4000s/snapshots/%s/", root, commit);
    if (strncmp(real, blobs, strlen(blobs)) && strncmp(real, snap_root, strlen(snap_root)))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%.150s: the link leaves the cache's repository (to %.80s)", snap,
                              real);
    if (stat(real, &sb) || !S_ISREG(sb.st_mode))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: not a regular file", snap);
    if (!fits(snprintf(out, size, "%s", real), size))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.100s: path too long", real);
    *bytes = (uint64_t)sb.st_size;
    return SPLASH_OK;
}

void splash_hub_free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

static int add_path(char ***paths, size_t *n, size_t *cap, const char *p)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        char **grown = realloc(*paths, c * sizeof *grown);
        if (!grown)
            return -1;
        *paths = grown;
        *cap = c;
    }
    if (!((*paths)[*n] = strdup(p)))
        return -1;
    ++*n;
    return 0;
}

static int walk(const char *base, const char *rel, int depth, char ***paths, size_t *n,
                size_t *cap)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s%s%s", base, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d)
        return depth ? 0 : -1;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[PATH_MAX];
        if (!fits(snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name), sizeof sub))
            continue;
        struct stat sb;
        char full[PATH_MAX];
        if (!fits(snprintf(full, sizeof full, "%s/%s", base, sub), sizeof full))
            continue;
        if (lstat(full, &sb))
            continue;
        if (S_ISDIR(sb.st_mode)) {
            if (depth < 8)
                rc = walk(base, sub, depth + 1, paths, n, cap);
        } else if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) {
            rc = add_path(paths, n, cap, sub);
        }
    }
    closedir(d);
    return rc;
}

enum splash_status splash_hub_cache_list_snapshot(const char *repo_dir, const char *commit,
                                                  char ***paths, size_t *n,
                                                  struct splash_err *err)
{
    char base[PATH_MAX];
    size_t cap = 0;
    *paths = NULL;
    *n = 0;
    snprintf(base, sizeof base, "%s/snapshots/%s", repo_dir, commit);
    if (walk(base, "", 0, paths, n, &cap)) {
        splash_hub_free_paths(*paths, *n);
        *paths = NULL;
        *n = 0;
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: cannot list the snapshot", base);
    }
    return SPLASH_OK;
}
