/* The prefix cache's SSD tier (server/engine/disk_cache.h). */
#include "server/engine/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/host_impl.h"
#include "server/engine/cache_namespace.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define RECORD_MAGIC "SPLDISK1"
#define AUTO_CAP (32ull << 30)  /* auto never takes more */
#define AUTO_LEAST (64ull << 20) /* an auto quota smaller than this leaves the tier off */

/* Before each entry's tokens and bytes in the file: what the index expects to read. */
struct record {
    char magic[8];
    int64_t n_tokens;
    uint64_t size;
    uint32_t crc_tokens, crc_blob;
};

struct entry {
    int32_t *tokens;
    int32_t n;
    int cls;
    uint64_t off, span; /* its place: record, tokens, bytes */
    uint64_t size;
    uint32_t crc_tokens, crc_blob;
    uint64_t used;      /* the tier's clock at its write or last read */
    uint64_t id;
    int pending;        /* its write is queued or under way: not read, not moved */
    int reading;        /* reads queued or under way: not given up for room */
};

/* A write for the I/O thread (the entry's bytes at its place, then its record), or a
 * read of an entry's bytes, checked. */
struct job {
    struct job *next;
    int read;
    uint64_t id, off, size, span;
    uint32_t crc_tokens, crc_blob;
    int cls;
    char *buf;                /* a read's bytes (the entry's own at its front once checked) */
    const char *fault;        /* a read's, NULL: as written */
    splash_disk_read_fn got;  /* a read's, on the engine's thread at a reap */
    int32_t *tokens;
    int32_t n;
    splash_disk_produce_fn produce;
    void *ctx;
    splash_disk_done_fn done; /* on the engine's thread, at a reap */
    void *done_ctx;
    int ok;
    int expendable;           /* a copy ahead of need: given up when memory is short */
    _Atomic int cancel;
};

/* The persistent index: a header, then one of these per entry. */
#define INDEX_MAGIC "SPLIDX1"
struct index_header {
    char magic[8];
    uint64_t count;
    uint32_t crc; /* of the entries that follow */
    uint32_t pad;
};
struct index_entry {
    int64_t n_tokens;
    int64_t cls;
    uint64_t off, span, size;
    uint32_t crc_tokens, crc_blob;
};

struct splash_disk_cache {
    int fd;
    char dir[512];
    char persist[512]; /* the namespace directory, "" for a temporary file */
    uint64_t quota;
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

static int open_file(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    char path[600];
    snprintf(path, sizeof path, "%s/splash-cache-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path); /* its space returns when the engine exits */
    return fd;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off);
static int read_all(int fd, void *buf, size_t len, uint64_t off);
static void *io_main(void *arg);
static const char *check_span(const char *buf, int32_t n, const int32_t *tokens, uint64_t size,
                              uint32_t crc_tokens, uint32_t crc_blob);

/* The persistent index, written whole and renamed into place once the data it lists is
 * on the disk (a crash leaves the previous index or this one, never half of one). It
 * lists the entries whose writes are done. Called without the lock held. */
static void write_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    pthread_mutex_lock(&d->mu);
    d->index_dirty = 0;
    struct index_entry *ie = calloc(d->n ? d->n : 1, sizeof *ie);
    size_t k = 0;
    for (size_t i = 0; ie && i < d->n; i++)
        if (!d->e[i].pending)
            ie[k++] = (struct index_entry){.n_tokens = d->e[i].n, .cls = d->e[i].cls,
                                           .off = d->e[i].off, .span = d->e[i].span,
                                           .size = d->e[i].size,
                                           .crc_tokens = d->e[i].crc_tokens,
                                           .crc_blob = d->e[i].crc_blob};
    pthread_mutex_unlock(&d->mu);
    if (!ie)
        return;
    struct index_header h = {.count = k,
                             .crc = (uint32_t)crc32(0, (const Bytef *)ie,
                                                    (uInt)(k * sizeof *ie))};
    memcpy(h.magic, INDEX_MAGIC, sizeof h.magic);
    char tmp[600], path[600];
    snprintf(tmp, sizeof tmp, "%s/index.new", d->persist);
    snprintf(path, sizeof path, "%s/index", d->persist);
    fdatasync(d->fd);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && !write_all(fd, &h, sizeof h, 0) &&
        !write_all(fd, ie, k * sizeof *ie, sizeof h) && !fdatasync(fd)) {
        close(fd);
        rename(tmp, path);
    } else if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(ie);
}

