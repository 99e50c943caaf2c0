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
static enum splash_status copy_header(const struct splash_hub_env *env,
                                      const struct splash_hub_file *f, const char *source,
                                      const char *url, const char *out_path,
                                      struct splash_err *err)
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

enum splash_status splash_hub_check_gguf_headers(const struct splash_hub_env *env,
                                                 const struct splash_registry *registry,
                                                 const struct splash_hub_file *const *files,
                                                 const char *const *sources,
                                                 const char *const *urls, size_t n,
                                                 const char *work_dir, char *family,
                                                 size_t family_size, struct splash_err *err)
{
    char first[PATH_MAX] = "";
    family[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *slash = strrchr(files[i]->path, '/');
        char out[PATH_MAX];
        snprintf(out, sizeof out, "%.3800s/%s", work_dir, slash ? slash + 1 : files[i]->path);
        if (!i)
            snprintf(first, sizeof first, "%s", out);
        enum splash_status st = copy_header(env, files[i], sources[i], urls[i], out, err);
        if (st)
            return st;
    }
    struct splash_check_result res;
    struct splash_err cerr = {{0}};
    enum splash_status st = splash_model_check(registry, first, &res, &cerr);
    if (st) {
        const char *why = res.problems ? res.problems : cerr.msg;
        /* one line: model-check's first reason */
        char line[200];
        snprintf(line, sizeof line, "%s", why);
        line[strcspn(line, "\n")] = 0;
        splash_err_set(err, st, "model-check refused it before any weight download: %s", line);
    } else {
        snprintf(family, family_size, "%s", res.family);
    }
    splash_check_result_free(&res);
    return st;
}
