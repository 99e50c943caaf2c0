/* The prefix cache's SSD tier (server/engine/disk_cache.h). */
#include "server/engine/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/host_impl.h"
#include "server/engine/cache_namespace.h"
#include "server/engine/disk_pages.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define STATE_MAGIC "SPLSTAT2"
#define PAGE_MAGIC "SPLPAGE2"
#define AUTO_CAP (32ull << 30)  /* auto never takes more */
#define AUTO_LEAST (64ull << 20) /* an auto quota smaller than this leaves the tier off */

/* Before each state's tokens and bytes in the states file: what the index expects. */
struct state_record {
    char magic[8];
    int32_t n_tokens, n_pages;
    uint64_t size;
    uint32_t crc_tokens, crc_blob;
};

/* At the front of each slot of the pages file, before the page's tokens and bytes. */
struct page_record {
    char magic[8];
    uint64_t key;
    int64_t parent;
    uint32_t crc_tokens, crc_bytes;
};

/* A restore point: its chain of pages (slots of the pages file, page i holding tokens
 * [i * page_tokens, (i + 1) * page_tokens)) and its state record (the family's rest, or
 * its whole seq_save blob with an empty chain) in the states file. */
struct entry {
    int32_t *tokens;
    int32_t n;
    int cls;
    uint64_t off, span; /* its state record's place: record, tokens, bytes */
    uint64_t size;      /* the state's bytes */
    uint32_t crc_tokens, crc_blob;
    int64_t n_pages;
    int64_t *chain;     /* the slots of its pages */
    uint64_t used;      /* the tier's clock at its write or last read */
    uint64_t id;
    int pending;        /* its write is queued or under way: not read, not moved */
    int reading;        /* reads queued or under way: not given up for room */
    int doomed;         /* a page of its chain went bad while it was written or read:
                           dropped once that ends */
};

/* A page a job writes or reads, as the page table expects it. */
struct page_check {
    int64_t index; /* in the point's chain */
    int64_t slot, parent;
    uint64_t key;
    uint32_t crc_tokens, crc_bytes;
};

/* A write for the I/O thread (the new pages of a point's chain, then its state), or a
 * read of a point's pages and state, checked. */
struct job {
    struct job *next;
    int read;
    uint64_t id, off, size, span;
    uint32_t crc_tokens, crc_blob;
    int cls;
    struct page_check *pages; /* a write's new pages, or a read's whole chain */
    int64_t n_checks, n_pages;
    int64_t bad_page;         /* a read's: the chain's page found damaged, -1 none */
    uint64_t written;         /* a write's bytes on the disk */
    char *buf;                /* a read's pages then state, once checked */
    const char *fault;        /* a read's, NULL: as written */
    splash_disk_read_fn got;  /* a read's, on the engine's thread at a reap */
    int32_t *tokens;
    int32_t n;
    struct splash_disk_parts parts;
    splash_disk_done_fn done; /* on the engine's thread, at a reap */
    void *done_ctx;
    int ok;
    int expendable;           /* a copy ahead of need: given up when memory is short */
    _Atomic int cancel;
};

/* The persistent index: a header, the pages, then the points. */
#define INDEX_MAGIC "SPLIDX2"
struct index_header {
    char magic[8];
    uint64_t n_pages, n_points;
    uint64_t page_bytes;
    int32_t page_tokens;
    uint32_t crc; /* of the records that follow */
};
struct index_page {
    int64_t slot, parent;
    uint64_t key;
    uint32_t crc_tokens, crc_bytes;
};
struct index_point {
    int32_t n_tokens, cls;
    int64_t n_pages, tail; /* the chain's last slot (-1: none); parents lead back */
    uint64_t off, span, size;
    uint32_t crc_tokens, crc_blob;
};

struct splash_disk_cache {
    int fd;            /* the states file */
    int pages_fd;      /* the pages file */
    char dir[512];
    char persist[512]; /* the namespace directory, "" for temporary files */
    uint64_t quota;    /* both files */
    struct disk_pages pg;
    uint64_t states_bytes;
    struct entry *e;
    size_t n, cap;
    uint64_t clock;
    /* the write budget: a bucket of a quarter of a day's bytes, filled at the daily rate */
    uint64_t per_day;
    double bucket, bucket_at;
    struct splash_disk_stats st;
    /* the I/O thread: writes and the persistent index leave the engine's step thread */
    pthread_t io;
    int io_started;
    pthread_mutex_t mu;                /* everything above, and the queues */
    pthread_cond_t work, idle;
    struct job *queue, *queue_tail, *done;
    int busy, stop, index_dirty;
    _Atomic int cancel;                /* queued and running writes give up */
    _Atomic int stop_expendable;       /* the write under way gives up if expendable */
    int busy_expendable;
    uint64_t next_id;
    double slow_piece;                 /* test hook: seconds each piece's write takes */
    uint64_t others;                   /* persistent: the bytes of the other namespaces
                                          nobody holds, which count against the quota */
    int failed_starts;                 /* persistent: the starts before this one that failed
                                          on probation, in a row */
    int started_empty;                 /* and this start began empty for them */
    int on_probation;                  /* this start's first minute is not over */
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t used_bytes(const struct splash_disk_cache *d)
{
    return (uint64_t)d->pg.live * d->pg.slot_bytes + d->states_bytes;
}

static uint32_t crc_of(const void *bytes, size_t n)
{
    return (uint32_t)crc32_z(0, (const Bytef *)bytes, (z_size_t)n);
}

/* The index's checksum: its header's counts and layout, then its records. */
static uint32_t index_crc(const struct index_header *h, const void *body, size_t bytes)
{
    uLong crc = crc32(0, (const Bytef *)h, (uInt)offsetof(struct index_header, crc));
    return (uint32_t)crc32_z(crc, (const Bytef *)body, (z_size_t)bytes);
}

static uint64_t slot_at(const struct splash_disk_cache *d, int64_t slot)
{
    return (uint64_t)slot * d->pg.slot_bytes;
}

/* The file's space at [off, off + len) returns to the volume (the quota counts what the
 * files hold, not their extent); where the volume cannot, it stays until reused. */
static void punch(int fd, uint64_t off, uint64_t len)
{
    if (len)
        (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
}
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

static int write_all(int fd, const void *buf, size_t len, uint64_t off);
static int read_all(int fd, void *buf, size_t len, uint64_t off);
static void *io_main(void *arg);

/* The entry whose id is id, or NULL. */
static struct entry *by_id(struct splash_disk_cache *d, uint64_t id)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].id == id)
            return &d->e[i];
    return NULL;
}

/* The index is to be written again (by the I/O thread, before its next write: no index
 * lists a place after it was given to another page or state). With the lock held. */
static void save_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    d->index_dirty = 1;
    pthread_cond_signal(&d->work);
}

