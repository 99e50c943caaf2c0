/* The persistent cache's place (server.md "Persistent cache"): <root>/<namespace>, mode
 * 0700, the namespace a digest of what makes a cached state valid — the model's files
 * (real path, size, modification time), the family and its ABI, the KV and state
 * formats, the context (which sets the YaRN factor) and the cache format — so no engine
 * reads another model's cache. One engine holds a namespace at a time (a lock file);
 * another waits, then uses a temporary file. */
#ifndef SPLASH_ENGINE_CACHE_NAMESPACE_H
#define SPLASH_ENGINE_CACHE_NAMESPACE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The cache format: a change of the record, index or saved-sequence layout bumps it. */
#define SPLASH_CACHE_FORMAT 2

/* Opens (creating) root/<namespace of model_path and layout> and locks it, waiting up to
 * wait_s seconds for another engine to let go. root NULL: $XDG_CACHE_HOME/splash/
 * prefix-cache. 0 with the directory in dir and the lock's descriptor in *lock_fd (held
 * until closed); -1 with the reason in why. */
int splash_cache_namespace_open(const char *root, const char *model_path, const char *layout,
                                double wait_s, char *dir, size_t dir_size, int *lock_fd,
                                char *why, size_t why_size);

/* Namespaces nobody has used for this long are removed at every start (server.md). */
#define SPLASH_CACHE_UNUSED_DAYS 14

/* Removes the namespaces under root (NULL: the default root; one that does not exist is
 * left so) that no engine holds and whose newest file is older than max_age_s seconds
 * before now. Only a directory named as a namespace, 32 hex digits, counts: nothing else
 * under root is touched. Returns how many went; *bytes gets their size. */
int splash_cache_namespace_sweep(const char *root, double max_age_s, time_t now,
                                 uint64_t *bytes);

/* The other namespaces beside ns_dir (under its parent, the root) that no engine holds
 * count against this cache's quota (server.md "Persistent cache"): removes them, the least
 * recently used first, while their bytes are more than `within`, and returns the bytes
 * of those left (`within` UINT64_MAX: only measures). Each removal logs a line. */
uint64_t splash_cache_namespace_trim_others(const char *ns_dir, uint64_t within);

#endif
