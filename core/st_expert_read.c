/* One streamed expert of an imported MLX checkpoint (core/st_target.h): its slices of the
 * stacked planes read from their shards and imported as the whole import would lay them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/st_target.h"
#include "splash/format.h"

/* bytes of path at off into buf; 0, an errno, or -1 when the file ends before them. */
static int read_at(const char *path, uint64_t off, size_t bytes, void *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    size_t got = 0;
    int e = 0;
    while (got < bytes) {
        ssize_t r = pread(fd, (char *)buf + got, bytes - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            e = r < 0 ? errno : -1;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    return e;
}

enum splash_status splash_st_expert_import(const struct splash_expert_planes *p,
                                           const void *const *planes, void *dst,
                                           struct splash_err *err)
{
    if (!p->format || !p->format->import_planes || p->n_planes < 2)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: no format imports its planes",
                              p->name[0] ? p->name[0] : "?");
    struct splash_planes pl = {
        .rows = p->rows,
        .cols = p->cols,
        .codes = planes[0],
        .codes_dtype = p->dtype[0],
        .scales = planes[1],
        .scales_dtype = p->dtype[1],
        .biases = p->n_planes > 2 ? planes[2] : NULL,
        .biases_dtype = p->n_planes > 2 ? p->dtype[2] : 0,
        .global_scale = p->global_scale,
    };
    struct splash_err why = {{0}}; /* not err itself: the message is printed into it */
    enum splash_status st = p->format->import_planes(&pl, dst, &why);
    if (st)
        return splash_err_set(err, st, "%s: %s", p->name[0], why.msg);
    return SPLASH_OK;
}

enum splash_status splash_st_expert_read(const struct splash_expert_planes *p, int64_t e, void *dst,
                                         struct splash_err *err)
{
    if (e < 0 || e >= p->experts)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: expert %lld of %lld", p->name[0],
                              (long long)e, (long long)p->experts);
    void *buf[3] = {NULL, NULL, NULL};
    enum splash_status st = SPLASH_OK;
    for (int i = 0; i < p->n_planes && !st; i++) {
        if (!(buf[i] = malloc(p->expert_bytes[i] ? p->expert_bytes[i] : 1))) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
            break;
        }
        uint64_t off = p->off[i] + (uint64_t)e * p->expert_bytes[i];
        int error = read_at(p->path[i], off, p->expert_bytes[i], buf[i]);
        if (error)
            st = splash_err_set(err, SPLASH_ERR_IO, "%s: reading %s of expert %lld at %llu: %s",
                                p->path[i], p->name[i], (long long)e, (unsigned long long)off,
                                error < 0 ? "the file ends before it (cut short or rewritten)"
                                          : strerror(error));
    }
    if (!st) {
        const void *planes[3] = {buf[0], buf[1], buf[2]};
        struct splash_err why = {{0}};
        if ((st = splash_st_expert_import(p, planes, dst, &why)))
            st = splash_err_set(err, st, "expert %lld: %s", (long long)e, why.msg);
    }
    for (int i = 0; i < 3; i++)
        free(buf[i]);
    return st;
}