/* A page's reference let go; its slot freed (and its space returned) by the last. */
static void release_page(struct splash_disk_cache *d, int64_t slot)
{
    if (disk_pages_release(&d->pg, slot))
        punch(d->pages_fd, slot_at(d, slot), d->pg.slot_bytes);
}

/* x leaves the tier: its pages let go, its state's room freed. With the lock held, x
 * neither pending nor reading. */
static void drop(struct splash_disk_cache *d, struct entry *x)
{
    for (int64_t i = 0; i < x->n_pages; i++)
        release_page(d, x->chain[i]);
    d->states_bytes -= x->span;
    punch(d->fd, x->off, x->span);
    free(x->tokens);
    free(x->chain);
    *x = d->e[--d->n];
    save_index(d);
}

/* x leaves now, or (written or read right now) once that ends. */
static void drop_or_doom(struct splash_disk_cache *d, struct entry *x)
{
    if (x->pending || x->reading)
        x->doomed = 1;
    else
        drop(d, x);
}

static int holds(const struct entry *x, int64_t slot)
{
    for (int64_t i = 0; i < x->n_pages; i++)
        if (x->chain[i] == slot)
            return 1;
    return 0;
}

/* The page at slot is damaged or was never written: every point whose chain holds it
 * goes. Returns how many. With the lock held. */
static size_t page_gone(struct splash_disk_cache *d, int64_t slot)
{
    disk_pages_mark_bad(&d->pg, slot);
    size_t gone = 0;
    for (size_t i = 0; i < d->n;) {
        struct entry *x = &d->e[i];
        if (x->doomed || !holds(x, slot)) {
            i++;
            continue;
        }
        gone++;
        int stays = x->pending || x->reading;
        drop_or_doom(d, x);
        i += stays; /* a dropped entry's place holds the last one now */
    }
    return gone;
}

/* 1 when x can be read: written, not doomed, each page of its chain written. */
static int readable(const struct splash_disk_cache *d, const struct entry *x)
{
    if (x->pending || x->doomed)
        return 0;
    for (int64_t i = 0; i < x->n_pages; i++)
        if (d->pg.pg[x->chain[i]].state != DISK_PAGE_OK)
            return 0;
    return 1;
}

/* The persistent index, written whole and renamed into place once the data it lists is
 * on the disk (a crash leaves the previous index or this one, never half of one). It
 * lists the points that can be read and the pages written. Called without the lock. */
static void write_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    pthread_mutex_lock(&d->mu);
    d->index_dirty = 0;
    size_t n_pages = 0, n_points = 0;
    for (int64_t s = 0; s < d->pg.n_slots; s++)
        n_pages += d->pg.pg[s].state == DISK_PAGE_OK;
    size_t bytes = n_pages * sizeof(struct index_page) + d->n * sizeof(struct index_point);
    char *body = malloc(bytes ? bytes : 1);
    if (body) {
        struct index_page *ip = (struct index_page *)body;
        for (int64_t s = 0, k = 0; s < d->pg.n_slots; s++) {
            const struct disk_page *g = &d->pg.pg[s];
            if (g->state == DISK_PAGE_OK)
                ip[k++] = (struct index_page){.slot = s, .parent = g->parent, .key = g->key,
                                              .crc_tokens = g->crc_tokens,
                                              .crc_bytes = g->crc_bytes};
        }
        struct index_point *pt = (struct index_point *)(ip + n_pages);
        for (size_t i = 0; i < d->n; i++) {
            const struct entry *x = &d->e[i];
            if (readable(d, x))
                pt[n_points++] = (struct index_point){
                    .n_tokens = x->n, .cls = x->cls, .n_pages = x->n_pages,
                    .tail = x->n_pages ? x->chain[x->n_pages - 1] : -1, .off = x->off,
                    .span = x->span, .size = x->size, .crc_tokens = x->crc_tokens,
                    .crc_blob = x->crc_blob};
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (!body)
        return;
    bytes = n_pages * sizeof(struct index_page) + n_points * sizeof(struct index_point);
    struct index_header h = {.n_pages = n_pages, .n_points = n_points,
                             .page_bytes = d->pg.page_bytes, .page_tokens = d->pg.page_tokens};
    memcpy(h.magic, INDEX_MAGIC, sizeof h.magic);
    h.crc = index_crc(&h, body, bytes);
    char tmp[600], path[600];
    snprintf(tmp, sizeof tmp, "%s/index.new", d->persist);
    snprintf(path, sizeof path, "%s/index", d->persist);
    fdatasync(d->pages_fd);
    fdatasync(d->fd);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && !write_all(fd, &h, sizeof h, 0) && !write_all(fd, body, bytes, sizeof h) &&
        !fdatasync(fd)) {
        close(fd);
        rename(tmp, path);
    } else if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(body);
}

static off_t file_size(int fd)
{
    struct stat sb;
    return fstat(fd, &sb) == 0 ? sb.st_size : 0;
}

/* At a persistent open: a page the index lists, placed in the table when its slot's
 * record and tokens read back as listed (its bytes are checked when read). */
static int take_back_page(struct splash_disk_cache *d, const struct index_page *x,
                          off_t pages_size, int32_t *tokens)
{
    struct page_record r;
    size_t tok_bytes = (size_t)d->pg.page_tokens * sizeof *tokens;
    if (x->slot < 0 || x->slot >= (1ll << 40) || x->parent < -1 ||
        (off_t)slot_at(d, x->slot + 1) > pages_size ||
        read_all(d->pages_fd, &r, sizeof r, slot_at(d, x->slot)) ||
        memcmp(r.magic, PAGE_MAGIC, sizeof r.magic) || r.key != x->key ||
        r.parent != x->parent || r.crc_tokens != x->crc_tokens || r.crc_bytes != x->crc_bytes ||
        read_all(d->pages_fd, tokens, tok_bytes, slot_at(d, x->slot) + sizeof r) ||
        crc_of(tokens, tok_bytes) != x->crc_tokens)
        return 0;
    int64_t s = disk_pages_add(&d->pg, x->slot, x->parent, x->key, tokens, DISK_PAGE_OK);
    if (s < 0)
        return 0;
    d->pg.pg[s].crc_tokens = x->crc_tokens;
    d->pg.pg[s].crc_bytes = x->crc_bytes;
    d->pg.pg[s].refs = 0; /* the points that hold it count it below */
    return 1;
}

/* A point the index lists: its state record and tokens as listed, and its whole chain
 * taken back, each page holding its tokens in order. The entry's chain (malloc'ed), or
 * NULL with *ok 0. */
