/* The SSD tier's reads (server/engine/disk_cache.h get_async, get_parts): a point's
 * pages then state read back and each checked against what was written; a damaged page
 * drops every point whose chain holds it. */
#include "server/engine/disk_cache_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"

/* What is wrong with the page c as read at its slot (its bytes into out), or NULL. */
static const char *read_page(struct splash_disk_cache *d, const struct page_check *c,
                             const int32_t *tokens, char *out, int32_t *scratch)
{
    struct page_record r;
    size_t tok_bytes = (size_t)d->pg.page_tokens * sizeof *tokens;
    uint64_t at = slot_at(d, c->slot);
    if (disk_cache_read_all(d->pages_fd, &r, sizeof r, at) ||
        disk_cache_read_all(d->pages_fd, scratch, tok_bytes, at + sizeof r) ||
        disk_cache_read_all(d->pages_fd, out, d->pg.page_bytes, at + sizeof r + tok_bytes))
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
    if (disk_cache_read_all(d->fd, &r, sizeof r, j->off) ||
        disk_cache_read_all(d->fd, tokens, tok_bytes, j->off + sizeof r) ||
        disk_cache_read_all(d->fd, out, j->size, j->off + sizeof r + tok_bytes))
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
void disk_cache_run_read(struct splash_disk_cache *d, struct job *j)
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
void disk_cache_finish_read(struct splash_disk_cache *d, struct job *j)
{
    struct entry *x = disk_cache_by_id(d, j->id);
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
            size_t gone = disk_cache_page_gone(d, slot);
            splash_log(SPLASH_LOG_WARN, NULL,
                       "SSD cache · page %lld of the point of %d tokens (slot %lld, byte %llu "
                       "of the pages file) is skipped: %s; the %zu points whose chains hold it "
                       "are dropped",
                       (long long)j->bad_page, j->n, (long long)slot,
                       (unsigned long long)slot_at(d, slot), j->fault, gone);
            x = disk_cache_by_id(d, id);
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
        disk_cache_drop(d, x);
}

/* A read job for x (its chain's pages as the table has them), or NULL. With the lock. */
struct job *disk_cache_read_job(struct splash_disk_cache *d, struct entry *x)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->tokens = malloc((size_t)x->n * sizeof *x->tokens);
    j->pages = calloc((size_t)(x->n_pages ? x->n_pages : 1), sizeof *j->pages);
    if (!j->tokens || !j->pages) {
        disk_cache_free_job(j);
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
    struct entry *x = disk_cache_find(d, tokens, n);
    struct job *j = x ? disk_cache_read_job(d, x) : NULL;
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

void *splash_disk_cache_get_parts(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                  int64_t *n_pages, uint64_t *rest_size, int *cls)
{
    if (!d)
        return NULL;
    pthread_mutex_lock(&d->mu);
    struct entry *x = disk_cache_find(d, tokens, n);
    struct job *j = x ? disk_cache_read_job(d, x) : NULL;
    pthread_mutex_unlock(&d->mu);
    if (!j)
        return NULL;
    disk_cache_run_read(d, j); /* its point is reading: its slots stay as they are */
    pthread_mutex_lock(&d->mu);
    disk_cache_finish_read(d, j);
    pthread_mutex_unlock(&d->mu);
    void *buf = j->buf;
    j->buf = NULL;
    if (buf) {
        *n_pages = j->n_pages;
        *rest_size = j->size;
        *cls = j->cls;
    }
    disk_cache_free_job(j);
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
