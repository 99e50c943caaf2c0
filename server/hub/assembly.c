/* Assemblies of links and their model.json. */
#include "server/hub/assembly.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/paths.h"
#include "core/target.h"

#ifndef SPLASH_VERSION
#define SPLASH_VERSION "dev"
#endif

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* A GGUF's parts lie side by side in target/; a safetensors model keeps its paths. */
static void link_name(const struct splash_assembly *a, const struct splash_assembly_file *f,
                      char *out, size_t size)
{
    if (f->link) {
        snprintf(out, size, "%s", f->link);
        return;
    }
    snprintf(out, size, "target/%s", a->kind == SPLASH_TARGET_SAFETENSORS ? f->path
                                                                           : base_name(f->path));
}

static int remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb))
        return 0;
    if (!S_ISDIR(sb.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%.3800s/%s", path, e->d_name);
        rc |= remove_tree(sub);
    }
    closedir(d);
    return rc | rmdir(path);
}

static char *iso_time(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void splash_assembly_name(const char *commit, const char *draft_key, char out[41])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    char text[400];
    snprintf(text, sizeof text, "%.64s+%.300s", commit, draft_key);
    EVP_Digest(text, strlen(text), md, &len, EVP_sha1(), NULL);
    for (unsigned i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static const char *folder(const struct splash_assembly *a)
{
    return a->name ? a->name : a->commit;
}

static json_t *describe(const struct splash_assembly *a)
{
    char when[32], first[PATH_MAX];
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(a->model));
    json_object_set_new(o, "repository", json_string(a->repo_id));
    json_object_set_new(o, "variant", a->variant && *a->variant ? json_string(a->variant)
                                                                 : json_null());
    json_object_set_new(o, "revision", json_string(a->revision));
    json_object_set_new(o, "commit", json_string(a->commit));
    json_object_set_new(o, "assembly", json_string(folder(a)));
    json_object_set_new(o, "endpoint", json_string(a->endpoint ? a->endpoint : ""));
    json_object_set_new(o, "cache", json_string(a->cache_repo_dir));
    json_object_set_new(o, "format", json_string(a->kind == SPLASH_TARGET_SAFETENSORS
                                                     ? "safetensors"
                                                     : "gguf"));
    json_object_set_new(o, "family", json_string(a->family ? a->family : ""));
    if (a->kind == SPLASH_TARGET_SAFETENSORS)
        snprintf(first, sizeof first, "target");
    else
        link_name(a, &a->files[0], first, sizeof first);
    json_object_set_new(o, "target", json_string(first));
    json_object_set_new(o, "installed_at", json_string(iso_time(when, sizeof when)));
    json_object_set_new(o, "splash", json_string(SPLASH_VERSION));
    json_t *files = json_array();
    uint64_t total = 0;
    for (size_t i = 0; i < a->n_files; i++) {
        const struct splash_assembly_file *f = &a->files[i];
        char link[PATH_MAX];
        link_name(a, f, link, sizeof link);
        json_t *e = json_object();
        json_object_set_new(e, "path", json_string(f->path));
        json_object_set_new(e, "link", json_string(link));
        json_object_set_new(e, "source", json_string(f->source));
        json_object_set_new(e, "size", json_integer((json_int_t)f->size));
        json_object_set_new(e, f->lfs ? "sha256" : "git_blob", json_string(f->blob));
        if (f->role)
            json_object_set_new(e, "role", json_string(f->role));
        json_array_append_new(files, e);
        total += f->size;
    }
    json_object_set_new(o, "files", files);
    if (a->draft_repo && *a->draft_repo)
        json_object_set_new(o, "draft", json_pack("{s:s, s:s, s:s}", "repository", a->draft_repo,
                                                  "commit", a->draft_commit, "cache",
                                                  a->draft_cache));
    else if (a->draft_dir && *a->draft_dir)
        json_object_set_new(o, "draft", json_pack("{s:s}", "directory", a->draft_dir));
    json_object_set_new(o, "size", json_integer((json_int_t)total));
    return o;
}

enum splash_status splash_assembly_publish(const char *inst_dir, const struct splash_assembly *a,
                                           struct splash_installed *out, struct splash_err *err)
{
    enum splash_status st = splash_make_dirs(inst_dir, 0755, err);
    if (st)
        return st;
    char tmp[PATH_MAX], final[PATH_MAX], path[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%.3900s/.new-%s-%d", inst_dir, folder(a), (int)getpid());
    snprintf(final, sizeof final, "%.3900s/%s", inst_dir, folder(a));
    remove_tree(tmp);
    for (size_t i = 0; i < a->n_files && !st; i++) {
        char link[PATH_MAX];
        link_name(a, &a->files[i], link, sizeof link);
        snprintf(path, sizeof path, "%.3900s/%.190s", tmp, link);
        char *slash = strrchr(path, '/');
        *slash = 0;
        st = splash_make_dirs(path, 0755, err);
        *slash = '/';
        if (!st && symlink(a->files[i].source, path))
            st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot link it (%s)", path,
                                strerror(errno));
    }
    if (!st) {
        json_t *o = describe(a);
        snprintf(path, sizeof path, "%.3900s/model.json", tmp);
        if (json_dump_file(o, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
            st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot write it", path);
        json_decref(o);
    }
    /* the new assembly takes its name in one rename; one already there is moved aside */
    if (!st) {
        char old[PATH_MAX];
        snprintf(old, sizeof old, "%.3900s/.old-%s-%d", inst_dir, folder(a), (int)getpid());
        struct stat sb;
        if (!lstat(final, &sb) && rename(final, old))
            st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot replace it", final);
        else if (rename(tmp, final))
            st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot publish it (%s)", final,
                                strerror(errno));
        remove_tree(old);
    }
    if (!st) {
        char cur_tmp[PATH_MAX], cur[PATH_MAX];
        snprintf(cur_tmp, sizeof cur_tmp, "%.3900s/.current-%d", inst_dir, (int)getpid());
        snprintf(cur, sizeof cur, "%.3900s/current", inst_dir);
        unlink(cur_tmp);
        if (symlink(folder(a), cur_tmp) || rename(cur_tmp, cur))
            st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot point it at %s", cur,
                                folder(a));
    }
    if (st) {
        remove_tree(tmp);
        return st;
    }
    return splash_assembly_current(inst_dir, out, err);
}

static const char *text_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

enum splash_status splash_assembly_current(const char *inst_dir, struct splash_installed *out,
                                           struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    char cur[PATH_MAX], commit[64], path[PATH_MAX];
    snprintf(cur, sizeof cur, "%.3900s/current", inst_dir);
    ssize_t n = readlink(cur, commit, sizeof commit - 1);
    if (n <= 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: nothing installed", inst_dir);
    commit[n] = 0;
    if (strchr(commit, '/') || n != 40)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: names %.60s", cur, commit);
    snprintf(out->dir, sizeof out->dir, "%.3900s/%s", inst_dir, commit);
    snprintf(path, sizeof path, "%.3900s/model.json", out->dir);
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    if (!o)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: unreadable (%.60s)", path,
                              jerr.text);
    enum splash_status st = SPLASH_OK;
    const char *c = json_string_value(json_object_get(o, "commit"));
    const char *name = json_string_value(json_object_get(o, "assembly"));
    const char *target = json_string_value(json_object_get(o, "target"));
    const char *format = json_string_value(json_object_get(o, "format"));
    json_t *files = json_object_get(o, "files");
    if (!c || strlen(c) != 40 || strcmp(name ? name : c, commit) || !target || strstr(target, "..") || !format ||
        !json_is_array(files) || !json_array_size(files))
        st = splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: incomplete", path);
    for (size_t i = 0; !st && i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *link = json_string_value(json_object_get(f, "link"));
        json_t *size = json_object_get(f, "size");
        struct stat sb;
        char lp[PATH_MAX];
        if (!link || strstr(link, "..") || !json_is_integer(size)) {
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: files[%zu] incomplete", path, i);
            break;
        }
        snprintf(lp, sizeof lp, "%.3900s/%.190s", out->dir, link);
        if (stat(lp, &sb))
            st = splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: its file is gone", lp);
        else if ((json_int_t)sb.st_size != json_integer_value(size))
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%.200s: %lld bytes, %lld recorded", lp,
                                (long long)sb.st_size, (long long)json_integer_value(size));
    }
    json_t *draft = json_object_get(o, "draft");
    for (size_t i = 0; !st && i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        const char *role = json_string_value(json_object_get(f, "role"));
        if (role && !strcmp(role, "mmproj"))
            snprintf(out->mmproj, sizeof out->mmproj, "%.3900s/%.190s", out->dir,
                     json_string_value(json_object_get(f, "link")));
    }
    if (!st) {
        memcpy(out->name, commit, 41);
        snprintf(out->commit, sizeof out->commit, "%s", c);
        snprintf(out->draft_repo, sizeof out->draft_repo, "%s",
                 text_of(draft, "repository"));
        snprintf(out->draft_commit, sizeof out->draft_commit, "%s",
                 text_of(draft, "commit"));
        snprintf(out->draft_dir, sizeof out->draft_dir, "%s",
                 text_of(draft, "directory"));
        snprintf(out->target, sizeof out->target, "%.3900s/%.190s", out->dir, target);
        out->kind = !strcmp(format, "safetensors") ? SPLASH_TARGET_SAFETENSORS
                    : json_array_size(files) > 1 && strstr(target, "-of-") ? SPLASH_TARGET_GGUF_SPLIT
                                                                           : SPLASH_TARGET_GGUF;
    }
    json_decref(o);
    return st;
}
