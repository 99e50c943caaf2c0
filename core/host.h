/* The host table every plugin receives: one per registry (core/registry.c). */
#ifndef SPLASH_CORE_HOST_H
#define SPLASH_CORE_HOST_H

#include "splash/host.h"

/* Format look-ups: the ABI 1.0 pair (no host) and the ABI 1.2 pair (the host names the
 * registry). */
struct splash_host_formats {
    const struct splash_format_type *(*by_gguf)(int32_t gguf_type);
    const struct splash_format_type *(*by_name)(const char *name);
    const struct splash_format_type *(*find_gguf)(const struct splash_host *h, int32_t gguf_type);
    const struct splash_format_type *(*find_name)(const struct splash_host *h, const char *name);
};

/* Fills h with the core's services, the compute layer's kernel tables and the given
 * format look-ups. */
void splash_host_init(struct splash_host *h, const struct splash_host_formats *formats);

#endif