static int64_t *take_back_chain(struct splash_disk_cache *d, const struct index_point *x,
                                const int32_t *tokens, int *ok)
{
    *ok = 0;
    int32_t P = d->pg.page_tokens;
    if (x->n_pages < 0 || (x->n_pages && (!d->pg.page_bytes || x->n_pages * P > x->n_tokens)))
        return NULL;
    int64_t *chain = malloc((size_t)(x->n_pages ? x->n_pages : 1) * sizeof *chain);
    if (!chain)
        return NULL;
    int64_t s = x->tail;
    for (int64_t i = x->n_pages - 1; i >= 0; i--) {
        if (s < 0 || s >= d->pg.n_slots || d->pg.pg[s].state != DISK_PAGE_OK ||
            memcmp(d->pg.pg[s].tokens, tokens + i * P, (size_t)P * sizeof *tokens)) {
            free(chain);
            return NULL;
        }
        chain[i] = s;
        s = d->pg.pg[s].parent;
    }
    if (s != -1) {
        free(chain);
        return NULL;
    }
    *ok = 1;
    return chain;
}

/* Reads the index file at path: its header and records (malloc'ed), or the fault. */
static const char *read_index(const char *path, struct index_header *h, char **body,
                              size_t *bytes)
{
    *body = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return "";
    const char *fault = NULL;
    if (read_all(fd, h, sizeof *h, 0) || memcmp(h->magic, INDEX_MAGIC, sizeof h->magic) ||
        h->n_pages > (1ull << 32) || h->n_points > (1u << 24))
        fault = "its header is not an index's";
    else if ((*bytes = h->n_pages * sizeof(struct index_page) +
                       h->n_points * sizeof(struct index_point)) +
                 sizeof *h != (uint64_t)file_size(fd))
        fault = "its length is not what its header counts";
    else {
        if (!(*body = malloc(*bytes ? *bytes : 1)) || read_all(fd, *body, *bytes, sizeof *h))
            fault = "it is cut short";
        else if (index_crc(h, *body, *bytes) != h->crc)
            fault = "it fails its checksum";
    }
    close(fd);
    if (fault) {
        free(*body);
        *body = NULL;
    }
    return fault;
}

/* At a persistent open: the points the index lists whose state records and tokens read
 * back as written and whose whole chains of pages do, within the quota; the pages no
 * such point holds are freed. */
