/* Defaults for the family ABI 1.2 prefix-caching members (core/family_cache.h). */
#include "core/family_cache.h"

int splash_family_can_fork(const struct splash_family_plugin *f)
{
    return f->seq_fork != NULL;
}

enum splash_status splash_family_seq_fork(const struct splash_family_plugin *f, void *model,
                                          const void *src, int32_t n_tokens, void **dst,
                                          struct splash_err *err)
{
    if (!f->seq_fork)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.2: sequences cannot be forked",
                              f->header.name);
    return f->seq_fork(model, src, n_tokens, dst, err);
}

uint64_t splash_family_cache_bytes(const struct splash_family_plugin *f, const void *model,
                                   uint64_t counted)
{
    return f->cache_bytes ? f->cache_bytes(model) : counted;
}
