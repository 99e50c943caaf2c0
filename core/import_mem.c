#include "core/import_mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct region {
    uintptr_t begin;
    size_t size;    /* bytes asked for */
    size_t mapped;  /* whole pages */
    int handed_over;
    int dropped;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static size_t n_regions, cap_regions;

static size_t page_round(size_t n)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

void *splash_import_alloc(size_t size)
{
    const size_t mapped = page_round(size ? size : 1);
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    pthread_mutex_lock(&lock);
    if (n_regions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 64;
        struct region *grown = realloc(regions, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&lock);
            munmap(p, mapped);
            return NULL;
        }
        regions = grown;
        cap_regions = cap;
    }
    regions[n_regions++] = (struct region){(uintptr_t)p, size, mapped, 0, 0};
    pthread_mutex_unlock(&lock);
    return p;
}

void splash_import_free(void *p)
{
    if (!p)
        return;
    size_t mapped = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_regions; i++)
        if (regions[i].begin == (uintptr_t)p) {
            mapped = regions[i].mapped;
            regions[i] = regions[--n_regions];
            break;
        }
    pthread_mutex_unlock(&lock);
    if (mapped)
        munmap(p, mapped);
}

void splash_import_hand_over(const void *p)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_regions; i++)
        if (regions[i].begin == (uintptr_t)p) {
            regions[i].handed_over = 1;
            break;
        }
    pthread_mutex_unlock(&lock);
}

size_t splash_import_drop(const void *p, size_t n)
{
    size_t dropped = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_regions; i++) {
        struct region *r = &regions[i];
        if (r->begin != (uintptr_t)p)
            continue;
        /* the range stays reserved (no other region can take its address, which the
         * kernels compare to share an image) but holds no pages and reads nothing */
        if (r->handed_over && !r->dropped && n >= r->size && madvise((void *)r->begin, r->mapped, MADV_DONTNEED) == 0 &&
            mprotect((void *)r->begin, r->mapped, PROT_NONE) == 0) {
            r->dropped = 1;
            dropped = r->mapped;
        }
        break;
    }
    pthread_mutex_unlock(&lock);
    return dropped;
}

int splash_import_dropped(const void *p, size_t n)
{
    uintptr_t b = (uintptr_t)p, e = b + n;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_regions && !found; i++)
        found = regions[i].dropped && b >= regions[i].begin &&
                e <= regions[i].begin + regions[i].mapped && e >= b;
    pthread_mutex_unlock(&lock);
    return found;
}

size_t splash_import_held(void)
{
    size_t held = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_regions; i++)
        if (!regions[i].dropped)
            held += regions[i].mapped;
    pthread_mutex_unlock(&lock);
    return held;
}