/* The index is to be written again (by the I/O thread, before its next write: no index
 * lists a place after it was given to another entry). Called with the lock held. */
static void save_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    d->index_dirty = 1;
    pthread_cond_signal(&d->work);
}

/* At a persistent open: the entries the index lists whose records and tokens read back
 * as written, within the quota. */
static void take_back(struct splash_disk_cache *d)
{
    char path[600];
    snprintf(path, sizeof path, "%s/index", d->persist);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* a new namespace */
    struct index_header h;
    struct index_entry *ie = NULL;
    const char *fault = NULL;
    if (read_all(fd, &h, sizeof h, 0) || memcmp(h.magic, INDEX_MAGIC, sizeof h.magic) ||
        h.count > (1u << 24))
        fault = "its header is not an index's";
    else if (!(ie = calloc(h.count ? h.count : 1, sizeof *ie)) ||
             read_all(fd, ie, h.count * sizeof *ie, sizeof h))
        fault = "it is cut short";
    else if ((uint32_t)crc32(0, (const Bytef *)ie, (uInt)(h.count * sizeof *ie)) != h.crc)
        fault = "it fails its checksum";
    close(fd);
    if (fault) {
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %s: the index is skipped (%s); the cache "
                   "starts empty", path, fault);
        free(ie);
        return;
    }
    uint64_t skipped = 0;
    for (uint64_t i = 0; i < h.count; i++) {
        const struct index_entry *x = &ie[i];
        struct record r;
        int32_t *tokens = NULL;
        size_t tok_bytes = (size_t)x->n_tokens * sizeof *tokens;
        int ok = x->n_tokens > 0 && x->n_tokens < (1 << 26) && x->off + x->span <= d->quota &&
                 x->span == sizeof r + tok_bytes + x->size &&
                 !read_all(d->fd, &r, sizeof r, x->off) &&
                 !memcmp(r.magic, RECORD_MAGIC, sizeof r.magic) && r.n_tokens == x->n_tokens &&
                 r.size == x->size && r.crc_tokens == x->crc_tokens && r.crc_blob == x->crc_blob &&
                 (tokens = malloc(tok_bytes)) && !read_all(d->fd, tokens, tok_bytes, x->off + sizeof r) &&
                 (uint32_t)crc32(0, (const Bytef *)tokens, (uInt)tok_bytes) == x->crc_tokens;
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
            skipped++;
            continue;
        }
        d->e[d->n++] = (struct entry){.tokens = tokens, .n = (int32_t)x->n_tokens,
                                      .id = ++d->next_id,
                                      .cls = (int)x->cls, .off = x->off, .span = x->span,
                                      .size = x->size, .crc_tokens = x->crc_tokens,
                                      .crc_blob = x->crc_blob, .used = ++d->clock};
        d->st.used += x->span;
        d->st.taken_back++;
    }
    free(ie);
    if (skipped) {
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %llu of the %llu entries %s lists are "
                   "skipped: damaged, cut short or past the quota",
                   (unsigned long long)skipped, (unsigned long long)h.count, path);
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
        if (ftruncate(d->fd, 0) != 0)
            splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %s/data: %s", d->persist,
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
    uint64_t quota = o->quota > 0 ? (uint64_t)o->quota : auto_quota(dir, why, why_size);
    if (!quota)
        return SPLASH_OK;
    struct splash_disk_cache *d = calloc(1, sizeof *d);
    if (!d)
        return SPLASH_ERR_NOMEM;
    if (o->persist_dir) {
        char path[600];
        snprintf(path, sizeof path, "%s/data", o->persist_dir);
        d->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        snprintf(d->persist, sizeof d->persist, "%s", o->persist_dir);
    } else {
        d->fd = open_file(dir);
    }
    if (d->fd < 0) {
        snprintf(why, why_size, "no file in %s: %s", dir, strerror(errno));
        free(d);
        return SPLASH_OK;
    }
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->quota = quota;
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
            d->persist, d->quota > d->st.used ? d->quota - d->st.used : 0);
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
    for (size_t i = 0; i < d->n; i++)
        free(d->e[i].tokens);
    free(d->e);
    close(d->fd);
    free(d);
}

/* The entry at tokens[0..n), written or (with pending) still being written. */
static struct entry *find_any(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                              int pending)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].n == n && (pending || !d->e[i].pending) &&
            !memcmp(d->e[i].tokens, tokens, (size_t)n * sizeof *tokens))
            return &d->e[i];
    return NULL;
}

static struct entry *find(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    return find_any(d, tokens, n, 0);
}

