/* The host table every plugin receives: one per registry (core/registry.c). */
#ifndef SPLASH_CORE_HOST_H
#define SPLASH_CORE_HOST_H

#include "splash/host.h"

/* Fills h with the core's services, the compute layer's kernel table and the given
 * format look-ups. */
void splash_host_init(struct splash_host *h,
                      const struct splash_format_type *(*format_by_gguf)(int32_t gguf_type),
                      const struct splash_format_type *(*format_by_name)(const char *name));

#endif
