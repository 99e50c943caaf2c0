/* A grow-only scratch buffer, 64-byte aligned, that a family's step reuses from call to
 * call. Family-neutral (the hybrid trunk, gpt_oss and flint hold their arenas in them);
 * names are prefixed step_buffer_ because the static plugin archive links every plugin
 * together. */
#ifndef SPLASH_FAMILIES_STEP_BUFFER_H
#define SPLASH_FAMILIES_STEP_BUFFER_H

#include <stddef.h>

#include "splash/host.h"

struct step_buffer {
    void *p;
    size_t size;
};

/* b's memory, grown to at least bytes (its contents then lost); NULL when out of memory
 * (b then empty). */
void *step_buffer_get(const struct splash_host *host, struct step_buffer *b, size_t bytes);

#endif
