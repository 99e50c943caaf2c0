/* Aligned allocation for kernels and plugins. */
#include <stdlib.h>

#include "core/host_impl.h"

void *splash_alloc_aligned(size_t align, size_t size)
{
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    return p;
}

void splash_free_aligned(void *p)
{
    free(p);
}

