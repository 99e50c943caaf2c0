/* The SSD tier's probation (server.md "Persistent cache"): a start that follows two
 * failed ones begins with the namespace empty, so a cache that crashes the engine cannot
 * crash every start after it. */
#include "server/engine/disk_cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host_impl.h"

/* The probation rule (server.md "Persistent cache"): a start serves its first minute on
 * probation, recorded in the namespace's probation file (the starts in a row, this one
 * counted, that have not passed it). A start that finds two there (two starts in a row
 * failed within their minute, or one reported its own failure) begins empty. */
static void probation_path(const struct splash_disk_cache *d, char *path, size_t size)
{
    snprintf(path, size, "%s/probation", d->persist);
}

static void probation_write(const struct splash_disk_cache *d, int starts)
{
    char path[600], tmp[620], text[32];
    probation_path(d, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    int len = snprintf(text, sizeof text, "%d\n", starts);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    int ok = !disk_cache_write_all(fd, text, (size_t)len, 0) && !fdatasync(fd);
    close(fd);
    if (ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

void disk_cache_probation_start(struct splash_disk_cache *d)
{
    char path[600], text[32] = "";
    probation_path(d, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r = read(fd, text, sizeof text - 1);
        text[r > 0 ? r : 0] = 0;
        close(fd);
        long n = strtol(text, NULL, 10);
        d->failed_starts = n > 0 && n < 1000000 ? (int)n : 1; /* unreadable: one failed */
    }
    if (d->failed_starts >= 2) {
        char index[600];
        snprintf(index, sizeof index, "%s/index", d->persist);
        unlink(index);
        if (ftruncate(d->fd, 0) != 0 || ftruncate(d->pages_fd, 0) != 0)
            splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %s/states, pages: %s", d->persist,
                       strerror(errno));
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %s: the last %d starts failed on "
                   "probation (within their first minute, or by the engine's own failure): "
                   "the cache starts empty", d->persist, d->failed_starts);
        d->started_empty = 1;
        d->failed_starts = 0;
    }
    d->on_probation = 1;
    probation_write(d, d->failed_starts + 1);
}

void splash_disk_cache_probation_passed(struct splash_disk_cache *d)
{
    if (!d || !d->persist[0] || !d->on_probation)
        return;
    char path[600];
    probation_path(d, path, sizeof path);
    unlink(path);
    d->on_probation = 0;
}

void splash_disk_cache_failed(struct splash_disk_cache *d)
{
    if (!d || !d->persist[0])
        return;
    probation_write(d, 2);
    d->on_probation = 0;
}
