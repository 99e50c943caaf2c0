/* GGUF header copies and model-check before a download. */
#include "server/hub/header_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/model_check.h"
#include "server/hub/fetch.h"

#define HEADER_FIRST_READ (256u << 10)
#define HEADER_MAX (256u << 20) /* no GGUF's metadata comes near this */

static enum splash_status read_prefix(const struct splash_hub_env *env, const char *source,
                                      const char *url, unsigned char *buf, size_t want,
                                      size_t *got, struct splash_err *err)
{
    if (!source)
        return splash_hub_read_range(env, url, 0, want, buf, got, err);
    int fd = open(source, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: %s", source, strerror(errno));
    ssize_t n = pread(fd, buf, want, 0);
    close(fd);
    if (n < 0)
        return splash_err_set(err, SPLASH_ERR_IO, "%.200s: read failed", source);
    *got = (size_t)n;
    return SPLASH_OK;
}

/* Reads a growing prefix until the GGUF's metadata and tensor directory parse, and writes
 * the bytes before its data to out_path. */
enum splash_status splash_hub_copy_gguf_header(const struct splash_hub_env *env,
                                               const struct splash_hub_file *f,
                                               const char *source, const char *url,
                                               const char *out_path, struct splash_err *err)
{
    size_t want = HEADER_FIRST_READ;
    unsigned char *buf = NULL;
    enum splash_status st;
    for (;;) {
        if (want > f->size)
            want = (size_t)f->size;
        unsigned char *grown = realloc(buf, want ? want : 1);
        if (!grown) {
            free(buf);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        }
        buf = grown;
        size_t got = 0;
        if ((st = read_prefix(env, source, url, buf, want, &got, err))) {
            struct splash_err inner = *err;
            free(buf);
            return splash_err_set(err, st, "%.100s: reading its header: %s", f->path, inner.msg);
        }
        struct splash_gguf *g = NULL;
        st = splash_gguf_parse_buffer(buf, got, f->path, SPLASH_GGUF_HEADERS_ONLY, &g, err);
        if (!st) {
            size_t keep = g->data_offset < got ? (size_t)g->data_offset : got;
            splash_gguf_close(g);
            FILE *out = fopen(out_path, "wb");
            int bad = !out || fwrite(buf, 1, keep, out) != keep;
            bad |= out && fclose(out) != 0;
            free(buf);
            return bad ? splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot write it", out_path)
                       : SPLASH_OK;
        }
        /* a header longer than what came is read again, four times longer */
        if (!strstr(err->msg, "truncated") || got < want || want >= f->size ||
            want >= HEADER_MAX) {
            free(buf);
            return st;
        }
        want *= 4;
    }
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* model-check on a copy, its verdict in one line. */
static enum splash_status check(const struct splash_registry *registry, const char *path,
                                struct splash_hub_verdict *verdict, struct splash_err *err)
{
    struct splash_check_result res;
    struct splash_err cerr = {{0}};
    enum splash_status st = splash_model_check(registry, path, &res, &cerr);
    if (st) {
        char line[200]; /* its first line, at most 199 bytes of it */
        snprintf(line, sizeof line, "%.199s", res.problems ? res.problems : cerr.msg);
        line[strcspn(line, "\n")] = 0;
        splash_err_set(err, st, "model-check refused it before any weight download: %s", line);
    } else {
        snprintf(verdict->family, sizeof verdict->family, "%s", res.family);
        snprintf(verdict->draft_repo, sizeof verdict->draft_repo, "%s", res.verdict.draft_repo);
    }
    splash_check_result_free(&res);
    return st;
}

static int write_file(const char *path, const void *buf, size_t len)
{
    FILE *out = fopen(path, "wb");
    int bad = !out || fwrite(buf, 1, len, out) != len;
    bad |= out && fclose(out) != 0;
    return bad ? -1 : 0;
}

/* A shard's header: its 8-byte little-endian length, then that much JSON. */
static enum splash_status copy_safetensors_header(const struct splash_hub_env *env,
                                                  const struct splash_hub_file *f,
                                                  const char *source, const char *url,
                                                  const char *out_path, struct splash_err *err)
{
    unsigned char head[8];
    size_t got = 0;
    enum splash_status st = read_prefix(env, source, url, head, sizeof head, &got, err);
    if (!st && got < 8)
        st = splash_err_set(err, SPLASH_ERR_INVALID, "shorter than 8 bytes");
    uint64_t len = 0;
    for (int i = 7; !st && i >= 0; i--)
        len = len << 8 | head[i];
    if (!st && (len == 0 || len > (100u << 20) || 8 + len > f->size))
        st = splash_err_set(err, SPLASH_ERR_INVALID, "a header of %llu bytes",
                            (unsigned long long)len);
    unsigned char *buf = st ? NULL : malloc(8 + (size_t)len);
    if (!st && !buf)
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    if (!st && !(st = read_prefix(env, source, url, buf, 8 + (size_t)len, &got, err)) &&
        got != 8 + len)
        st = splash_err_set(err, SPLASH_ERR_INVALID, "its header ends early");
    if (!st && write_file(out_path, buf, (size_t)got))
        st = splash_err_set(err, SPLASH_ERR_IO, "%.200s: cannot write it", out_path);
    free(buf);
    if (st) {
        struct splash_err inner = *err;
        splash_err_set(err, st, "%.100s: reading its header: %s", f->path, inner.msg);
    }
    return st;
}

enum splash_status splash_hub_check_safetensors_headers(const struct splash_hub_env *env,
                                                        const struct splash_registry *registry,
                                                        const struct splash_hub_file *const *files,
                                                        const char *const *sources,
                                                        const char *const *urls, size_t n,
                                                        const char *work_dir,
                                                        struct splash_hub_verdict *verdict,
                                                        struct splash_err *err)
{
    memset(verdict, 0, sizeof *verdict);
    for (size_t i = 0; i < n; i++) {
        char out[PATH_MAX];
        const char *name = base_name(files[i]->path);
        size_t len = strlen(name);
        snprintf(out, sizeof out, "%.3800s/%s", work_dir, name);
        enum splash_status st;
        if (len > 12 && !strcmp(name + len - 12, ".safetensors")) {
            st = copy_safetensors_header(env, files[i], sources[i], urls[i], out, err);
        } else if (!strcmp(name, "config.json") || !strcmp(name, "model.safetensors.index.json")) {
            if (!sources[i] || symlink(sources[i], out))
                return splash_err_set(err, SPLASH_ERR_IO, "%.100s: cannot read it", name);
            st = SPLASH_OK;
        } else {
            continue;
        }
        if (st)
            return st;
    }
    return check(registry, work_dir, verdict, err);
}

enum splash_status splash_hub_check_gguf_headers(const struct splash_hub_env *env,
                                                 const struct splash_registry *registry,
                                                 const struct splash_hub_file *const *files,
                                                 const char *const *sources,
                                                 const char *const *urls, size_t n,
                                                 const char *work_dir,
                                                 struct splash_hub_verdict *verdict,
                                                 struct splash_err *err)
{
    char first[PATH_MAX] = "";
    memset(verdict, 0, sizeof *verdict);
    for (size_t i = 0; i < n; i++) {
        const char *slash = strrchr(files[i]->path, '/');
        char out[PATH_MAX];
        snprintf(out, sizeof out, "%.3800s/%s", work_dir, slash ? slash + 1 : files[i]->path);
        if (!i)
            snprintf(first, sizeof first, "%s", out);
        enum splash_status st =
            splash_hub_copy_gguf_header(env, files[i], sources[i], urls[i], out, err);
        if (st)
            return st;
    }
    return check(registry, first, verdict, err);
}
