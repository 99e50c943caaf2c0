/* Flint's per-sequence caches: per layer a table of KV pages counted by reference, so a
 * fork shares them copy-on-write (a sequence appending into a shared page copies it
 * first) and a truncation drops the pages past its end. A sliding layer lets go of the
 * pages before its window (less FLINT_SWA_SLACK rows), so a long sequence holds a window's
 * worth of KV there; a fork or truncation to n tokens then needs the window before n. */
#include <stdlib.h>
#include <string.h>

#include "families/common/kv_pages.h"
#include "families/flint/flint.h"

/* The pages come from the host and are counted in cache_bytes. */
static struct kv_pages pool(struct flint_model *model)
{
    return (struct kv_pages){model->host, model->kv_page_bytes, &model->cache_bytes};
}

static void page_unref(struct flint_model *model, void *page)
{
    struct kv_pages kp = pool(model);
    kv_page_unref(&kp, page);
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

/* Whether a sequence whose sliding pages start at page `first` still holds the window
 * before position n (the keys the row at n reads). */
static int window_held(const struct flint_model *model, int64_t first, int64_t n)
{
    int64_t from = n - model->cfg.window + 1;
    return model->cfg.n_swa == 0 || first == 0 || (from > 0 && from / FLINT_PAGE_TOKENS >= first);
}

void flint_seq_release_swa(struct flint_model *model, struct flint_seq *seq)
{
    const struct flint_config *c = &model->cfg;
    int64_t from = seq->n_tokens - c->window - FLINT_SWA_SLACK;
    int64_t keep = from > 0 ? from / FLINT_PAGE_TOKENS : 0;
    if (c->n_swa == 0 || keep <= seq->swa_first)
        return;
    for (int64_t il = 0; il < n_layers(model); il++)
        if (c->is_swa[il])
            for (int64_t p = seq->swa_first; p < keep; p++) {
                page_unref(model, seq->pages[il * seq->cap_pages + p]);
                seq->pages[il * seq->cap_pages + p] = NULL;
            }
    seq->swa_first = keep;
}

int64_t flint_swa_pages(const struct flint_model *model)
{
    int64_t rows = (int64_t)model->cfg.window + FLINT_SWA_SLACK + FLINT_UBATCH;
    return (rows + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS + 1;
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
    if (n_keep > 0 && !window_held(model, seq->swa_first, n_keep))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the sliding layers hold %lld tokens' pages from position %lld, "
                              "not the window before %d",
                              (long long)seq->n_tokens,
                              (long long)(seq->swa_first * FLINT_PAGE_TOKENS), n_keep);
    free_pages(model, seq, (n_keep + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS);
    seq->n_tokens = n_keep;
    if (n_keep == 0)
        seq->swa_first = 0;
    return SPLASH_OK;
}

enum splash_status flint_seq_fork(struct flint_model *model, const struct flint_seq *src,
                                  int32_t n_tokens, struct flint_seq **out, struct splash_err *err)
{
    if (n_tokens < 0 || n_tokens > src->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "fork of %d tokens from a sequence of %lld",
                              n_tokens, (long long)src->n_tokens);
    if (n_tokens > 0 && !window_held(model, src->swa_first, n_tokens))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the sliding layers hold %lld tokens' pages from position %lld, "
                              "not the window before %d",
                              (long long)src->n_tokens,
                              (long long)(src->swa_first * FLINT_PAGE_TOKENS), n_tokens);
    return flint_seq_share(model, src, n_tokens, out, err);
}

enum splash_status flint_seq_share(struct flint_model *model, const struct flint_seq *src,
                                   int64_t n_tokens, struct flint_seq **out, struct splash_err *err)
{
    int64_t n_pages = (n_tokens + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS;
    if (n_tokens < 0 || n_pages > src->n_pages)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a sequence of %lld tokens needs %lld pages, the source holds %lld",
                              (long long)n_tokens, (long long)n_pages, (long long)src->n_pages);
    struct flint_seq *seq;
    enum splash_status st = flint_seq_create(model, &seq, err);
    if (st)
        return st;
    if ((st = table_grow(model, seq, n_pages, err))) {
        flint_seq_destroy(model, seq);
        return st;
    }
    /* a sliding layer's pages before its window are gone (NULL) */
    kv_pages_share(seq->pages, seq->cap_pages, src->pages, src->cap_pages, n_layers(model),
                   n_pages);
    seq->n_pages = n_pages;
    seq->swa_first = n_tokens > 0 && src->swa_first < n_pages ? src->swa_first : 0;
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
    struct kv_pages kp = pool(model);
    if (seq->n_tokens % FLINT_PAGE_TOKENS &&
        (st = kv_pages_own(&kp, seq->pages, seq->cap_pages, n_layers(model),
                           seq->n_tokens / FLINT_PAGE_TOKENS, err)))
        return st;
    for (int64_t p = seq->n_pages; p < need; p++) {
        if ((st = kv_pages_add(&kp, seq->pages, seq->cap_pages, n_layers(model), p, err)))
            return st;
        seq->n_pages = p + 1;
    }
    return SPLASH_OK;
}

enum splash_status flint_seq_blank(struct flint_model *model, int64_t n_tokens, int64_t swa_first,
                                   struct flint_seq **out, struct splash_err *err)
{
    int64_t n_pages = (n_tokens + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS;
    struct flint_seq *seq;
    enum splash_status st = flint_seq_create(model, &seq, err);
    if (st)
        return st;
    if ((st = table_grow(model, seq, n_pages, err))) {
        flint_seq_destroy(model, seq);
        return st;
    }
    struct kv_pages kp = pool(model);
    seq->n_pages = n_pages; /* a failure frees what was allocated (NULL the rest) */
    seq->swa_first = model->cfg.n_swa ? swa_first : 0;
    for (int64_t il = 0; il < n_layers(model); il++)
        for (int64_t p = model->cfg.is_swa[il] ? seq->swa_first : 0; p < n_pages; p++)
            if (!(seq->pages[il * seq->cap_pages + p] = kv_page_alloc(&kp))) {
                flint_seq_destroy(model, seq);
                return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for KV pages");
            }
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}
