/* The prefix-caching members of a family plugin (family ABI 1.2) with their defaults
 * for plugins built before them: no fork (every prompt is prefilled whole) and the
 * cache's bytes counted from the sequences' lengths. */
#ifndef SPLASH_CORE_FAMILY_CACHE_H
#define SPLASH_CORE_FAMILY_CACHE_H

#include <stdint.h>

#include "splash/family.h"

/* 1 when the family forks sequences (its KV pages shared copy-on-write). */
int splash_family_can_fork(const struct splash_family_plugin *f);

/* family.h seq_fork; SPLASH_ERR_UNSUPPORTED naming the plugin where it predates ABI 1.2. */
enum splash_status splash_family_seq_fork(const struct splash_family_plugin *f, void *model,
                                          const void *src, int32_t n_tokens, void **dst,
                                          struct splash_err *err);

/* family.h cache_bytes, or where the plugin predates it `counted`, the caller's own
 * count of its sequences' bytes. */
uint64_t splash_family_cache_bytes(const struct splash_family_plugin *f, const void *model,
                                   uint64_t counted);

#endif
