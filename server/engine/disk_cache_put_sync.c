/* The SSD tier's waiting puts (tests, tools, and callers with the bytes at hand): a put
 * queued on the I/O thread and waited for, from a producer, one blob, or laid-out pages. */
#include "server/engine/disk_cache_internal.h"

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
