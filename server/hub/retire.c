/* Freeing earlier assemblies and the cache files only they used. */
#include "server/hub/retire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/hub/api.h"
#include "server/hub/assembly.h"
#include "server/hub/cache.h"

int splash_hub_hold(const char *assembly_dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.4000s/model.json", assembly_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_SH)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb))
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
            remove_tree(sub);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

/* Calls fn on every regular file or link under dir (relative path), depth-first. */
static void walk(const char *dir, const char *rel, int depth,
                 void (*fn)(const char *full, const char *rel, void *), void *user)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[PATH_MAX], full[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
                (int)sizeof sub ||
            snprintf(full, sizeof full, "%s/%s", dir, sub) >= (int)sizeof full)
            continue;
        struct stat sb;
        if (lstat(full, &sb))
            continue;
        if (S_ISDIR(sb.st_mode) && depth < 8)
            walk(dir, sub, depth + 1, fn, user);
        else if (!S_ISDIR(sb.st_mode))
            fn(full, sub, user);
    }
    if (d)
        closedir(d);
}

struct ref_scan {
    const char *commit;
    int named;
};

static void ref_names(const char *full, const char *rel, void *user)
{
    struct ref_scan *s = user;
    (void)rel;
    FILE *f = fopen(full, "r");
    char buf[64] = "";
    if (f) {
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        fclose(f);
    }
    buf[strcspn(buf, " \r\n")] = 0;
    if (!strcmp(buf, s->commit))
        s->named = 1;
}

struct blob_scan {
    const char *blob;
    int used;
};

static void blob_use(const char *full, const char *rel, void *user)
{
    struct blob_scan *s = user;
    char target[PATH_MAX];
    (void)rel;
    ssize_t n = readlink(full, target, sizeof target - 1);
    if (n <= 0)
        return;
    target[n] = 0;
    const char *base = strrchr(target, '/');
    if (!strcmp(base ? base + 1 : target, s->blob))
        s->used = 1;
}

struct foreign_scan {
    json_t *files; /* the assembly's model.json files */
    int foreign;
};

static void foreign_file(const char *full, const char *rel, void *user)
{
    struct foreign_scan *s = user;
    (void)full;
    for (size_t i = 0; i < json_array_size(s->files); i++) {
        const char *p = json_string_value(json_object_get(json_array_get(s->files, i), "path"));
        if (p && !strcmp(p, rel))
            return;
    }
    s->foreign = 1;
}

/* The commit's snapshot files that only this assembly used, with their blobs. */
static void free_commit(const char *repo_dir, const char *commit, json_t *files,
                        splash_hub_line_fn line)
{
    char refs[PATH_MAX], snap[PATH_MAX], snaps[PATH_MAX];
    snprintf(refs, sizeof refs, "%.4000s/refs", repo_dir);
    snprintf(snaps, sizeof snaps, "%.4000s/snapshots", repo_dir);
    snprintf(snap, sizeof snap, "%.4000s/%.40s", snaps, commit);
    struct ref_scan rs = {.commit = commit};
    walk(refs, "", 0, ref_names, &rs);
    if (rs.named)
        return; /* another installation or a branch still names it */
    struct foreign_scan fs = {.files = files};
    walk(snap, "", 0, foreign_file, &fs);
    if (fs.foreign) {
        if (line) {
            char msg[300];
            snprintf(msg, sizeof msg, "Installing · kept %.12s in the cache: other files share "
                                      "its snapshot", commit);
            line(msg);
        }
        return;
    }
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *p = json_string_value(json_object_get(f, "path"));
        const char *blob = json_string_value(json_object_get(f, "sha256"));
        if (!blob)
            blob = json_string_value(json_object_get(f, "git_blob"));
        char link[PATH_MAX];
        if (!p || !splash_hub_cache_snapshot_path(repo_dir, commit, p, link, sizeof link))
            continue;
        unlink(link);
        struct blob_scan bs = {.blob = blob};
        if (blob && strlen(blob) >= 40 && !strchr(blob, '/')) {
            walk(snaps, "", 0, blob_use, &bs);
            if (!bs.used) {
                char bp[PATH_MAX];
                if (splash_hub_cache_blob_path(repo_dir, blob, bp, sizeof bp))
                    unlink(bp);
            }
        }
    }
    remove_tree(snap); /* the empty folders left */
}

