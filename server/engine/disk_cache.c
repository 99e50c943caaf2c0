/* The prefix cache's SSD tier (server/engine/disk_cache.h): its open and close, finding
 * a point by its tokens, and the small getters. The rest lives beside it, one purpose a
 * file: disk_cache_index.c (the persistent index), disk_cache_probation.c, disk_cache_io.c
 * (the I/O thread and its queue), disk_cache_write.c and disk_cache_read.c (a point's
 * bytes out and back, checked), disk_cache_room.c (quota, eviction, write budget),
 * disk_cache_put_sync.c (the waiting puts), disk_cache_status.c (stats and /status). */
#include "server/engine/disk_cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/host_impl.h"
#include "server/engine/cache_namespace.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define AUTO_CAP (32ull << 30)  /* auto never takes more */
#define AUTO_LEAST (64ull << 20) /* an auto quota smaller than this leaves the tier off */

/* auto: a quarter of what the volume has beyond its floor (10 GiB, or 5% of a volume
 * under 200 GiB), at most 32 GiB. 0 with the reason where that leaves nothing. */
static uint64_t auto_quota(const char *dir, char *why, size_t why_size)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0) {
        snprintf(why, why_size, "%s: %s", dir, strerror(errno));
        return 0;
    }
    double total = (double)v.f_blocks * (double)v.f_frsize;
    double avail = (double)v.f_bavail * (double)v.f_frsize;
    double floor_ = total < 200.0 * GIB ? 0.05 * total : 10.0 * GIB;
    double q = (avail - floor_) / 4.0;
    if (q > (double)AUTO_CAP)
        q = (double)AUTO_CAP;
    if (q < (double)AUTO_LEAST) {
        snprintf(why, why_size,
                 "auto: the volume of %s has %.1f GiB free, too little beyond its floor of %.1f GiB",
                 dir, avail / GIB, floor_ / GIB);
        return 0;
    }
    return (uint64_t)q;
}

/* An unlinked file in dir (named splash-cache-pages-* or -states-* for the moment it has
 * a name where O_TMPFILE is refused): its space returns when the engine exits. */
static int open_file(const char *dir, const char *what)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    char path[600];
    snprintf(path, sizeof path, "%s/splash-cache-%s-XXXXXX", dir, what);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* The entry whose id is id, or NULL. */
struct entry *disk_cache_by_id(struct splash_disk_cache *d, uint64_t id)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].id == id)
            return &d->e[i];
    return NULL;
}

/* 1 when x can be read: written, not doomed, each page of its chain written. */
int disk_cache_readable(const struct splash_disk_cache *d, const struct entry *x)
{
    if (x->pending || x->doomed)
        return 0;
    for (int64_t i = 0; i < x->n_pages; i++)
        if (d->pg.pg[x->chain[i]].state != DISK_PAGE_OK)
            return 0;
    return 1;
}

enum splash_status splash_disk_cache_open(const struct splash_disk_opts *o,
                                          struct splash_disk_cache **out, char *why,
                                          size_t why_size)
{
    *out = NULL;
    const char *dir = o->dir && *o->dir ? o->dir : getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    if (o->persist_dir)
        dir = o->persist_dir; /* its volume sets an automatic quota */
    if (o->quota == 0) {
        snprintf(why, why_size, "--max-cache-disk 0");
        return SPLASH_OK;
    }
    if (o->page_bytes && o->page_tokens <= 0) {
        snprintf(why, why_size, "pages of %llu bytes hold %d tokens",
                 (unsigned long long)o->page_bytes, o->page_tokens);
        return SPLASH_OK;
    }
    uint64_t quota = o->quota > 0 ? (uint64_t)o->quota : auto_quota(dir, why, why_size);
    if (!quota)
        return SPLASH_OK;
    struct splash_disk_cache *d = calloc(1, sizeof *d);
    if (!d)
        return SPLASH_ERR_NOMEM;
    if (o->persist_dir) {
        char path[600];
        snprintf(path, sizeof path, "%s/states", o->persist_dir);
        d->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        snprintf(path, sizeof path, "%s/pages", o->persist_dir);
        d->pages_fd = d->fd < 0 ? -1 : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        snprintf(d->persist, sizeof d->persist, "%s", o->persist_dir);
    } else {
        d->fd = open_file(dir, "states");
        d->pages_fd = d->fd < 0 ? -1 : open_file(dir, "pages");
    }
    if (d->fd < 0 || d->pages_fd < 0) {
        snprintf(why, why_size, "no file in %s: %s", dir, strerror(errno));
        if (d->fd >= 0)
            close(d->fd);
        free(d);
        return SPLASH_OK;
    }
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->quota = quota;
    disk_pages_init(&d->pg, o->page_bytes ? o->page_tokens : 0, o->page_bytes,
                    sizeof(struct page_record));
    d->per_day = o->writes_per_day;
    d->bucket = (double)d->per_day / 4.0;
    d->bucket_at = mono_now();
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->idle, NULL);
    /* tests only: ms each piece written takes, and a read ten times that */
    const char *slow = getenv("SPLASH_TEST_SLOW_DISK_WRITES");
    if (slow && *slow)
        d->slow_piece = strtod(slow, NULL) / 1000.0;
    if (d->persist[0]) {
        disk_cache_probation_start(d);
        disk_cache_take_back(d);
        /* the root holds this cache and the others nobody holds within one quota */
        d->others = splash_cache_namespace_trim_others(
            d->persist, d->quota > used_bytes(d) ? d->quota - used_bytes(d) : 0);
    }
    if (pthread_create(&d->io, NULL, disk_cache_io_main, d) != 0) {
        snprintf(why, why_size, "no I/O thread: %s", strerror(errno));
        splash_disk_cache_close(d);
        return SPLASH_OK;
    }
    d->io_started = 1;
    *out = d;
    return SPLASH_OK;
}

