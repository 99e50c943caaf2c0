/* Status codes and the caller-owned error buffer shared by the core and plugins. */
#ifndef SPLASH_STATUS_H
#define SPLASH_STATUS_H

#include <stdarg.h>
#include <stdio.h>

enum splash_status {
    SPLASH_OK = 0,
    SPLASH_ERR_INVALID = 1,     /* malformed input: file, JSON, request */
    SPLASH_ERR_UNSUPPORTED = 2, /* well-formed but not something we serve */
    SPLASH_ERR_IO = 3,          /* open/read/mmap failed */
    SPLASH_ERR_NOMEM = 4,       /* allocation or capacity exhausted */
    SPLASH_ERR_NOT_FOUND = 5,   /* a key, tensor, file or plugin is missing */
    SPLASH_ERR_ABI = 6,         /* a plugin speaks another ABI */
    SPLASH_ERR_INTERNAL = 7,
};

/* Filled by the callee; its text names the file, tensor or field at fault. */
struct splash_err {
    char msg[256];
};

/* Formats into err (if non-NULL) and returns status, so call sites read
 * `return splash_err_set(err, SPLASH_ERR_INVALID, "%s: ...", path);`. */
static inline enum splash_status splash_err_set(struct splash_err *err, enum splash_status status,
                                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline enum splash_status splash_err_set(struct splash_err *err, enum splash_status status,
                                                const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

#endif
