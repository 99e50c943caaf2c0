/* Flint's per-sequence caches: per layer a table of KV pages counted by reference, so a
 * fork shares them copy-on-write (a sequence appending into a shared page copies it
 * first) and a truncation drops the pages past its end. */
#include <stdlib.h>
#include <string.h>

#include "families/flint/flint.h"

/* The reference count sits in a 64-byte header before the page, so the page keeps the
 * alignment and layout the kernels read. */
#define PAGE_HEADER 64

static int32_t *page_refs(void *page)
{
    return (int32_t *)((char *)page - PAGE_HEADER);
}

static void *page_alloc(struct flint_model *model)
{
    char *base = model->host->alloc_aligned(64, PAGE_HEADER + model->kv_page_bytes);
    if (!base)
        return NULL;
    *(int32_t *)base = 1;
    model->cache_bytes += PAGE_HEADER + model->kv_page_bytes;
    return base + PAGE_HEADER;
}

static void page_unref(struct flint_model *model, void *page)
{
    if (!page || --*page_refs(page) > 0)
        return;
    model->cache_bytes -= PAGE_HEADER + model->kv_page_bytes;
    model->host->free_aligned((char *)page - PAGE_HEADER);
}

static int64_t n_layers(const struct flint_model *model)
{
    return model->cfg.n_layers;
}

/* Room for `need` pages per layer in the page table. */
static enum splash_status table_grow(struct flint_model *model, struct flint_seq *seq,
                                     int64_t need, struct splash_err *err)
{
    if (need <= seq->cap_pages)
        return SPLASH_OK;
    int64_t cap = seq->cap_pages ? seq->cap_pages : 16;
    while (cap < need)
        cap *= 2;
    void **pages = calloc((size_t)(n_layers(model) * cap), sizeof *pages);
    if (!pages)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the KV page table");
    for (int64_t il = 0; il < n_layers(model); il++)
        memcpy(pages + il * cap, seq->pages + il * seq->cap_pages,
               (size_t)seq->n_pages * sizeof *pages);
    model->cache_bytes += (size_t)(cap - seq->cap_pages) * (size_t)n_layers(model) * sizeof *pages;
    free(seq->pages);
    seq->pages = pages;
    seq->cap_pages = cap;
    return SPLASH_OK;
}

enum splash_status flint_seq_create(struct flint_model *model, struct flint_seq **out,
                                    struct splash_err *err)
{
    struct flint_seq *seq = calloc(1, sizeof *seq);
    if (!seq)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = table_grow(model, seq, 16, err);
    if (st) {
        free(seq);
        return st;
    }
    *out = seq;
    return SPLASH_OK;
}

static void free_pages(struct flint_model *model, struct flint_seq *seq, int64_t keep)
{
    for (int64_t il = 0; il < n_layers(model); il++)
        for (int64_t p = keep; p < seq->n_pages; p++) {
            page_unref(model, seq->pages[il * seq->cap_pages + p]);
            seq->pages[il * seq->cap_pages + p] = NULL;
        }
    if (seq->n_pages > keep)
        seq->n_pages = keep;
}

void flint_seq_destroy(struct flint_model *model, struct flint_seq *seq)
{
    if (!seq)
        return;
    free_pages(model, seq, 0);
    model->cache_bytes -= (size_t)seq->cap_pages * (size_t)n_layers(model) * sizeof *seq->pages;
    free(seq->pages);
    free(seq);
}

enum splash_status flint_seq_truncate(struct flint_model *model, struct flint_seq *seq,
                                      int32_t n_keep, struct splash_err *err)
{
    if (n_keep < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "truncate to %d tokens", n_keep);
    if (n_keep >= seq->n_tokens)
        return SPLASH_OK;
    free_pages(model, seq, (n_keep + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS);
    seq->n_tokens = n_keep;
    return SPLASH_OK;
}

enum splash_status flint_seq_fork(struct flint_model *model, const struct flint_seq *src,
                                  int32_t n_tokens, struct flint_seq **out, struct splash_err *err)
{
    if (n_tokens < 0 || n_tokens > src->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "fork of %d tokens from a sequence of %lld",
                              n_tokens, (long long)src->n_tokens);
    struct flint_seq *seq;
    enum splash_status st = flint_seq_create(model, &seq, err);
    if (st)
        return st;
    int64_t n_pages = ((int64_t)n_tokens + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS;
    if ((st = table_grow(model, seq, n_pages, err))) {
        flint_seq_destroy(model, seq);
        return st;
    }
    for (int64_t il = 0; il < n_layers(model); il++)
        for (int64_t p = 0; p < n_pages; p++) {
            void *page = src->pages[il * src->cap_pages + p];
            ++*page_refs(page);
            seq->pages[il * seq->cap_pages + p] = page;
        }
    seq->n_pages = n_pages;
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}

enum splash_status flint_seq_reserve(struct flint_model *model, struct flint_seq *seq,
                                     int64_t n_tokens, struct splash_err *err)
{
    int64_t need = (n_tokens + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS;
    enum splash_status st = table_grow(model, seq, need, err);
    if (st)
        return st;
    /* the page appended into: the sequence's own */
    if (seq->n_tokens % FLINT_PAGE_TOKENS) {
        int64_t p = seq->n_tokens / FLINT_PAGE_TOKENS;
        for (int64_t il = 0; il < n_layers(model); il++) {
            void **slot = &seq->pages[il * seq->cap_pages + p];
            if (*page_refs(*slot) == 1)
                continue;
            void *copy = page_alloc(model);
            if (!copy)
                return splash_err_set(err, SPLASH_ERR_NOMEM,
                                      "out of memory copying a shared KV page");
            memcpy(copy, *slot, model->kv_page_bytes);
            page_unref(model, *slot);
            *slot = copy;
        }
    }
    for (int64_t p = seq->n_pages; p < need; p++) {
        for (int64_t il = 0; il < n_layers(model); il++) {
            void *page = page_alloc(model);
            if (!page) {
                while (il-- > 0) {
                    page_unref(model, seq->pages[il * seq->cap_pages + p]);
                    seq->pages[il * seq->cap_pages + p] = NULL;
                }
                return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for KV pages");
            }
            seq->pages[il * seq->cap_pages + p] = page;
        }
        seq->n_pages = p + 1;
    }
    return SPLASH_OK;
}