static void drop(struct splash_disk_cache *d, struct entry *x)
{
    d->st.used -= x->span;
    free(x->tokens);
    *x = d->e[--d->n];
}

static int by_offset(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a, *y = *(const struct entry *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The first gap of span bytes in [0, quota), or -1. */
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

/* The entry room goes from first: checkpoints before turn points, the least recently
 * used first. */
static struct entry *victim(struct splash_disk_cache *d)
{
    struct entry *v = NULL;
    for (size_t i = 0; i < d->n; i++) {
        struct entry *x = &d->e[i];
        if (x->pending || x->reading)
            continue;
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
    if (write_all(w->d->fd, bytes, n, w->at)) {
        w->failed = 1;
        return 1;
    }
    w->crc = (uint32_t)crc32_z(w->crc, bytes, (z_size_t)n);
    w->at += n;
    return 0;
}

/* On the I/O thread: the job's tokens, its bytes as produce hands them, then the record
 * (last: a write cut short leaves no record that claims it). 0 written; 1 the file refused
 * a write; 2 produce failed or handed other than size bytes; 3 cancelled. */
static int run_job(struct splash_disk_cache *d, struct job *j, uint32_t *crc_blob)
{
    size_t tok_bytes = (size_t)j->n * sizeof *j->tokens;
    uint64_t body = j->off + sizeof(struct record) + tok_bytes;
    struct writer w = {.d = d, .j = j, .at = body, .end = body + j->size,
                       .crc = (uint32_t)crc32(0, NULL, 0)};
    errno = 0;
    if (atomic_load(&d->cancel) || atomic_load(&j->cancel))
        return 3;
    if (write_all(d->fd, j->tokens, tok_bytes, j->off + sizeof(struct record)))
        return 1;
    if (j->produce(j->ctx, write_piece, &w) || w.at != w.end)
        return w.failed ? w.failed : 2;
    struct record r = {.n_tokens = j->n, .size = j->size,
                       .crc_tokens = (uint32_t)crc32(0, (const Bytef *)j->tokens,
                                                     (uInt)tok_bytes),
                       .crc_blob = w.crc};
    memcpy(r.magic, RECORD_MAGIC, sizeof r.magic);
    if (write_all(d->fd, &r, sizeof r, j->off))
        return 1;
    *crc_blob = w.crc;
    return 0;
}

/* With the lock held: the job's entry written (or dropped), the job to the done list. */
static void finish(struct splash_disk_cache *d, struct job *j, int fault, uint32_t crc_blob,
                   int err)
{
    struct entry *x = NULL;
    for (size_t i = 0; i < d->n && !x; i++)
        if (d->e[i].id == j->id)
            x = &d->e[i];
    j->ok = fault == 0 && x;
    if (x && !fault) {
        x->pending = 0;
        x->crc_blob = crc_blob;
        d->st.writes++;
        d->st.written_bytes += x->span;
        save_index(d);
    } else if (x) {
        drop(d, x);
    }
    if (fault == 1 && !d->st.closed) {
        /* a full volume or a quota the engine cannot see: keep serving what is there */
        splash_log(SPLASH_LOG_WARN, NULL,
                   "SSD cache · writes stopped: the file in %s refused one (%s); the %zu "
                   "entries it holds are still read",
                   d->dir, strerror(err ? err : ENOSPC), d->n);
        d->st.closed = 1;
    }
    j->next = d->done;
    d->done = j;
}

/* On the I/O thread: a read's span, checked. */
static void run_read(struct splash_disk_cache *d, struct job *j)
{
    if (atomic_load(&d->cancel)) {
        j->fault = "cancelled";
        return;
    }
    if (d->slow_piece > 0) { /* a read as slow as ten pieces' writes */
        double slow = 10 * d->slow_piece;
        struct timespec ts = {(time_t)slow, (long)((slow - (double)(time_t)slow) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (!(j->buf = malloc(j->span)))
        j->fault = "no memory to read it into";
    else if (read_all(d->fd, j->buf, j->span, j->off))
        j->fault = "cut short";
    else
        j->fault = check_span(j->buf, j->n, j->tokens, j->size, j->crc_tokens, j->crc_blob);
    if (!j->fault) {
        size_t head = sizeof(struct record) + (size_t)j->n * sizeof *j->tokens;
        memmove(j->buf, j->buf + head, j->size);
    } else {
        free(j->buf);
        j->buf = NULL;
    }
}

/* With the lock held: a read's entry counted as read, or dropped as damaged. */
static void finish_read(struct splash_disk_cache *d, struct job *j)
{
    struct entry *x = NULL;
    for (size_t i = 0; i < d->n && !x; i++)
        if (d->e[i].id == j->id)
            x = &d->e[i];
    if (x)
        x->reading--;
    if (!j->fault && x) {
        x->used = ++d->clock;
        d->st.hits++;
        d->st.read_bytes += x->span;
    } else if (j->fault && strcmp(j->fault, "cancelled")) {
        splash_log(SPLASH_LOG_WARN, NULL,
                   "SSD cache · the entry of %d tokens at byte %llu is skipped: %s", j->n,
                   (unsigned long long)j->off, j->fault);
        d->st.corrupt++;
        if (x) {
            drop(d, x);
            save_index(d);
        }
    }
    j->next = d->done;
    d->done = j;
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
        d->busy = 1;
        d->busy_expendable = j->expendable && !j->read;
        pthread_mutex_unlock(&d->mu);
        if (j->read) {
            run_read(d, j);
            pthread_mutex_lock(&d->mu);
            d->busy = 0;
            finish_read(d, j);
            pthread_cond_broadcast(&d->idle);
            continue;
        }
        uint32_t crc = 0;
        int fault = run_job(d, j, &crc), err = errno;
        if (!fault && d->persist[0])
            fdatasync(d->fd); /* before an index lists it */
        pthread_mutex_lock(&d->mu);
        d->busy = 0;
        finish(d, j, fault, crc, err);
        pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int splash_disk_cache_put_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx,
                                splash_disk_done_fn done, void *done_ctx, int expendable)
{
    if (!d || n <= 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    int queued = 0;
    uint64_t span = sizeof(struct record) + (uint64_t)n * sizeof *tokens + size;
    struct entry *have = find_any(d, tokens, n, 1);
    struct job *j = NULL;
    int64_t off = -1;
    if (d->st.closed || have) {
        if (have)
            have->used = ++d->clock;
        goto out;
    }
    if (span > d->quota) {
        d->st.refused_room++;
        goto out;
    }
    if (!budget_allows(d, span)) {
        d->st.refused_budget++;
        goto out;
    }
    /* other namespaces nobody holds give up their room first, the least recently used
     * first, before this cache drops a copy of its own */
    if (d->persist[0] && d->others && d->st.used + span + d->others > d->quota)
        d->others = splash_cache_namespace_trim_others(
            d->persist, d->quota > d->st.used + span ? d->quota - d->st.used - span : 0);
    int dropped_any = 0;
    while ((off = gap(d, span)) < 0) {
        struct entry *v = victim(d);
        if (!v) {
            d->st.refused_room++;
            goto out;
        }
        drop(d, v);
        dropped_any = 1;
    }
    if (dropped_any)
        save_index(d); /* written before the job: no index lists a place written over */
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        struct entry *e = realloc(d->e, cap * sizeof *e);
        if (!e)
            goto out;
        d->e = e;
        d->cap = cap;
    }
    struct entry x = {.n = n, .cls = cls, .off = (uint64_t)off, .span = span, .size = size,
                      .id = ++d->next_id, .pending = 1};
    x.tokens = malloc((size_t)n * sizeof *tokens);
    j = calloc(1, sizeof *j);
    if (j)
        j->tokens = malloc((size_t)n * sizeof *tokens);
    if (!x.tokens || !j || !j->tokens) {
        free(x.tokens);
        if (j)
            free(j->tokens);
        free(j);
        goto out;
    }
    memcpy(x.tokens, tokens, (size_t)n * sizeof *tokens);
    memcpy(j->tokens, tokens, (size_t)n * sizeof *tokens);
    x.crc_tokens = (uint32_t)crc32(0, (const Bytef *)tokens, (uInt)((size_t)n * sizeof *tokens));
    x.used = ++d->clock;
    d->e[d->n++] = x;
    d->st.used += span;
    *j = (struct job){.id = x.id, .off = x.off, .size = size, .tokens = j->tokens, .n = n,
                      .produce = produce, .ctx = ctx, .done = done, .done_ctx = done_ctx,
                      .expendable = expendable};
    if (d->queue_tail)
        d->queue_tail->next = j;
    else
        d->queue = j;
    d->queue_tail = j;
    pthread_cond_signal(&d->work);
    queued = 1;
out:
    pthread_mutex_unlock(&d->mu);
    return queued;
}

int splash_disk_cache_get_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                splash_disk_read_fn got, void *ctx)
{
    if (!d || n <= 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct entry *x = find(d, tokens, n);
    struct job *j = x ? calloc(1, sizeof *j) : NULL;
    if (j && !(j->tokens = malloc((size_t)n * sizeof *tokens))) {
        free(j);
        j = NULL;
    }
    if (j) {
        memcpy(j->tokens, tokens, (size_t)n * sizeof *tokens);
        j->read = 1;
        j->id = x->id;
        j->off = x->off;
        j->span = x->span;
        j->size = x->size;
        j->crc_tokens = x->crc_tokens;
        j->crc_blob = x->crc_blob;
        j->cls = x->cls;
        j->n = n;
        j->got = got;
        j->done_ctx = ctx;
        x->reading++;
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
            j->got(j->done_ctx, j->tokens, j->n, j->buf, j->size, j->cls);
            j->buf = NULL; /* the callback's */
        } else if (j->done) {
            j->done(j->done_ctx, j->ok);
        }
        free(j->buf);
        free(j->tokens);
        free(j);
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
        finish(d, j, 3, 0, 0);
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

int splash_disk_cache_put_with(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx)
{
    struct sync_put s = {0};
    if (!d || n <= 0)
        return 0;
    if (splash_disk_cache_has(d, tokens, n))
        return 1;
    if (!splash_disk_cache_put_async(d, tokens, n, cls, size, produce, ctx, note_done, &s, 0))
        return 0;
    while (!s.done)
        splash_disk_cache_wait(d, 3600.0, 0);
    return s.ok;
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
        if (!x->pending && x->n > best && x->n <= n && (!accept || accept(ctx, x->n)) &&
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

/* What is wrong with an entry's span as read into buf, or NULL. */
static const char *check_span(const char *buf, int32_t n, const int32_t *tokens, uint64_t size,
                              uint32_t crc_tokens, uint32_t crc_blob)
{
    struct record r;
    size_t tok_bytes = (size_t)n * sizeof *tokens;
    memcpy(&r, buf, sizeof r);
    if (memcmp(r.magic, RECORD_MAGIC, sizeof r.magic) || r.n_tokens != n || r.size != size ||
        r.crc_tokens != crc_tokens || r.crc_blob != crc_blob)
        return "its record header is not the one written";
    if ((uint32_t)crc32(0, (const Bytef *)(buf + sizeof r), (uInt)tok_bytes) != crc_tokens ||
        memcmp(buf + sizeof r, tokens, tok_bytes))
        return "its tokens fail their checksum";
    if ((uint32_t)crc32_z(0, (const Bytef *)(buf + sizeof r + tok_bytes), (z_size_t)size) !=
        crc_blob)
        return "its bytes fail their checksum";
    return NULL;
}

void *splash_disk_cache_get(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                            uint64_t *size, int *cls)
{
    if (!d)
        return NULL;
    pthread_mutex_lock(&d->mu); /* held: a write ending moves entries */
    struct entry *x = find(d, tokens, n);
    size_t tok_bytes = (size_t)n * sizeof *tokens;
    char *buf = x ? malloc(sizeof(struct record) + tok_bytes + x->size) : NULL;
    if (!buf) {
        pthread_mutex_unlock(&d->mu);
        return NULL;
    }
    struct record r;
    const char *fault = NULL;
    if (read_all(d->fd, buf, sizeof r + tok_bytes + x->size, x->off))
        fault = "cut short";
    if (!fault)
        fault = check_span(buf, n, tokens, x->size, x->crc_tokens, x->crc_blob);
    if (fault) {
        splash_log(SPLASH_LOG_WARN, NULL,
                   "SSD cache · the entry of %d tokens at byte %llu is skipped: %s", n,
                   (unsigned long long)x->off, fault);
        d->st.corrupt++;
        drop(d, x);
        save_index(d);
        pthread_mutex_unlock(&d->mu);
        free(buf);
        return NULL;
    }
    x->used = ++d->clock;
    d->st.hits++;
    d->st.read_bytes += x->span;
    *size = x->size;
    *cls = x->cls;
    memmove(buf, buf + sizeof r + tok_bytes, x->size);
    pthread_mutex_unlock(&d->mu);
    return buf;
}

void splash_disk_cache_stats(const struct splash_disk_cache *d_, struct splash_disk_stats *s)
{
    struct splash_disk_cache *d = (struct splash_disk_cache *)d_;
    pthread_mutex_lock(&d->mu);
    *s = d->st;
    s->quota = d->quota;
    s->entries = d->n;
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
