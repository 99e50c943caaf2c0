/* The demonstration model: the trained story model shipped beside the binary. */
#include "cli/modelgen/demo_model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where a binary in dir looks, in order: an installed prefix, then the source tree
 * the uninstalled build/ binary sits in. */
static const char *const demo_dirs[] = {"../share/splash/demo", "../packaging/demo"};

enum splash_status splash_demo_model_find(const char *exe, char *out, size_t size,
                                          struct splash_err *err)
{
    const char *slash = strrchr(exe, '/');
    if (!slash)
        return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: %s is not a path", exe);
    int dir_len = (int)(slash - exe);
    char tried[2][PATH_MAX];
    for (size_t i = 0; i < sizeof demo_dirs / sizeof demo_dirs[0]; i++) {
        int len = snprintf(tried[i], sizeof tried[i], "%.*s/%s/%s", dir_len, exe, demo_dirs[i],
                           SPLASH_DEMO_MODEL_FILE);
        if (len < 0 || (size_t)len >= sizeof tried[i])
            return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: path too long");
        struct stat sb;
        char real[PATH_MAX];
        if (stat(tried[i], &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
            realpath(tried[i], real)) {
            size_t n = strlen(real);
            if (n >= size)
                return splash_err_set(err, SPLASH_ERR_INVALID, "demo model: path too long");
            memcpy(out, real, n + 1);
            return SPLASH_OK;
        }
    }
    return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                          "the demo model is not installed: neither %s nor %s exists "
                          "(`make install` puts it under share/splash/demo)",
                          tried[0], tried[1]);
}

enum splash_status splash_demo_model_path(char *out, size_t size, struct splash_err *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return splash_err_set(err, SPLASH_ERR_IO, "demo model: cannot read /proc/self/exe");
    exe[n] = 0;
    return splash_demo_model_find(exe, out, size, err);
}
