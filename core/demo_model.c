/* The demonstration model: built once into the data directory. */
#include "core/demo_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/model_writer.h"
#include "core/registry.h"

#define DEMO_SHAPE "qwen35-demo"
#define DEMO_MIX "Q4_K_M"
#define DEMO_SEED 20240101u

/* mkdir -p for an absolute path. */
static enum splash_status make_dirs(const char *path, struct splash_err *err)
{
    char buf[4096];
    int len = snprintf(buf, sizeof buf, "%s", path);
    if (len < 0 || (size_t)len >= sizeof buf)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char saved = *p;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return splash_err_set(err, SPLASH_ERR_IO, "%s: %s", buf, strerror(errno));
        *p = saved;
        if (!saved)
            break;
    }
    return SPLASH_OK;
}

enum splash_status splash_demo_model_path(char *out, size_t size, struct splash_err *err)
{
    char dir[4096];
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    int len;
    if (xdg && xdg[0] == '/')
        len = snprintf(dir, sizeof dir, "%s/splash/demo", xdg);
    else if (home && home[0] == '/')
        len = snprintf(dir, sizeof dir, "%s/.local/share/splash/demo", home);
    else
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "demo model: neither XDG_DATA_HOME nor HOME names a directory");
    if (len < 0 || (size_t)len >= sizeof dir)
        return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: data directory path too long");
    len = snprintf(out, size, "%s/%s-%s.gguf", dir, DEMO_SHAPE, DEMO_MIX);
    if (len < 0 || (size_t)len >= size)
        return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: path too long");
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
        return SPLASH_OK;
    enum splash_status st = make_dirs(dir, err);
    if (st)
        return st;
    const struct splash_model_shape *shape = splash_model_shape_find(DEMO_SHAPE);
    struct splash_model_write_opts opts = {.mix = DEMO_MIX, .seed = DEMO_SEED,
                                           .general_name = "splash-demo"};
    if ((st = splash_model_write(splash_registry_global(), shape, &opts, out, NULL, err)))
        return st;
    return SPLASH_OK;
}
