/* Where plugins are looked for. The binary's own location decides: an installed
 * binary searches <exe>/../lib/splash; the binary in a build tree (the Makefile leaves
 * SPLASH_BUILD_TREE_MARK beside it) searches that tree's lib/splash instead. No path
 * is compiled in, so a package built in one folder never reads that folder. */
#ifndef SPLASH_CORE_PLUGIN_SEARCH_H
#define SPLASH_CORE_PLUGIN_SEARCH_H

#include <limits.h>
#include <stddef.h>

#define SPLASH_BUILD_TREE_MARK ".splash-build-tree"

/* The running executable's absolute path, symlinks resolved; 0 on success. */
int splash_exe_path(char *out, size_t size);

/* Fills dirs with the search, in order: each of extra (may be NULL), each entry of
 * env_path (colon-separated, may be NULL), then <exe dir>/lib/splash when exe runs
 * from a build tree, else <exe dir>/../lib/splash (none when exe is NULL). Returns the
 * number of directories (at most max); empty entries are skipped. */
size_t splash_plugin_search_dirs(const char *exe, const char *const *extra, size_t n_extra,
                                 const char *env_path, char (*dirs)[PATH_MAX], size_t max);

/* 1 when path is a directory or file any user may write (mode o+w), where another
 * user could plant a plugin; such places are never loaded from. */
int splash_path_world_writable(const char *path);

#endif
