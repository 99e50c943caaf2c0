/* The SSD tier's file primitives (server/engine/disk_cache_internal.h): whole reads and
 * writes at an offset through short counts and EINTR, and holes punched where a page or
 * state let go so the volume gets its space back. */
#include "server/engine/disk_cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* The file's space at [off, off + len) returns to the volume (the quota counts what the
 * files hold, not their extent); where the volume cannot, it stays until reused. */
void disk_cache_punch(int fd, uint64_t off, uint64_t len)
{
    if (len)
        (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
}

int disk_cache_write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

int disk_cache_read_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}