void splash_disk_cache_close(struct splash_disk_cache *d)
{
    if (!d)
        return;
    if (d->io_started) { /* what is queued gives up; the write under way stops at a piece */
        atomic_store(&d->cancel, 1);
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->io, NULL);
        splash_disk_cache_reap(d);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->idle);
    for (size_t i = 0; i < d->n; i++) {
        free(d->e[i].tokens);
        free(d->e[i].chain);
    }
    free(d->e);
    disk_pages_free(&d->pg);
    close(d->fd);
    close(d->pages_fd);
    free(d);
}

/* The entry at tokens[0..n) that can be read, or (with pending) any not doomed. */
struct entry *disk_cache_find_any(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                  int pending)
{
    for (size_t i = 0; i < d->n; i++) {
        struct entry *x = &d->e[i];
        /* (a doomed point may stay beside its new copy until its read ends) */
        if (x->n == n && !x->doomed && !memcmp(x->tokens, tokens, (size_t)n * sizeof *tokens))
            return pending || disk_cache_readable(d, x) ? x : NULL;
    }
    return NULL;
}

struct entry *disk_cache_find(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    return disk_cache_find_any(d, tokens, n, 0);
}

int splash_disk_cache_has(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct entry *x = disk_cache_find_any(d, tokens, n, 1);
    if (x)
        x->used = ++d->clock;
    pthread_mutex_unlock(&d->mu);
    return x != NULL;
}

int32_t splash_disk_cache_peek(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int (*accept)(void *ctx, int32_t len), void *ctx)
{
    int32_t best = 0;
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->n; i++) {
        const struct entry *x = &d->e[i];
        if (x->n > best && x->n <= n && disk_cache_readable(d, x) &&
            (!accept || accept(ctx, x->n)) &&
            !memcmp(x->tokens, tokens, (size_t)x->n * sizeof *tokens))
            best = x->n;
    }
    pthread_mutex_unlock(&d->mu);
    return best;
}

int splash_disk_cache_persistent(const struct splash_disk_cache *d)
{
    return d->persist[0] != 0;
}

const char *splash_disk_cache_dir(const struct splash_disk_cache *d)
{
    return d->dir;
}

int splash_disk_cache_fd(const struct splash_disk_cache *d)
{
    return d ? d->fd : -1;
}

int splash_disk_cache_pages_fd(const struct splash_disk_cache *d)
{
    return d ? d->pages_fd : -1;
}

int64_t splash_disk_cache_offset(const struct splash_disk_cache *d, const int32_t *tokens,
                                 int32_t n)
{
    if (!d)
        return -1;
    struct splash_disk_cache *m = (struct splash_disk_cache *)d;
    pthread_mutex_lock(&m->mu);
    struct entry *x = disk_cache_find(m, tokens, n);
    int64_t off = x ? (int64_t)x->off : -1;
    pthread_mutex_unlock(&m->mu);
    return off;
}

int64_t splash_disk_cache_page_offset(const struct splash_disk_cache *d, const int32_t *tokens,
                                      int32_t n, int64_t page)
{
    if (!d)
        return -1;
    struct splash_disk_cache *m = (struct splash_disk_cache *)d;
    pthread_mutex_lock(&m->mu);
    struct entry *x = disk_cache_find(m, tokens, n);
    int64_t off = x && page >= 0 && page < x->n_pages ? (int64_t)slot_at(m, x->chain[page]) : -1;
    pthread_mutex_unlock(&m->mu);
    return off;
}
