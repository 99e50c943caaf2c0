/* The prefix cache's SSD tier (server/engine/disk_cache.h). */
#include "server/engine/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/host_impl.h"

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

/* The persistent index, written whole and renamed into place once the data it lists is
 * on the disk (a crash leaves the previous index or this one, never half of one). */
static void save_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    struct index_entry *ie = calloc(d->n ? d->n : 1, sizeof *ie);
    if (!ie)
        return;
    for (size_t i = 0; i < d->n; i++)
        ie[i] = (struct index_entry){.n_tokens = d->e[i].n, .cls = d->e[i].cls,
                                     .off = d->e[i].off, .span = d->e[i].span,
                                     .size = d->e[i].size, .crc_tokens = d->e[i].crc_tokens,
                                     .crc_blob = d->e[i].crc_blob};
    struct index_header h = {.count = d->n,
                             .crc = (uint32_t)crc32(0, (const Bytef *)ie,
                                                    (uInt)(d->n * sizeof *ie))};
    memcpy(h.magic, INDEX_MAGIC, sizeof h.magic);
    char tmp[600], path[600];
    snprintf(tmp, sizeof tmp, "%s/index.new", d->persist);
    snprintf(path, sizeof path, "%s/index", d->persist);
    fdatasync(d->fd);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && !write_all(fd, &h, sizeof h, 0) &&
        !write_all(fd, ie, d->n * sizeof *ie, sizeof h) && !fdatasync(fd)) {
        close(fd);
        rename(tmp, path);
    } else if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(ie);
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
        save_index(d);
    }
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
    if (d->persist[0])
        take_back(d);
    *out = d;
    return SPLASH_OK;
}

void splash_disk_cache_close(struct splash_disk_cache *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->e[i].tokens);
    free(d->e);
    close(d->fd);
    free(d);
}

static struct entry *find(struct splash_disk_cache *d, const int32_t *tokens, int32_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].n == n && !memcmp(d->e[i].tokens, tokens, (size_t)n * sizeof *tokens))
            return &d->e[i];
    return NULL;
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
    uint64_t at, end;
    uint32_t crc;
    int failed; /* 1: the file refused a write; 2: more bytes than announced */
};

static int write_piece(void *ctx, const void *bytes, size_t n)
{
    struct writer *w = ctx;
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

int splash_disk_cache_put_with(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx)
{
    if (!d || d->st.closed || n <= 0)
        return 0;
    struct entry *have = find(d, tokens, n);
    if (have) {
        have->used = ++d->clock;
        return 1;
    }
    uint64_t span = sizeof(struct record) + (uint64_t)n * sizeof *tokens + size;
    if (span > d->quota) {
        d->st.refused_room++;
        return 0;
    }
    if (!budget_allows(d, span)) {
        d->st.refused_budget++;
        return 0;
    }
    int64_t off;
    int dropped_any = 0;
    while ((off = gap(d, span)) < 0) {
        struct entry *v = victim(d);
        if (!v) {
            d->st.refused_room++;
            return 0;
        }
        drop(d, v);
        dropped_any = 1;
    }
    if (dropped_any)
        save_index(d); /* no index lists a place before it is written over */
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        struct entry *e = realloc(d->e, cap * sizeof *e);
        if (!e)
            return 0;
        d->e = e;
        d->cap = cap;
    }
    struct entry x = {.n = n, .cls = cls, .off = (uint64_t)off, .span = span, .size = size};
    x.tokens = malloc((size_t)n * sizeof *tokens);
    if (!x.tokens)
        return 0;
    memcpy(x.tokens, tokens, (size_t)n * sizeof *tokens);
    x.crc_tokens = (uint32_t)crc32(0, (const Bytef *)tokens, (uInt)((size_t)n * sizeof *tokens));
    uint64_t body = x.off + sizeof(struct record) + (uint64_t)n * sizeof *tokens;
    struct writer w = {.d = d, .at = body, .end = body + size, .crc = (uint32_t)crc32(0, NULL, 0)};
    errno = 0;
    int bad = write_all(d->fd, tokens, (size_t)n * sizeof *tokens, x.off + sizeof(struct record));
    if (bad)
        w.failed = 1;
    else if (produce(ctx, write_piece, &w) || w.at != w.end)
        bad = 1;
    x.crc_blob = w.crc;
    struct record r = {.n_tokens = n, .size = size, .crc_tokens = x.crc_tokens,
                       .crc_blob = x.crc_blob};
    memcpy(r.magic, RECORD_MAGIC, sizeof r.magic);
    /* the record last: a write cut short leaves no record that claims it */
    if (!bad && write_all(d->fd, &r, sizeof r, x.off))
        bad = 1, w.failed = 1;
    if (bad) {
        if (w.failed == 1) {
            /* a full volume or a quota the engine cannot see: keep serving what is there */
            splash_log(SPLASH_LOG_WARN, NULL,
                       "SSD cache · writes stopped: the file in %s refused one (%s); the %zu "
                       "entries it holds are still read",
                       d->dir, strerror(errno ? errno : ENOSPC), d->n);
            d->st.closed = 1;
        }
        free(x.tokens);
        return 0;
    }
    x.used = ++d->clock;
    d->e[d->n++] = x;
    d->st.used += span;
    d->st.writes++;
    d->st.written_bytes += span;
    save_index(d);
    return 1;
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
    struct entry *x = d ? find(d, tokens, n) : NULL;
    if (x)
        x->used = ++d->clock;
    return x != NULL;
}

