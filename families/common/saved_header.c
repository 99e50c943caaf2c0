/* A saved sequence's header: written as the magic, the token count and the layout's
 * fields (8 bytes each, native order: the SSD tier is read back on the machine that wrote
 * it), checked field by field on reading. */
#include <string.h>

#include "families/common/saved_header.h"

size_t saved_header_bytes(const struct saved_layout *l)
{
    return sizeof l->magic + sizeof(int64_t) + (size_t)l->n_fields * sizeof(int64_t);
}

int saved_header_write(const struct saved_layout *l, int64_t n_tokens,
                       int (*write)(void *ctx, const void *bytes, size_t n), void *ctx)
{
    unsigned char h[sizeof l->magic + (1 + SAVED_HEADER_MAX_FIELDS) * sizeof(int64_t)];
    memcpy(h, l->magic, sizeof l->magic);
    memcpy(h + sizeof l->magic, &n_tokens, sizeof n_tokens);
    memcpy(h + sizeof l->magic + sizeof n_tokens, l->fields, (size_t)l->n_fields * sizeof(int64_t));
    return write(ctx, h, saved_header_bytes(l));
}

enum splash_status saved_header_read(const struct saved_layout *l, const void *buf, uint64_t size,
                                     int64_t max_tokens,
                                     uint64_t (*bytes)(const void *model, int64_t n_tokens),
                                     const void *model, int64_t *n_tokens, const char **payload,
                                     struct splash_err *err)
{
    size_t head = saved_header_bytes(l);
    if (size < head)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a saved sequence of %llu bytes is cut short",
                              (unsigned long long)size);
    const char *p = buf;
    int64_t n;
    memcpy(&n, p + sizeof l->magic, sizeof n);
    if (memcmp(p, l->magic, sizeof l->magic) ||
        memcmp(p + sizeof l->magic + sizeof n, l->fields, (size_t)l->n_fields * sizeof(int64_t)))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a saved sequence's header is not this model's layout");
    if (n < 0 || n > max_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a saved sequence of %lld tokens, past this model's %lld",
                              (long long)n, (long long)max_tokens);
    uint64_t want = bytes(model, n);
    if (size != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a saved sequence of %lld tokens has %llu bytes, not %llu",
                              (long long)n, (unsigned long long)size, (unsigned long long)want);
    *n_tokens = n;
    *payload = p + head;
    return SPLASH_OK;
}

enum splash_status saved_header_read_parts(const struct saved_layout *l, const void *rest,
                                           uint64_t rest_size, int64_t max_tokens,
                                           uint64_t (*bytes)(const void *model, int64_t n_tokens),
                                           const void *model, int64_t page_tokens,
                                           const void *const *pages, int64_t n_pages,
                                           int64_t *n_tokens, const char **payload,
                                           struct splash_err *err)
{
    enum splash_status st =
        saved_header_read(l, rest, rest_size, max_tokens, bytes, model, n_tokens, payload, err);
    if (st)
        return st;
    int64_t whole = *n_tokens / page_tokens;
    if (n_pages != whole)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%lld pages for a rest of %lld tokens, which fill %lld",
                              (long long)n_pages, (long long)*n_tokens, (long long)whole);
    for (int64_t pg = 0; pg < n_pages; pg++)
        if (!pages || !pages[pg])
            return splash_err_set(err, SPLASH_ERR_INVALID, "page %lld of %lld is missing",
                                  (long long)pg, (long long)n_pages);
    return SPLASH_OK;
}
