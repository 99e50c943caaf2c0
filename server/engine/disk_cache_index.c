/* The SSD tier's persistent index (server.md "Persistent cache"): written whole by the
 * I/O thread and renamed into place once the data it lists is on the disk, and read at a
 * persistent open to take back each point whose records, tokens and chain of pages read
 * as listed, within the quota. */
#include "server/engine/disk_cache_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host_impl.h"

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

/* The index's checksum: its header's counts and layout, then its records. */
static uint32_t index_crc(const struct index_header *h, const void *body, size_t bytes)
{
    uLong crc = crc32(0, (const Bytef *)h, (uInt)offsetof(struct index_header, crc));
    return (uint32_t)crc32_z(crc, (const Bytef *)body, (z_size_t)bytes);
}

/* The index is to be written again (by the I/O thread, before its next write: no index
 * lists a place after it was given to another page or state). With the lock held. */
void disk_cache_save_index(struct splash_disk_cache *d)
{
    if (!d->persist[0])
        return;
    d->index_dirty = 1;
    pthread_cond_signal(&d->work);
}

/* The persistent index, written whole and renamed into place once the data it lists is
 * on the disk (a crash leaves the previous index or this one, never half of one). It
 * lists the points that can be read and the pages written. Called without the lock. */
void disk_cache_write_index(struct splash_disk_cache *d)
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
            if (disk_cache_readable(d, x))
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
    if (fd >= 0 && !disk_cache_write_all(fd, &h, sizeof h, 0) &&
        !disk_cache_write_all(fd, body, bytes, sizeof h) && !fdatasync(fd)) {
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
        disk_cache_read_all(d->pages_fd, &r, sizeof r, slot_at(d, x->slot)) ||
        memcmp(r.magic, PAGE_MAGIC, sizeof r.magic) || r.key != x->key ||
        r.parent != x->parent || r.crc_tokens != x->crc_tokens || r.crc_bytes != x->crc_bytes ||
        disk_cache_read_all(d->pages_fd, tokens, tok_bytes, slot_at(d, x->slot) + sizeof r) ||
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
    if (disk_cache_read_all(fd, h, sizeof *h, 0) ||
        memcmp(h->magic, INDEX_MAGIC, sizeof h->magic) || h->n_pages > (1ull << 32) ||
        h->n_points > (1u << 24))
        fault = "its header is not an index's";
    else if ((*bytes = h->n_pages * sizeof(struct index_page) +
                       h->n_points * sizeof(struct index_point)) +
                 sizeof *h != (uint64_t)file_size(fd))
        fault = "its length is not what its header counts";
    else {
        if (!(*body = malloc(*bytes ? *bytes : 1)) ||
            disk_cache_read_all(fd, *body, *bytes, sizeof *h))
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
void disk_cache_take_back(struct splash_disk_cache *d)
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
                 !disk_cache_read_all(d->fd, &r, sizeof r, x->off) &&
                 !memcmp(r.magic, STATE_MAGIC, sizeof r.magic) && r.n_tokens == x->n_tokens &&
                 r.n_pages == x->n_pages && r.size == x->size &&
                 r.crc_tokens == x->crc_tokens && r.crc_blob == x->crc_blob &&
                 (tokens = malloc(tok_bytes)) &&
                 !disk_cache_read_all(d->fd, tokens, tok_bytes, x->off + sizeof r) &&
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
            disk_cache_release_page(d, s);
        }
    free(body);
    if (skipped || skipped_pages) {
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · %llu of the %llu points and %llu of the "
                   "%llu pages %s lists are skipped: damaged, cut short, their chains not whole, "
                   "or past the quota",
                   (unsigned long long)skipped, (unsigned long long)h.n_points,
                   (unsigned long long)skipped_pages, (unsigned long long)h.n_pages, path);
        disk_cache_write_index(d);
    }
}
