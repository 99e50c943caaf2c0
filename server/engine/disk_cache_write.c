/* The SSD tier's writes (server/engine/disk_cache.h put_parts_async): a point's room
 * found and its job queued on the engine's thread; on the I/O thread its new pages and its
 * state handed by the family a piece at a time straight to the files, records last; and
 * the point made readable (or dropped) when the job ends. */
#include "server/engine/disk_cache_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"
#include "server/engine/cache_namespace.h"

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
    if (disk_cache_write_all(w->fd, bytes, n, w->at)) {
        w->failed = 1;
        return 1;
    }
    w->crc = (uint32_t)crc32_z(w->crc, bytes, (z_size_t)n);
    w->at += n;
    return 0;
}


/* On the I/O thread: len bytes produce hands at off of fd (their CRC in *crc). 0 written,
 * else disk_cache_run_job's fault. */
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
int disk_cache_run_job(struct splash_disk_cache *d, struct job *j)
{
    errno = 0;
    if (atomic_load(&d->cancel) || atomic_load(&j->cancel))
        return 3;
    size_t P = (size_t)d->pg.page_tokens;
    for (int64_t k = 0; k < j->n_checks; k++) {
        struct page_check *c = &j->pages[k];
        uint64_t at = slot_at(d, c->slot);
        const int32_t *tokens = j->tokens + (size_t)c->index * P;
        if (disk_cache_write_all(d->pages_fd, tokens, P * sizeof *tokens,
                                 at + sizeof(struct page_record)))
            return 1;
        int fault = write_produced(d, j, d->pages_fd,
                                   at + sizeof(struct page_record) + P * sizeof *tokens,
                                   d->pg.page_bytes, c->index, &c->crc_bytes);
        if (fault)
            return fault;
        struct page_record r = {.key = c->key, .parent = c->parent,
                                .crc_tokens = c->crc_tokens, .crc_bytes = c->crc_bytes};
        memcpy(r.magic, PAGE_MAGIC, sizeof r.magic);
        if (disk_cache_write_all(d->pages_fd, &r, sizeof r, at))
            return 1;
        j->written += d->pg.slot_bytes;
    }
    size_t tok_bytes = (size_t)j->n * sizeof *j->tokens;
    if (disk_cache_write_all(d->fd, j->tokens, tok_bytes, j->off + sizeof(struct state_record)))
        return 1;
    int fault = write_produced(d, j, d->fd, j->off + sizeof(struct state_record) + tok_bytes,
                               j->size, -1, &j->crc_blob);
    if (fault)
        return fault;
    struct state_record r = {.n_tokens = j->n, .n_pages = (int32_t)j->n_pages, .size = j->size,
                             .crc_tokens = j->crc_tokens, .crc_blob = j->crc_blob};
    memcpy(r.magic, STATE_MAGIC, sizeof r.magic);
    if (disk_cache_write_all(d->fd, &r, sizeof r, j->off))
        return 1;
    j->written += j->span;
    return 0;
}

/* With the lock held: the job's point written (or dropped, and with it every point that
 * counted on a page it was to write), the job to the done list. */
void disk_cache_finish(struct splash_disk_cache *d, struct job *j, int fault, int err)
{
    struct entry *x = disk_cache_by_id(d, j->id);
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
            disk_cache_drop(d, x);
        else
            disk_cache_save_index(d);
    } else if (x) {
        uint64_t id = x->id;
        for (int64_t k = 0; k < j->n_checks; k++)
            disk_cache_page_gone(d, j->pages[k].slot); /* never written: nothing may count on it */
        x = disk_cache_by_id(d, id); /* (disk_cache_page_gone moves entries) */
        if (x) {
            x->pending = 0;
            x->doomed = 1;
            if (!x->reading)
                disk_cache_drop(d, x);
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
        disk_cache_free_job(j);
        return 0;
    }
    memcpy(j->tokens, tokens, tok_bytes);
    for (int64_t i = 0; i < n_pages; i++)
        chain[i] = -1; /* no reference taken yet */
    pthread_mutex_lock(&d->mu);
    int queued = 0;
    uint64_t span = sizeof(struct state_record) + tok_bytes + parts->rest_size;
    struct entry *have = disk_cache_find_any(d, tokens, n, 1);
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
    if (!disk_cache_budget_allows(d, need)) {
        d->st.refused_budget++;
        goto out;
    }
    /* other namespaces nobody holds give up their room first, the least recently used
     * first, before this cache drops a copy of its own */
    if (d->persist[0] && d->others && used_bytes(d) + need + d->others > d->quota)
        d->others = splash_cache_namespace_trim_others(
            d->persist, d->quota > used_bytes(d) + need ? d->quota - used_bytes(d) - need : 0);
    while (used_bytes(d) + need > d->quota || (off = disk_cache_gap(d, span)) < 0) {
        struct entry *v = disk_cache_victim(d);
        if (!v) {
            d->st.refused_room++;
            goto out;
        }
        disk_cache_drop(d, v); /* the index is written before the job: none lists a place reused */
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
                disk_cache_release_page(d, chain[i]);
    pthread_mutex_unlock(&d->mu);
    free(chain);
    free(keys);
    disk_cache_free_job(j);
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
