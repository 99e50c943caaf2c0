#include "core/file_map.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct range {
    uintptr_t begin, end;
    char *path; /* the file's, or NULL when the mapper did not name it */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range *ranges;
static size_t n_ranges, cap_ranges;

void *splash_file_map(int fd, size_t size)
{
    return splash_file_map_path(fd, size, NULL);
}

void *splash_file_map_path(int fd, size_t size, const char *path)
{
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return map;
    pthread_mutex_lock(&lock);
    if (n_ranges == cap_ranges) {
        size_t cap = cap_ranges ? 2 * cap_ranges : 16;
        struct range *grown = realloc(ranges, cap * sizeof *grown);
        if (grown) {
            ranges = grown;
            cap_ranges = cap;
        }
    }
    /* without room the mapping is simply not known: nothing is ever dropped from it */
    if (n_ranges < cap_ranges)
        ranges[n_ranges++] = (struct range){(uintptr_t)map, (uintptr_t)map + size,
                                            path ? strdup(path) : NULL};
    pthread_mutex_unlock(&lock);
    return map;
}

void splash_file_unmap(void *map, size_t size)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_ranges; i++)
        if (ranges[i].begin == (uintptr_t)map) {
            free(ranges[i].path);
            ranges[i] = ranges[--n_ranges];
            break;
        }
    pthread_mutex_unlock(&lock);
    munmap(map, size);
}

int splash_file_map_contains(const void *p, size_t n)
{
    uintptr_t b = (uintptr_t)p, e = b + n;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_ranges && !found; i++)
        found = b >= ranges[i].begin && e <= ranges[i].end && e >= b;
    pthread_mutex_unlock(&lock);
    return found;
}

size_t splash_file_map_drop(const void *p, size_t n)
{
    if (!splash_file_map_contains(p, n))
        return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(page - 1);
    if (e <= b || madvise((void *)b, e - b, MADV_DONTNEED) != 0)
        return 0;
    return e - b;
}

enum splash_status splash_file_map_locate(const void *p, size_t n, char *path, size_t path_size,
                                          uint64_t *offset)
{
    uintptr_t b = (uintptr_t)p, e = b + n;
    enum splash_status st = SPLASH_ERR_NOT_FOUND;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_ranges; i++)
        if (b >= ranges[i].begin && e <= ranges[i].end && e >= b && ranges[i].path) {
            snprintf(path, path_size, "%s", ranges[i].path);
            *offset = (uint64_t)(b - ranges[i].begin);
            st = SPLASH_OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return st;
}
