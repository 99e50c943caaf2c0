/* The host table handed to every plugin. */
#include "core/host_impl.h"

#include "core/meta.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "kernels/kernels_impl.h"

static const struct splash_format_type *host_format_by_gguf(int32_t gguf_type)
{
    return splash_registry_format_by_gguf(splash_registry_global(), gguf_type);
}

static const struct splash_format_type *host_format_by_name(const char *name)
{
    return splash_registry_format_by_name(splash_registry_global(), name);
}

static int host_pool_threads(const struct splash_pool *pool)
{
    return splash_pool_threads(pool);
}

static struct splash_host host = {
    .abi_major = SPLASH_ABI_MAJOR,
    .abi_minor = SPLASH_ABI_MINOR,
    .size = sizeof(struct splash_host),
    .log = splash_log,
    .alloc_aligned = splash_alloc_aligned,
    .free_aligned = splash_free_aligned,
    .cpu_features = splash_cpu_features,
    .parallel_for = splash_pool_parallel_for,
    .pool_threads = host_pool_threads,
    .format_by_gguf_type = host_format_by_gguf,
    .format_by_name = host_format_by_name,
};

const struct splash_host *splash_host_get(void)
{
    /* members that live in other translation units are filled on first use */
    if (!host.meta) {
        host.meta = splash_meta_api_get();
        host.kernels = splash_kernels_get();
    }
    return &host;
}
