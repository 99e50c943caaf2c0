/* XDG base directories for Splash's files. */
#include "core/paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum splash_status splash_make_dirs(const char *path, unsigned mode, struct splash_err *err)
{
    char buf[4096];
    int len = snprintf(buf, sizeof buf, "%s", path);
    if (len < 0 || (size_t)len >= sizeof buf)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", path);
    if (buf[0] != '/')
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not an absolute path", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char saved = *p;
        *p = 0;
        if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
            return splash_err_set(err, SPLASH_ERR_IO, "%s: %s", buf, strerror(errno));
        *p = saved;
        if (!saved)
            break;
    }
    return SPLASH_OK;
}

enum splash_status splash_dir_path(enum splash_dir_kind kind, const char *sub, int create,
                                   char *out, size_t size, struct splash_err *err)
{
    static const struct {
        const char *variable, *fallback;
    } bases[] = {
        [SPLASH_DIR_DATA] = {"XDG_DATA_HOME", ".local/share"},
        [SPLASH_DIR_CACHE] = {"XDG_CACHE_HOME", ".cache"},
        [SPLASH_DIR_STATE] = {"XDG_STATE_HOME", ".local/state"},
    };
    const char *xdg = getenv(bases[kind].variable);
    const char *home = getenv("HOME");
    int len;
    /* The XDG spec: a relative value is invalid and must be ignored. */
    if (xdg && xdg[0] == '/')
        len = snprintf(out, size, "%s/splash", xdg);
    else if (home && home[0] == '/')
        len = snprintf(out, size, "%s/%s/splash", home, bases[kind].fallback);
    else
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "neither %s nor HOME names an absolute directory",
                              bases[kind].variable);
    if (len >= 0 && (size_t)len < size && sub && sub[0])
        len += snprintf(out + len, size - (size_t)len, "/%s", sub);
    if (len < 0 || (size_t)len >= size)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", bases[kind].variable);
    return create ? splash_make_dirs(out, 0700, err) : SPLASH_OK;
}
