/* A grow-only scratch buffer (step_buffer.h). */
#include "families/common/step_buffer.h"

void *step_buffer_get(const struct splash_host *host, struct step_buffer *b, size_t bytes)
{
    if (bytes > b->size) {
        host->free_aligned(b->p);
        b->p = host->alloc_aligned(64, bytes);
        b->size = b->p ? bytes : 0;
    }
    return b->p;
}
