/* Aligned allocation for kernels and plugins. */
#include <stdlib.h>
#include <sys/mman.h>

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

/* Big read-mostly buffers (repacked weight images) on 2 MiB pages where the kernel
 * allows it: a decode step streams every weight once, and with 4 KiB pages that is
 * one TLB miss per 4 KiB read. */
void *splash_alloc_large(size_t size)
{
    const size_t huge = (size_t)2 << 20;
    if (size < huge)
        return splash_alloc_aligned(64, size);
    void *p = splash_alloc_aligned(huge, size);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, (size + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
#endif
    return p;
}