int32_t splash_disk_cache_peek(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int (*accept)(void *ctx, int32_t len), void *ctx)
{
    int32_t best = 0;
    for (size_t i = 0; d && i < d->n; i++) {
        const struct entry *x = &d->e[i];
        if (x->n > best && x->n <= n && (!accept || accept(ctx, x->n)) &&
            !memcmp(x->tokens, tokens, (size_t)x->n * sizeof *tokens))
            best = x->n;
    }
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

void *splash_disk_cache_get(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                            uint64_t *size, int *cls)
{
    struct entry *x = d ? find(d, tokens, n) : NULL;
    if (!x)
        return NULL;
    size_t tok_bytes = (size_t)n * sizeof *tokens;
    char *buf = malloc(sizeof(struct record) + tok_bytes + x->size);
    if (!buf)
        return NULL;
    struct record r;
    const char *fault = NULL;
    if (read_all(d->fd, buf, sizeof r + tok_bytes + x->size, x->off))
        fault = "cut short";
    if (!fault) {
        memcpy(&r, buf, sizeof r);
        if (memcmp(r.magic, RECORD_MAGIC, sizeof r.magic) || r.n_tokens != n || r.size != x->size ||
            r.crc_tokens != x->crc_tokens || r.crc_blob != x->crc_blob)
            fault = "its record header is not the one written";
        else if ((uint32_t)crc32(0, (const Bytef *)(buf + sizeof r), (uInt)tok_bytes) !=
                     x->crc_tokens ||
                 memcmp(buf + sizeof r, tokens, tok_bytes))
            fault = "its tokens fail their checksum";
        else if ((uint32_t)crc32_z(0, (const Bytef *)(buf + sizeof r + tok_bytes),
                                   (z_size_t)x->size) != x->crc_blob)
            fault = "its bytes fail their checksum";
    }
    if (fault) {
        splash_log(SPLASH_LOG_WARN, NULL,
                   "SSD cache · the entry of %d tokens at byte %llu is skipped: %s", n,
                   (unsigned long long)x->off, fault);
        d->st.corrupt++;
        drop(d, x);
        save_index(d);
        free(buf);
        return NULL;
    }
    x->used = ++d->clock;
    d->st.hits++;
    d->st.read_bytes += x->span;
    *size = x->size;
    *cls = x->cls;
    memmove(buf, buf + sizeof r + tok_bytes, x->size);
    return buf;
}

void splash_disk_cache_stats(const struct splash_disk_cache *d, struct splash_disk_stats *s)
{
    *s = d->st;
    s->quota = d->quota;
    s->entries = d->n;
    s->budget_left = 0;
    if (d->per_day) {
        double now = mono_now(), cap = (double)d->per_day / 4.0;
        double b = d->bucket + (now - d->bucket_at) * (double)d->per_day / 86400.0;
        s->budget_left = (uint64_t)(b > cap ? cap : b);
    }
}

json_t *splash_disk_cache_status(const struct splash_disk_cache *d, const char *why)
{
    if (!d)
        return json_pack("{s:b, s:s}", "enabled", 0, "why", why ? why : "");
    struct splash_disk_stats s;
    splash_disk_cache_stats(d, &s);
    return json_pack("{s:b, s:b, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:I, s:s}",
                     "enabled", 1, "persistent", d->persist[0] != 0, "taken_back",
                     (json_int_t)s.taken_back, "dir", d->dir, "capacity_bytes",
                     (json_int_t)s.quota, "used_bytes", (json_int_t)s.used, "entries",
                     (json_int_t)s.entries, "writes", (json_int_t)s.writes, "written_bytes",
                     (json_int_t)s.written_bytes, "hits", (json_int_t)s.hits, "read_bytes",
                     (json_int_t)s.read_bytes, "refused_room", (json_int_t)s.refused_room,
                     "refused_budget", (json_int_t)s.refused_budget, "corrupt",
                     (json_int_t)s.corrupt, "write_budget_bytes", (json_int_t)s.budget_left,
                     "writes_per_day", (json_int_t)d->per_day, "writes_gated",
                     s.closed ? "closed" : (d->per_day && s.refused_budget ? "budget" : "no"));
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
    struct entry *x = d ? find((struct splash_disk_cache *)d, tokens, n) : NULL;
    return x ? (int64_t)x->off : -1;
}