void splash_hub_retire(const char *inst_dir, const char *keep_commit, const char *repo_dir,
                       splash_hub_line_fn line)
{
    DIR *d = opendir(inst_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *name = e->d_name;
        if (!splash_hub_is_commit(name) || !strcmp(name, keep_commit))
            continue;
        char dir[PATH_MAX], json_path[PATH_MAX];
        snprintf(dir, sizeof dir, "%.4000s/%.40s", inst_dir, name);
        snprintf(json_path, sizeof json_path, "%.4000s/model.json", dir);
        int fd = open(json_path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB)) {
            close(fd);
            if (line) {
                char msg[300];
                snprintf(msg, sizeof msg, "Installing · kept %.12s: a running server holds it",
                         name);
                line(msg);
            }
            continue;
        }
        json_t *meta = json_load_file(json_path, 0, NULL);
        remove_tree(dir);
        if (fd >= 0)
            close(fd);
        json_t *files = meta ? json_object_get(meta, "files") : NULL;
        const char *cache = meta ? json_string_value(json_object_get(meta, "cache")) : NULL;
        const char *commit = meta ? json_string_value(json_object_get(meta, "commit")) : NULL;
        json_t *draft = meta ? json_object_get(meta, "draft") : NULL;
        const char *draft_cache = json_string_value(json_object_get(draft, "cache"));
        const char *draft_commit = json_string_value(json_object_get(draft, "commit"));
        json_t *own = json_array(), *drafts = json_array();
        for (size_t i = 0; i < json_array_size(files); i++) {
            json_t *f = json_array_get(files, i);
            const char *role = json_string_value(json_object_get(f, "role"));
            json_array_append(role && !strcmp(role, "draft") ? drafts : own, f);
        }
        if (commit && splash_hub_is_commit(commit) && cache && *repo_dir &&
            !strcmp(cache, repo_dir))
            free_commit(repo_dir, commit, own, line);
        /* the draft's commit once no ref names it (each installation pins its own) */
        if (draft_cache && *draft_cache && draft_commit && splash_hub_is_commit(draft_commit))
            free_commit(draft_cache, draft_commit, drafts, line);
        json_decref(own);
        json_decref(drafts);
        json_decref(meta);
    }
    if (d)
        closedir(d);
}

/* A leftover of a process that is gone: NAME-PID or NAME-ANYTHING-PID (.check-, .new-,
 * .old-, .current-). */
static int dead_leftover(const char *name)
{
    if (strncmp(name, ".check-", 7) && strncmp(name, ".new-", 5) && strncmp(name, ".old-", 5) &&
        strncmp(name, ".current-", 9))
        return 0;
    const char *dash = strrchr(name, '-');
    char *end;
    long pid = strtol(dash + 1, &end, 10);
    return pid > 0 && !*end && kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Does a server hold any assembly of the installation? */
static int any_held(const char *inst_dir)
{
    DIR *d = opendir(inst_dir);
    struct dirent *e;
    int held = 0;
    while (d && !held && (e = readdir(d))) {
        char path[PATH_MAX];
        if (e->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%.3900s/%s/model.json", inst_dir, e->d_name) >=
                (int)sizeof path)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB))
            held = 1;
        if (fd >= 0)
            close(fd);
    }
    if (d)
        closedir(d);
    return held;
}

void splash_hub_sweep(const char *models_dir, splash_hub_line_fn line)
{
    DIR *d = opendir(models_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *name = e->d_name;
        char dir[PATH_MAX];
        if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ".lock") ||
            snprintf(dir, sizeof dir, "%.3900s/%s", models_dir, name) >= (int)sizeof dir)
            continue;
        if (name[0] == '.') {
            if (dead_leftover(name))
                remove_tree(dir);
            continue;
        }
        struct stat sb;
        if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode))
            continue;
        /* the installation's own leftovers */
        DIR *inner = opendir(dir);
        struct dirent *f;
        while (inner && (f = readdir(inner))) {
            char sub[PATH_MAX];
            if (f->d_name[0] == '.' && dead_leftover(f->d_name) &&
                snprintf(sub, sizeof sub, "%.3900s/%s", dir, f->d_name) < (int)sizeof sub)
                remove_tree(sub);
        }
        if (inner)
            closedir(inner);
        struct splash_installed cur;
        struct splash_err why;
        enum splash_status st = splash_assembly_current(dir, &cur, &why);
        int local = !strncmp(name, "local--", 7);
        if (st == SPLASH_OK) {
            /* earlier assemblies whose servers have stopped since */
            char cache[PATH_MAX] = "", json_path[PATH_MAX];
            snprintf(json_path, sizeof json_path, "%.4000s/model.json", cur.dir);
            json_t *meta = json_load_file(json_path, 0, NULL);
            const char *c = json_string_value(json_object_get(meta, "cache"));
            snprintf(cache, sizeof cache, "%s", c ? c : "");
            json_decref(meta);
            splash_hub_retire(dir, cur.name, cache, NULL);
            continue;
        }
        /* nothing a start could serve: an installation that never completed, or local files
         * gone (no preparation returns it); a Hub installation whose files are damaged is
         * rebuilt by its next start instead */
        int gone = local || (st == SPLASH_ERR_NOT_FOUND && !strstr(why.msg, "its file is gone"));
        if (gone && !any_held(dir)) {
            remove_tree(dir);
            if (line) {
                char msg[PATH_MAX + 64];
                snprintf(msg, sizeof msg, "Installing · removed %.200s: %.200s", name, why.msg);
                line(msg);
            }
        }
    }
    if (d)
        closedir(d);
}