static void take_back(struct splash_disk_cache *d)
{
    char path[600];
    snprintf(path, sizeof path, "%s/index", d->persist);
    struct index_header h;
    char *body;
    size_t bytes = 0;
    const char *fault = read_index(path, &h, &body, &bytes);
    if (fault && !*fault)
        return; /* a new namespace */
    if (!fault && (h.page_bytes != d->pg.page_bytes || h.page_tokens != d->pg.page_tokens))
        fault = "it was written for another page layout";
    if (fault) {
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %s: the index is skipped (%s); the cache "
                   "starts empty", path, fault);
        free(body);
        return;
    }
    const struct index_page *ip = (const struct index_page *)body;
    const struct index_point *pt = (const struct index_point *)(ip + h.n_pages);
    off_t pages_size = file_size(d->pages_fd), states_size = file_size(d->fd);
    uint64_t skipped_pages = 0, skipped = 0;
    int64_t held = 0;
    int32_t *page_tokens = malloc((size_t)(d->pg.page_tokens > 0 ? d->pg.page_tokens : 1) *
                                  sizeof *page_tokens);
    for (uint64_t i = 0; page_tokens && d->pg.page_bytes && i < h.n_pages; i++)
        skipped_pages += !take_back_page(d, &ip[i], pages_size, page_tokens);
    free(page_tokens);
    for (uint64_t i = 0; i < h.n_points; i++) {
        const struct index_point *x = &pt[i];
        struct state_record r;
        int32_t *tokens = NULL;
        int64_t *chain = NULL;
        size_t tok_bytes = (size_t)x->n_tokens * sizeof *tokens;
        int ok = x->n_tokens > 0 && x->n_tokens < (1 << 26) &&
                 x->span == sizeof r + tok_bytes + x->size &&
                 x->off + x->span <= (uint64_t)states_size &&
                 !read_all(d->fd, &r, sizeof r, x->off) &&
                 !memcmp(r.magic, STATE_MAGIC, sizeof r.magic) && r.n_tokens == x->n_tokens &&
                 r.n_pages == x->n_pages && r.size == x->size &&
                 r.crc_tokens == x->crc_tokens && r.crc_blob == x->crc_blob &&
                 (tokens = malloc(tok_bytes)) &&
                 !read_all(d->fd, tokens, tok_bytes, x->off + sizeof r) &&
                 crc_of(tokens, tok_bytes) == x->crc_tokens;
        if (ok)
            chain = take_back_chain(d, x, tokens, &ok);
        int64_t more = 0; /* pages no point taken back holds yet */
        for (int64_t k = 0; ok && k < x->n_pages; k++)
            more += !d->pg.pg[chain[k]].refs;
        ok = ok && d->states_bytes + x->span + (uint64_t)(held + more) * d->pg.slot_bytes <=
                       d->quota;
        if (ok && d->n == d->cap) {
            size_t cap = d->cap ? 2 * d->cap : 16;
            struct entry *e = realloc(d->e, cap * sizeof *e);
            if (e) {
                d->e = e;
                d->cap = cap;
            }
            ok = e != NULL;
        }
        if (!ok) {
            free(tokens);
            free(chain);
            skipped++;
            continue;
        }
        for (int64_t k = 0; k < x->n_pages; k++)
            d->pg.pg[chain[k]].refs++;
        held += more;
        d->e[d->n++] = (struct entry){.tokens = tokens, .n = x->n_tokens, .id = ++d->next_id,
                                      .cls = x->cls, .off = x->off, .span = x->span,
                                      .size = x->size, .crc_tokens = x->crc_tokens,
                                      .crc_blob = x->crc_blob, .n_pages = x->n_pages,
                                      .chain = chain, .used = ++d->clock};
        d->states_bytes += x->span;
        d->st.taken_back++;
    }
    /* pages no point took back are free again */
    for (int64_t s = 0; s < d->pg.n_slots; s++)
        if (d->pg.pg[s].state == DISK_PAGE_OK && !d->pg.pg[s].refs) {
            d->pg.pg[s].refs = 1;
            release_page(d, s);
        }
    free(body);
    if (skipped || skipped_pages) {
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %llu of the %llu points and %llu of the "
                   "%llu pages %s lists are skipped: damaged, cut short, their chains not whole, "
                   "or past the quota",
                   (unsigned long long)skipped, (unsigned long long)h.n_points,
                   (unsigned long long)skipped_pages, (unsigned long long)h.n_pages, path);
        write_index(d);
    }
}
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
    int ok = !write_all(fd, text, (size_t)len, 0) && !fdatasync(fd);
    close(fd);
    if (ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

static void probation_start(struct splash_disk_cache *d)
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
        probation_start(d);
        take_back(d);
        /* the root holds this cache and the others nobody holds within one quota */
        d->others = splash_cache_namespace_trim_others(
            d->persist, d->quota > used_bytes(d) ? d->quota - used_bytes(d) : 0);
    }
    if (pthread_create(&d->io, NULL, io_main, d) != 0) {
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
static struct entry *find_any(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                              int pending)
{
    for (size_t i = 0; i < d->n; i++) {
        struct entry *x = &d->e[i];
        /* (a doomed point may stay beside its new copy until its read ends) */
        if (x->n == n && !x->doomed && !memcmp(x->tokens, tokens, (size_t)n * sizeof *tokens))
            return pending || readable(d, x) ? x : NULL;
    }
    return NULL;
}

static struct entry *find(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    return find_any(d, tokens, n, 0);
}

static int by_offset(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a, *y = *(const struct entry *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The first gap of span bytes in the states file's [0, quota), or -1. */
static int64_t gap(struct splash_disk_cache *d, uint64_t span)
{
    struct entry **sorted = malloc((d->n ? d->n : 1) * sizeof *sorted);
    if (!sorted)
        return -1;
    for (size_t i = 0; i < d->n; i++)
        sorted[i] = &d->e[i];
    qsort(sorted, d->n, sizeof *sorted, by_offset);
    uint64_t at = 0;
    int64_t found = -1;
    for (size_t i = 0; i <= d->n && found < 0; i++) {
        uint64_t next = i < d->n ? sorted[i]->off : d->quota;
        if (next >= at + span)
            found = (int64_t)at;
        else if (i < d->n)
            at = sorted[i]->off + sorted[i]->span;
    }
    free(sorted);
    return found;
}

/* The point room goes from first: checkpoints before turn points, the least recently
 * used first (a point goes whole; the pages it alone held go with it). */
static struct entry *victim(struct splash_disk_cache *d)
{
    struct entry *v = NULL;
    for (size_t i = 0; i < d->n; i++) {
        struct entry *x = &d->e[i];
        if (x->pending || x->reading)
            continue;
        if (x->doomed)
            return x;
        if (!v || x->cls < v->cls || (x->cls == v->cls && x->used < v->used))
            v = x;
    }
    return v;
}

static int budget_allows(struct splash_disk_cache *d, uint64_t span)
{
    if (!d->per_day)
        return 1;
    double now = mono_now(), cap = (double)d->per_day / 4.0;
    d->bucket += (now - d->bucket_at) * (double)d->per_day / 86400.0;
    if (d->bucket > cap)
        d->bucket = cap;
    d->bucket_at = now;
    if ((double)span > d->bucket)
        return 0;
    d->bucket -= (double)span;
    return 1;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
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

/* Where produce's bytes go: on, a piece at a time, into their CRC. */
struct writer {
    struct splash_disk_cache *d;
    struct job *j;
    int fd;
    uint64_t at, end;
    uint32_t crc;
    int failed; /* 1: the file refused a write; 2: more bytes than announced */
};

static int write_piece(void *ctx, const void *bytes, size_t n)
{
    struct writer *w = ctx;
    if (atomic_load(&w->d->cancel) || atomic_load(&w->j->cancel) ||
        (w->j->expendable && atomic_load(&w->d->stop_expendable))) {
        w->failed = 3;
        return 1;
    }
    if (w->d->slow_piece > 0) {
        struct timespec ts = {(time_t)w->d->slow_piece,
                              (long)((w->d->slow_piece - (double)(time_t)w->d->slow_piece) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (w->at + n > w->end) {
        w->failed = 2;
        return 1;
    }
    if (write_all(w->fd, bytes, n, w->at)) {
        w->failed = 1;
        return 1;
    }
    w->crc = (uint32_t)crc32_z(w->crc, bytes, (z_size_t)n);
    w->at += n;
    return 0;
}


/* On the I/O thread: len bytes produce hands at off of fd (their CRC in *crc). 0 written,
 * else run_job's fault. */
static int write_produced(struct splash_disk_cache *d, struct job *j, int fd, uint64_t off,
                          uint64_t len, int64_t page, uint32_t *crc)
{
    struct writer w = {.d = d, .j = j, .fd = fd, .at = off, .end = off + len,
                       .crc = (uint32_t)crc32(0, NULL, 0)};
    int bad = page >= 0 ? j->parts.page(j->parts.ctx, page, write_piece, &w)
                        : j->parts.rest(j->parts.ctx, write_piece, &w);
    if (bad || w.at != w.end)
        return w.failed ? w.failed : 2;
    *crc = w.crc;
    return 0;
}

/* On the I/O thread: each new page of the job's chain (tokens, bytes, then its record),
 * then its state (the same). A record is written last: a write cut short leaves none that
 * claims it. 0 written; 1 the file refused a write; 2 produce failed or handed other than
 * the bytes announced; 3 cancelled. */
static int run_job(struct splash_disk_cache *d, struct job *j)
{
    errno = 0;
    if (atomic_load(&d->cancel) || atomic_load(&j->cancel))
        return 3;
    size_t P = (size_t)d->pg.page_tokens;
    for (int64_t k = 0; k < j->n_checks; k++) {
        struct page_check *c = &j->pages[k];
        uint64_t at = slot_at(d, c->slot);
        const int32_t *tokens = j->tokens + (size_t)c->index * P;
        if (write_all(d->pages_fd, tokens, P * sizeof *tokens, at + sizeof(struct page_record)))
            return 1;
        int fault = write_produced(d, j, d->pages_fd,
                                   at + sizeof(struct page_record) + P * sizeof *tokens,
                                   d->pg.page_bytes, c->index, &c->crc_bytes);
        if (fault)
            return fault;
        struct page_record r = {.key = c->key, .parent = c->parent,
                                .crc_tokens = c->crc_tokens, .crc_bytes = c->crc_bytes};
        memcpy(r.magic, PAGE_MAGIC, sizeof r.magic);
        if (write_all(d->pages_fd, &r, sizeof r, at))
            return 1;
        j->written += d->pg.slot_bytes;
    }
    size_t tok_bytes = (size_t)j->n * sizeof *j->tokens;
    if (write_all(d->fd, j->tokens, tok_bytes, j->off + sizeof(struct state_record)))
        return 1;
    int fault = write_produced(d, j, d->fd, j->off + sizeof(struct state_record) + tok_bytes,
                               j->size, -1, &j->crc_blob);
    if (fault)
        return fault;
    struct state_record r = {.n_tokens = j->n, .n_pages = (int32_t)j->n_pages, .size = j->size,
                             .crc_tokens = j->crc_tokens, .crc_blob = j->crc_blob};
    memcpy(r.magic, STATE_MAGIC, sizeof r.magic);
    if (write_all(d->fd, &r, sizeof r, j->off))
        return 1;
    j->written += j->span;
    return 0;
}

/* With the lock held: the job's point written (or dropped, and with it every point that
 * counted on a page it was to write), the job to the done list. */
static void finish(struct splash_disk_cache *d, struct job *j, int fault, int err)
{
    struct entry *x = by_id(d, j->id);
    j->ok = fault == 0 && x && !x->doomed;
    d->st.written_bytes += j->written;
    if (x && !fault) {
        for (int64_t k = 0; k < j->n_checks; k++) {
            struct disk_page *g = &d->pg.pg[j->pages[k].slot];
            g->crc_bytes = j->pages[k].crc_bytes;
            if (g->state == DISK_PAGE_PENDING)
                g->state = DISK_PAGE_OK;
        }
        x->pending = 0;
        x->crc_blob = j->crc_blob;
        d->st.writes++;
        if (x->doomed && !x->reading)
            drop(d, x);
        else
            save_index(d);
    } else if (x) {
        uint64_t id = x->id;
        for (int64_t k = 0; k < j->n_checks; k++)
            page_gone(d, j->pages[k].slot); /* never written: nothing may count on it */
        x = by_id(d, id); /* (page_gone moves entries) */
        if (x) {
            x->pending = 0;
            x->doomed = 1;
            if (!x->reading)
                drop(d, x);
        }
    }
    if (fault == 1 && !d->st.closed) {
        /* a full volume or a quota the engine cannot see: keep serving what is there */
        splash_log(SPLASH_LOG_WARN, NULL,
                   "SSD cache · writes stopped: a file in %s refused one (%s); the %zu "
                   "points it holds are still read",
                   d->dir, strerror(err ? err : ENOSPC), d->n);
        d->st.closed = 1;
    }
    j->next = d->done;
    d->done = j;
}

/* What is wrong with the page c as read at its slot (its bytes into out), or NULL. */
static const char *read_page(struct splash_disk_cache *d, const struct page_check *c,
                             const int32_t *tokens, char *out, int32_t *scratch)
{
    struct page_record r;
    size_t tok_bytes = (size_t)d->pg.page_tokens * sizeof *tokens;
    uint64_t at = slot_at(d, c->slot);
    if (read_all(d->pages_fd, &r, sizeof r, at) ||
        read_all(d->pages_fd, scratch, tok_bytes, at + sizeof r) ||
        read_all(d->pages_fd, out, d->pg.page_bytes, at + sizeof r + tok_bytes))
        return "cut short";
    if (memcmp(r.magic, PAGE_MAGIC, sizeof r.magic) || r.key != c->key ||
        r.parent != c->parent || r.crc_tokens != c->crc_tokens || r.crc_bytes != c->crc_bytes)
        return "its record header is not the one written";
    if (crc_of(scratch, tok_bytes) != c->crc_tokens || memcmp(scratch, tokens, tok_bytes))
        return "its tokens fail their checksum";
    if (crc_of(out, d->pg.page_bytes) != c->crc_bytes)
        return "its bytes fail their checksum";
    return NULL;
}

/* What is wrong with the job's state as read (its bytes into out), or NULL. */
static const char *read_state(struct splash_disk_cache *d, const struct job *j, char *out)
{
    struct state_record r;
    size_t tok_bytes = (size_t)j->n * sizeof *j->tokens;
    int32_t *tokens = malloc(tok_bytes);
    const char *fault = NULL;
    if (!tokens)
        return "no memory to read it into";
    if (read_all(d->fd, &r, sizeof r, j->off) ||
        read_all(d->fd, tokens, tok_bytes, j->off + sizeof r) ||
        read_all(d->fd, out, j->size, j->off + sizeof r + tok_bytes))
        fault = "cut short";
    else if (memcmp(r.magic, STATE_MAGIC, sizeof r.magic) || r.n_tokens != j->n ||
             r.n_pages != j->n_pages || r.size != j->size || r.crc_tokens != j->crc_tokens ||
             r.crc_blob != j->crc_blob)
        fault = "its record header is not the one written";
    else if (crc_of(tokens, tok_bytes) != j->crc_tokens || memcmp(tokens, j->tokens, tok_bytes))
        fault = "its tokens fail their checksum";
    else if (crc_of(out, j->size) != j->crc_blob)
        fault = "its bytes fail their checksum";
    free(tokens);
    return fault;
}

/* On the I/O thread (or a caller's, for splash_disk_cache_get): a read's pages, then its
 * state, each checked; the first fault ends it. */
static void run_read(struct splash_disk_cache *d, struct job *j)
{
    j->bad_page = -1;
    if (atomic_load(&d->cancel)) {
        j->fault = "cancelled";
        return;
    }
    if (d->slow_piece > 0) { /* a read as slow as ten pieces' writes */
        double slow = 10 * d->slow_piece;
        struct timespec ts = {(time_t)slow, (long)((slow - (double)(time_t)slow) * 1e9)};
        nanosleep(&ts, NULL);
    }
    uint64_t pages = (uint64_t)j->n_pages * d->pg.page_bytes;
    int32_t *scratch = malloc((size_t)(d->pg.page_tokens > 0 ? d->pg.page_tokens : 1) *
                              sizeof *scratch);
    if (!scratch || !(j->buf = malloc(pages + j->size ? pages + j->size : 1)))
        j->fault = "no memory to read it into";
    for (int64_t i = 0; !j->fault && i < j->n_pages; i++) {
        j->fault = read_page(d, &j->pages[i],
                             j->tokens + (size_t)i * (size_t)d->pg.page_tokens,
                             j->buf + (size_t)i * d->pg.page_bytes, scratch);
        if (j->fault)
            j->bad_page = i;
    }
    if (!j->fault)
        j->fault = read_state(d, j, j->buf + pages);
    free(scratch);
    if (j->fault) {
        free(j->buf);
        j->buf = NULL;
    }
}

/* With the lock held: a read's point counted as read, or dropped as damaged (a damaged
 * page drops every point whose chain holds it). */
static void finish_read(struct splash_disk_cache *d, struct job *j)
{
    struct entry *x = by_id(d, j->id);
    if (x)
        x->reading--;
    if (!j->fault && x && x->doomed) {
        j->fault = "a page of its chain was found damaged";
        free(j->buf);
        j->buf = NULL;
    } else if (!j->fault && x) {
        x->used = ++d->clock;
        d->st.hits++;
        d->st.read_bytes += x->span + (uint64_t)x->n_pages * d->pg.slot_bytes;
    } else if (j->fault && strcmp(j->fault, "cancelled")) {
        d->st.corrupt++;
        if (x && j->bad_page >= 0) {
            int64_t slot = x->chain[j->bad_page];
            uint64_t id = x->id;
            size_t gone = page_gone(d, slot);
            splash_log(SPLASH_LOG_WARN, NULL,
                       "SSD cache · page %lld of the point of %d tokens (slot %lld, byte %llu "
                       "of the pages file) is skipped: %s; the %zu points whose chains hold it "
                       "are dropped",
                       (long long)j->bad_page, j->n, (long long)slot,
                       (unsigned long long)slot_at(d, slot), j->fault, gone);
            x = by_id(d, id);
        } else {
            splash_log(SPLASH_LOG_WARN, NULL,
                       "SSD cache · the point of %d tokens at byte %llu of the states file is "
                       "skipped: %s",
                       j->n, (unsigned long long)j->off, j->fault);
            if (x)
                x->doomed = 1;
        }
    }
    if (x && x->doomed && !x->reading && !x->pending)
        drop(d, x);
}

static void *io_main(void *arg)
{
    struct splash_disk_cache *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && !d->queue && !d->index_dirty)
            pthread_cond_wait(&d->work, &d->mu);
        if (d->index_dirty) {
            pthread_mutex_unlock(&d->mu);
            write_index(d);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        if (!d->queue) {
            if (d->stop)
                break;
            continue;
        }
        struct job *j = d->queue;
        d->queue = j->next;
        if (!d->queue)
            d->queue_tail = NULL;
        if (!j->read) { /* a point doomed while queued is not written */
            struct entry *x = by_id(d, j->id);
            if (!x || x->doomed)
                atomic_store(&j->cancel, 1);
        }
        d->busy = 1;
        d->busy_expendable = j->expendable && !j->read;
        pthread_mutex_unlock(&d->mu);
        if (j->read) {
            run_read(d, j);
            pthread_mutex_lock(&d->mu);
            d->busy = 0;
            finish_read(d, j);
            j->next = d->done;
            d->done = j;
            pthread_cond_broadcast(&d->idle);
            continue;
        }
        int fault = run_job(d, j), err = errno;
        if (!fault && d->persist[0]) { /* before an index lists it */
            fdatasync(d->pages_fd);
            fdatasync(d->fd);
        }
        pthread_mutex_lock(&d->mu);
        d->busy = 0;
        finish(d, j, fault, err);
        pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void free_job(struct job *j)
{
    if (!j)
        return;
    free(j->buf);
    free(j->tokens);
    free(j->pages);
    free(j);
}

/* With the lock held: the chain of pages of tokens[0..n_pages * page_tokens), the pages
 * already on the tier (pending or written) with a reference taken; *found of them are.
 * -1 past memory. */
static int64_t find_chain(struct splash_disk_cache *d, const int32_t *tokens, int64_t n_pages,
                          int64_t *chain, uint64_t *keys)
{
    int64_t parent = -1;
    uint64_t key = 0;
    int64_t found = 0;
    for (int64_t i = 0; i < n_pages; i++) {
        key = disk_pages_key(key, tokens + (size_t)i * (size_t)d->pg.page_tokens,
                             d->pg.page_tokens);
        keys[i] = key;
        int64_t s = parent == -1 && i ? -1
                                      : disk_pages_find(&d->pg, parent, key,
                                                        tokens + (size_t)i *
                                                                     (size_t)d->pg.page_tokens);
        chain[i] = s;
        if (s >= 0) {
            d->pg.pg[s].refs++;
            found++;
        }
        parent = s;
    }
    return found;
}

int splash_disk_cache_put_parts_async(struct splash_disk_cache *d, const int32_t *tokens,
                                      int32_t n, int cls, const struct splash_disk_parts *parts,
                                      splash_disk_done_fn done, void *done_ctx, int expendable)
{
    if (!d || n <= 0 || parts->n_pages < 0 ||
        (parts->n_pages && (!d->pg.page_bytes || parts->n_pages * d->pg.page_tokens > n ||
                            !parts->page)))
        return 0;
    int64_t n_pages = parts->n_pages;
    int64_t *chain = malloc((size_t)(n_pages ? n_pages : 1) * sizeof *chain);
    uint64_t *keys = malloc((size_t)(n_pages ? n_pages : 1) * sizeof *keys);
    struct job *j = calloc(1, sizeof *j);
    size_t tok_bytes = (size_t)n * sizeof *tokens;
    if (!chain || !keys || !j || !(j->tokens = malloc(tok_bytes))) {
        free(chain);
        free(keys);
        free_job(j);
        return 0;
    }
    memcpy(j->tokens, tokens, tok_bytes);
    for (int64_t i = 0; i < n_pages; i++)
        chain[i] = -1; /* no reference taken yet */
    pthread_mutex_lock(&d->mu);
    int queued = 0;
    uint64_t span = sizeof(struct state_record) + tok_bytes + parts->rest_size;
    struct entry *have = find_any(d, tokens, n, 1);
    int64_t off = -1, found = 0;
    if (d->st.closed || have) {
        if (have)
            have->used = ++d->clock;
        goto out;
    }
    /* the pages already there are kept for this point too: only the others are written */
    found = find_chain(d, tokens, n_pages, chain, keys);
    uint64_t need = (uint64_t)(n_pages - found) * d->pg.slot_bytes + span;
    if (need + (uint64_t)found * d->pg.slot_bytes > d->quota) {
        d->st.refused_room++;
        goto out;
    }
    if (!budget_allows(d, need)) {
        d->st.refused_budget++;
        goto out;
    }
    /* other namespaces nobody holds give up their room first, the least recently used
     * first, before this cache drops a copy of its own */
    if (d->persist[0] && d->others && used_bytes(d) + need + d->others > d->quota)
        d->others = splash_cache_namespace_trim_others(
            d->persist, d->quota > used_bytes(d) + need ? d->quota - used_bytes(d) - need : 0);
    while (used_bytes(d) + need > d->quota || (off = gap(d, span)) < 0) {
        struct entry *v = victim(d);
        if (!v) {
            d->st.refused_room++;
            goto out;
        }
        drop(d, v); /* the index is written before the job: none lists a place reused */
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        struct entry *e = realloc(d->e, cap * sizeof *e);
        if (!e)
            goto out;
        d->e = e;
        d->cap = cap;
    }
    struct entry x = {.n = n, .cls = cls, .off = (uint64_t)off, .span = span,
                      .size = parts->rest_size, .n_pages = n_pages,
                      .id = ++d->next_id, .pending = 1};
    x.tokens = malloc(tok_bytes);
    j->pages = calloc((size_t)(n_pages - found ? n_pages - found : 1), sizeof *j->pages);
    if (!x.tokens || !j->pages) {
        free(x.tokens);
        goto out;
    }
    /* the new pages, each a child of the one before it */
    int64_t added = 0;
    for (int64_t i = 0; i < n_pages; i++) {
        if (chain[i] >= 0)
            continue;
        const int32_t *pt = tokens + (size_t)i * (size_t)d->pg.page_tokens;
        int64_t parent = i ? chain[i - 1] : -1;
        int64_t s = disk_pages_add(&d->pg, -1, parent, keys[i], pt, DISK_PAGE_PENDING);
        if (s < 0)
            break;
        uint32_t crc_tokens = crc_of(pt, (size_t)d->pg.page_tokens * sizeof *pt);
        d->pg.pg[s].crc_tokens = crc_tokens;
        chain[i] = s;
        j->pages[added++] = (struct page_check){.index = i, .slot = s, .parent = parent,
                                                .key = keys[i], .crc_tokens = crc_tokens};
    }
    if (added != n_pages - found) {
        free(x.tokens);
        goto out;
    }
    memcpy(x.tokens, tokens, tok_bytes);
    x.crc_tokens = crc_of(tokens, tok_bytes);
    x.chain = chain;
    chain = NULL;
    x.used = ++d->clock;
    d->e[d->n++] = x;
    d->states_bytes += span;
    d->st.pages_shared += (uint64_t)found;
    j->id = x.id;
    j->off = x.off;
    j->size = x.size;
    j->span = span;
    j->crc_tokens = x.crc_tokens;
    j->n = n;
    j->n_pages = n_pages;
    j->n_checks = added;
    j->parts = *parts;
    j->done = done;
    j->done_ctx = done_ctx;
    j->expendable = expendable;
    j->cls = cls;
    if (d->queue_tail)
        d->queue_tail->next = j;
    else
        d->queue = j;
    d->queue_tail = j;
    j = NULL;
    pthread_cond_signal(&d->work);
    queued = 1;
out:
    if (chain) /* refused: the references taken go back (the new pages with them) */
        for (int64_t i = 0; i < n_pages; i++)
            if (chain[i] >= 0)
                release_page(d, chain[i]);
    pthread_mutex_unlock(&d->mu);
    free(chain);
    free(keys);
    free_job(j);
    return queued;
}

int splash_disk_cache_put_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx,
                                splash_disk_done_fn done, void *done_ctx, int expendable)
{
    struct splash_disk_parts parts = {.rest_size = size, .rest = produce, .ctx = ctx};
    return splash_disk_cache_put_parts_async(d, tokens, n, cls, &parts, done, done_ctx,
                                             expendable);
}

/* A read job for x (its chain's pages as the table has them), or NULL. With the lock. */
static struct job *read_job(struct splash_disk_cache *d, struct entry *x)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->tokens = malloc((size_t)x->n * sizeof *x->tokens);
    j->pages = calloc((size_t)(x->n_pages ? x->n_pages : 1), sizeof *j->pages);
    if (!j->tokens || !j->pages) {
        free_job(j);
        return NULL;
    }
    memcpy(j->tokens, x->tokens, (size_t)x->n * sizeof *x->tokens);
    for (int64_t i = 0; i < x->n_pages; i++) {
        const struct disk_page *g = &d->pg.pg[x->chain[i]];
        j->pages[i] = (struct page_check){.index = i, .slot = x->chain[i], .parent = g->parent,
                                          .key = g->key, .crc_tokens = g->crc_tokens,
                                          .crc_bytes = g->crc_bytes};
    }
    j->read = 1;
    j->id = x->id;
    j->off = x->off;
    j->span = x->span;
    j->size = x->size;
    j->crc_tokens = x->crc_tokens;
    j->crc_blob = x->crc_blob;
    j->cls = x->cls;
    j->n = x->n;
    j->n_pages = x->n_pages;
    j->n_checks = x->n_pages;
    x->reading++;
    return j;
}

int splash_disk_cache_get_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                splash_disk_read_fn got, void *ctx)
{
    if (!d || n <= 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct entry *x = find(d, tokens, n);
    struct job *j = x ? read_job(d, x) : NULL;
    if (j) {
        j->got = got;
        j->done_ctx = ctx;
        /* reads first: a request waits on them */
        j->next = d->queue;
        d->queue = j;
        if (!d->queue_tail)
            d->queue_tail = j;
        pthread_cond_signal(&d->work);
    }
    pthread_mutex_unlock(&d->mu);
    return j != NULL;
}

int splash_disk_cache_reap(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct job *j = d->done;
    d->done = NULL;
    pthread_mutex_unlock(&d->mu);
    int n = 0;
    while (j) {
        struct job *next = j->next;
        if (j->read && j->got) {
            j->got(j->done_ctx, j->tokens, j->n, j->buf, j->n_pages, j->size, j->cls);
            j->buf = NULL; /* the callback's */
        } else if (j->done) {
            j->done(j->done_ctx, j->ok);
        }
        free_job(j);
        j = next;
        n++;
    }
    return n;
}
int splash_disk_cache_pending(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    int n = d->busy;
    for (struct job *j = d->queue; j; j = j->next)
        n++;
    for (struct job *j = d->done; j; j = j->next)
        n++;
    pthread_mutex_unlock(&d->mu);
    return n;
}

int splash_disk_cache_give_up_expendable(struct splash_disk_cache *d)
{
    if (!d)
        return 0;
    int n = 0;
    pthread_mutex_lock(&d->mu);
    for (struct job **at = &d->queue; *at;) {
        struct job *j = *at;
        if (!j->expendable || j->read) {
            at = &j->next;
            continue;
        }
        *at = j->next;
        finish(d, j, 3, 0);
        n++;
    }
    d->queue_tail = NULL;
    for (struct job *j = d->queue; j; j = j->next)
        d->queue_tail = j;
    pthread_mutex_unlock(&d->mu);
    /* the one under way stops at its next piece: it is the only wait */
    atomic_store(&d->stop_expendable, 1);
    pthread_mutex_lock(&d->mu);
    while (d->busy && d->busy_expendable) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->idle, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->stop_expendable, 0);
    return n + splash_disk_cache_reap(d);
}

int splash_disk_cache_wait(struct splash_disk_cache *d, double seconds, int cancel)
{
    if (!d)
        return 1;
    if (cancel)
        atomic_store(&d->cancel, 1);
    double until = mono_now() + seconds;
    pthread_mutex_lock(&d->mu);
    while ((d->queue || d->busy) && mono_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->idle, &d->mu, &ts);
    }
    int drained = !d->queue && !d->busy;
    pthread_mutex_unlock(&d->mu);
    if (cancel)
        atomic_store(&d->cancel, 0);
    splash_disk_cache_reap(d);
    return drained;
}

struct sync_put {
    int done, ok;
};

static void note_done(void *ctx, int ok)
{
    struct sync_put *s = ctx;
    s->done = 1;
    s->ok = ok;
}

int splash_disk_cache_put_parts_with(struct splash_disk_cache *d, const int32_t *tokens,
                                     int32_t n, int cls, const struct splash_disk_parts *parts)
{
    struct sync_put s = {0};
    if (!d || n <= 0)
        return 0;
    if (splash_disk_cache_has(d, tokens, n))
        return 1;
    if (!splash_disk_cache_put_parts_async(d, tokens, n, cls, parts, note_done, &s, 0))
        return 0;
    while (!s.done)
        splash_disk_cache_wait(d, 3600.0, 0);
    return s.ok;
}

int splash_disk_cache_put_with(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx)
{
    struct splash_disk_parts parts = {.rest_size = size, .rest = produce, .ctx = ctx};
    return splash_disk_cache_put_parts_with(d, tokens, n, cls, &parts);
}

struct blob {
    const void *bytes;
    uint64_t size;
};

static int produce_blob(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                        void *wctx)
{
    const struct blob *b = ctx;
    return write(wctx, b->bytes, (size_t)b->size);
}

int splash_disk_cache_put(struct splash_disk_cache *d, const int32_t *tokens, int32_t n, int cls,
                          const void *blob, uint64_t size)
{
    struct blob b = {.bytes = blob, .size = size};
    return splash_disk_cache_put_with(d, tokens, n, cls, size, produce_blob, &b);
}

/* The pages and rest of splash_disk_cache_put_pages, handed out. */
struct laid_out {
    const char *pages;
    uint64_t page_bytes;
    struct blob rest;
};

static int produce_laid_page(void *ctx, int64_t page,
                             int (*write)(void *wctx, const void *bytes, size_t n), void *wctx)
{
    const struct laid_out *l = ctx;
    return write(wctx, l->pages + (size_t)page * l->page_bytes, (size_t)l->page_bytes);
}

static int produce_laid_rest(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                             void *wctx)
{
    const struct laid_out *l = ctx;
    return produce_blob((void *)&l->rest, write, wctx);
}

int splash_disk_cache_put_pages(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                int cls, const void *pages, int64_t n_pages, const void *rest,
                                uint64_t rest_size)
{
    if (!d)
        return 0;
    struct laid_out l = {.pages = pages, .page_bytes = d->pg.page_bytes,
                         .rest = {.bytes = rest, .size = rest_size}};
    struct splash_disk_parts parts = {.n_pages = n_pages, .page = produce_laid_page,
                                      .rest_size = rest_size, .rest = produce_laid_rest,
                                      .ctx = &l};
    return splash_disk_cache_put_parts_with(d, tokens, n, cls, &parts);
}

int splash_disk_cache_has(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct entry *x = find_any(d, tokens, n, 1);
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
        if (x->n > best && x->n <= n && readable(d, x) && (!accept || accept(ctx, x->n)) &&
            !memcmp(x->tokens, tokens, (size_t)x->n * sizeof *tokens))
            best = x->n;
    }
    pthread_mutex_unlock(&d->mu);
    return best;
}

static int read_all(int fd, void *buf, size_t len, uint64_t off)
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

void *splash_disk_cache_get_parts(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                  int64_t *n_pages, uint64_t *rest_size, int *cls)
{
    if (!d)
        return NULL;
    pthread_mutex_lock(&d->mu);
    struct entry *x = find(d, tokens, n);
    struct job *j = x ? read_job(d, x) : NULL;
    pthread_mutex_unlock(&d->mu);
    if (!j)
        return NULL;
    run_read(d, j); /* its point is reading: its slots stay as they are */
    pthread_mutex_lock(&d->mu);
    finish_read(d, j);
    pthread_mutex_unlock(&d->mu);
    void *buf = j->buf;
    j->buf = NULL;
    if (buf) {
        *n_pages = j->n_pages;
        *rest_size = j->size;
        *cls = j->cls;
    }
    free_job(j);
    return buf;
}

void *splash_disk_cache_get(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                            uint64_t *size, int *cls)
{
    int64_t n_pages = 0;
    uint64_t rest = 0;
    void *buf = splash_disk_cache_get_parts(d, tokens, n, &n_pages, &rest, cls);
    if (buf)
        *size = (uint64_t)n_pages * d->pg.page_bytes + rest;
    return buf;
}

void splash_disk_cache_stats(const struct splash_disk_cache *d_, struct splash_disk_stats *s)
{
    struct splash_disk_cache *d = (struct splash_disk_cache *)d_;
    pthread_mutex_lock(&d->mu);
    *s = d->st;
    s->quota = d->quota;
    s->used = used_bytes(d);
    s->entries = d->n;
    s->pages = (uint64_t)d->pg.live;
    s->pages_bytes = (uint64_t)d->pg.live * d->pg.slot_bytes;
    s->states = d->n;
    s->states_bytes = d->states_bytes;
    s->budget_left = 0;
    if (d->per_day) {
        double now = mono_now(), cap = (double)d->per_day / 4.0;
        double b = d->bucket + (now - d->bucket_at) * (double)d->per_day / 86400.0;
        s->budget_left = (uint64_t)(b > cap ? cap : b);
    }
    s->pending = (uint64_t)d->busy;
    for (struct job *j = d->queue; j; j = j->next)
        s->pending++;
    pthread_mutex_unlock(&d->mu);
}

json_t *splash_disk_cache_status(const struct splash_disk_cache *d, const char *why)
{
    if (!d)
        return json_pack("{s:b, s:s}", "enabled", 0, "why", why ? why : "");
    struct splash_disk_stats s;
    splash_disk_cache_stats(d, &s);
    json_t *st = json_pack("{s:b, s:b, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:I, s:s, s:I}",
                     "enabled", 1, "persistent", d->persist[0] != 0, "taken_back",
                     (json_int_t)s.taken_back, "dir", d->dir, "capacity_bytes",
                     (json_int_t)s.quota, "used_bytes", (json_int_t)s.used, "entries",
                     (json_int_t)s.entries, "writes", (json_int_t)s.writes, "written_bytes",
                     (json_int_t)s.written_bytes, "hits", (json_int_t)s.hits, "read_bytes",
                     (json_int_t)s.read_bytes, "refused_room", (json_int_t)s.refused_room,
                     "refused_budget", (json_int_t)s.refused_budget, "corrupt",
                     (json_int_t)s.corrupt, "write_budget_bytes", (json_int_t)s.budget_left,
                     "writes_per_day", (json_int_t)d->per_day, "writes_gated",
                     s.closed ? "closed" : (d->per_day && s.refused_budget ? "budget" : "no"),
                     "writes_in_flight", (json_int_t)s.pending);
    if (st) {
        json_object_set_new(st, "pages",
                            json_pack("{s:I, s:I, s:I, s:I, s:i}", "count", (json_int_t)s.pages,
                                      "bytes", (json_int_t)s.pages_bytes, "shared",
                                      (json_int_t)s.pages_shared, "page_bytes",
                                      (json_int_t)d->pg.page_bytes, "page_tokens",
                                      (int)d->pg.page_tokens));
        json_object_set_new(st, "states",
                            json_pack("{s:I, s:I}", "count", (json_int_t)s.states, "bytes",
                                      (json_int_t)s.states_bytes));
    }
    if (st && d->persist[0]) {
        pthread_mutex_lock((pthread_mutex_t *)&d->mu);
        json_object_set_new(st, "other_caches_bytes", json_integer((json_int_t)d->others));
        json_object_set_new(st, "probation",
                            json_pack("{s:b, s:i, s:b}", "on_probation", d->on_probation,
                                      "failed_starts", d->failed_starts, "started_empty",
                                      d->started_empty));
        pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
    }
    return st;
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
    struct entry *x = find(m, tokens, n);
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
    struct entry *x = find(m, tokens, n);
    int64_t off = x && page >= 0 && page < x->n_pages ? (int64_t)slot_at(m, x->chain[page]) : -1;
    pthread_mutex_unlock(&m->mu);
    return off;
}
