/* Frame I/O for the engine protocol. */
#include "server/engine/protocol.h"

#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct frame_header {
    uint16_t magic;
    uint16_t type;
    uint32_t len;
    uint64_t id;
};
_Static_assert(sizeof(struct frame_header) == 16, "frame header is 16 bytes");

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes everything, waiting for room at most timeout_ms in all (< 0: forever);
 * works on blocking and non-blocking descriptors. -1 with errno ETIMEDOUT when the
 * reader left the frame unread that long. */
static int write_all(int fd, const void *buf, size_t n, int timeout_ms)
{
    const char *p = buf;
    int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int wait = -1;
            if (deadline >= 0) {
                int64_t left = deadline - now_ms();
                if (left <= 0) {
                    errno = ETIMEDOUT;
                    return -1;
                }
                wait = (int)left;
            }
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, wait) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 1: whole buffer read; 0: clean end of stream before any byte; -1: error. */
static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* a non-blocking descriptor mid-frame: the rest is on its way */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            poll(&pfd, 1, 1000);
            continue;
        }
        if (r == 0)
            return got == 0 ? 0 : -1;
        if (r < 0)
            return -1;
        got += (size_t)r;
    }
    return 1;
}

enum splash_status splash_frame_write(int fd, uint32_t type, uint64_t id, const json_t *body,
                                      struct splash_err *err)
{
    return splash_frame_write_timeout(fd, type, id, body, -1, err);
}

enum splash_status splash_frame_write_timeout(int fd, uint32_t type, uint64_t id,
                                              const json_t *body, int timeout_ms,
                                              struct splash_err *err)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
    if (!text)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "engine protocol: out of memory");
    size_t len = strlen(text);
    if (len > SPLASH_FRAME_MAX) {
        free(text);
        return splash_err_set(err, SPLASH_ERR_INVALID, "engine protocol: frame of %zu bytes", len);
    }
    struct frame_header h = {.magic = SPLASH_FRAME_MAGIC, .type = (uint16_t)type,
                             .len = (uint32_t)len, .id = id};
    /* one buffer, one write: frames from different threads never interleave
     * as long as each write() of a socketpair is atomic, which holds up to the socket buffer */
    char *buf = malloc(sizeof h + len);
    if (!buf) {
        free(text);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "engine protocol: out of memory");
    }
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, text, len);
    free(text);
    int rc = write_all(fd, buf, sizeof h + len, timeout_ms);
    int saved = errno;
    free(buf);
    if (rc && saved == ETIMEDOUT)
        return splash_err_set(err, SPLASH_ERR_IO, "engine protocol: frame unread for %d ms",
                              timeout_ms);
    if (rc)
        return splash_err_set(err, SPLASH_ERR_IO, "engine protocol: write: %s", strerror(saved));
    return SPLASH_OK;
}

enum splash_status splash_frame_read(int fd, struct splash_frame *out, struct splash_err *err)
{
    struct frame_header h;
    int rc = read_all(fd, &h, sizeof h);
    if (rc == 0)
        return splash_err_set(err, SPLASH_ERR_IO, "engine protocol: closed");
    if (rc < 0)
        return splash_err_set(err, SPLASH_ERR_IO, "engine protocol: read: %s",
                              errno ? strerror(errno) : "short frame");
    if (h.magic != SPLASH_FRAME_MAGIC || h.len > SPLASH_FRAME_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "engine protocol: bad frame header");
    char *text = malloc((size_t)h.len + 1);
    if (!text)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "engine protocol: out of memory");
    if (h.len && read_all(fd, text, h.len) != 1) {
        free(text);
        return splash_err_set(err, SPLASH_ERR_IO, "engine protocol: short frame");
    }
    text[h.len] = 0;
    json_error_t jerr;
    json_t *body = json_loadb(text, h.len, 0, &jerr);
    free(text);
    if (!body)
        return splash_err_set(err, SPLASH_ERR_INVALID, "engine protocol: bad JSON: %s", jerr.text);
    out->type = h.type;
    out->id = h.id;
    out->body = body;
    return SPLASH_OK;
}

void splash_frame_free(struct splash_frame *f)
{
    if (f->body)
        json_decref(f->body);
    f->body = NULL;
}
