/* The plugin search path, decided by where the executable runs from. */
#include "core/plugin_search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

int splash_exe_path(char *out, size_t size)
{
#ifdef __APPLE__
    char raw[PATH_MAX];
    uint32_t n = sizeof raw;
    if (_NSGetExecutablePath(raw, &n) != 0 || !realpath(raw, out))
        return -1;
    (void)size;
    return 0;
#else
    ssize_t len = readlink("/proc/self/exe", out, size - 1);
    if (len <= 0)
        return -1;
    out[len] = 0;
    return 0;
#endif
}

static size_t add_dir(char (*dirs)[PATH_MAX], size_t n, size_t max, const char *dir)
{
    if (!dir || !*dir || n >= max)
        return n;
    snprintf(dirs[n], PATH_MAX, "%s", dir);
    return n + 1;
}

size_t splash_plugin_search_dirs(const char *exe, const char *const *extra, size_t n_extra,
                                 const char *env_path, char (*dirs)[PATH_MAX], size_t max)
{
    size_t n = 0;
    for (size_t i = 0; extra && i < n_extra; i++)
        n = add_dir(dirs, n, max, extra[i]);
    if (env_path) {
        char *copy = strdup(env_path);
        char *save = NULL;
        for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save))
            n = add_dir(dirs, n, max, dir);
        free(copy);
    }
    const char *slash = exe ? strrchr(exe, '/') : NULL;
    if (!slash)
        return n;
    int dir_len = (int)(slash - exe);
    char mark[PATH_MAX + 32];
    snprintf(mark, sizeof mark, "%.*s/" SPLASH_BUILD_TREE_MARK, dir_len, exe);
    struct stat st;
    int build_tree = stat(mark, &st) == 0 && S_ISREG(st.st_mode);
    if (n >= max)
        return n;
    /* build/splash beside build/lib, or bin/splash beside lib/ */
    int len = snprintf(dirs[n], PATH_MAX, "%.*s/%s", dir_len, exe,
                       build_tree ? "lib/splash" : "../lib/splash");
    return len > 0 && len < PATH_MAX ? n + 1 : n;
}

int splash_path_world_writable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && (st.st_mode & S_IWOTH);
}
