/* Where Splash keeps its files on Linux (PLATFORM.md: the XDG base directories). */
#ifndef SPLASH_CORE_PATHS_H
#define SPLASH_CORE_PATHS_H

#include <stddef.h>

#include "splash/status.h"

enum splash_dir_kind {
    SPLASH_DIR_DATA,  /* $XDG_DATA_HOME/splash  (~/.local/share/splash): models, runtime locks */
    SPLASH_DIR_CACHE, /* $XDG_CACHE_HOME/splash (~/.cache/splash): persistent prefix cache    */
    SPLASH_DIR_STATE, /* $XDG_STATE_HOME/splash (~/.local/state/splash): crash reports        */
};

/* Writes "<base>/splash[/<sub>]" into out; sub may be NULL or contain slashes. With
 * create, makes every missing directory of it (new ones mode 0700). Fails naming the
 * variable when neither the XDG variable nor HOME is an absolute path. */
enum splash_status splash_dir_path(enum splash_dir_kind kind, const char *sub, int create,
                                   char *out, size_t size, struct splash_err *err);

/* mkdir -p for an absolute path; new directories get mode. */
enum splash_status splash_make_dirs(const char *path, unsigned mode, struct splash_err *err);

#endif
