/* gpt-oss's per-sequence caches. A full layer keeps every position's KV in pages
 * counted by reference, so a fork shares them copy-on-write (a sequence appending into
 * a shared page copies it first). A sliding layer keeps only a ring of ring_pages
 * pages, logical page p in ring page p % ring_pages: the pages of positions its window
 * has passed are written over, so a 131K-token sequence holds a window's worth of KV
 * there. A fork copies the rings; a fork or truncation to n tokens needs the ring to
 * hold the window before n still. */
#include <stdlib.h>
#include <string.h>

#include "families/common/kv_pages.h"
#include "families/gpt_oss/gpt_oss.h"

/* The pages come from the host and are counted in cache_bytes. */
static struct kv_pages pool(struct gptoss_model *model)
{
    return (struct kv_pages){model->host, model->kv_page_bytes, &model->cache_bytes};
}

static void page_unref(struct gptoss_model *model, void *page)
{
    struct kv_pages kp = pool(model);
    kv_page_unref(&kp, page);
}

/* Room for `need` pages per layer in the page table and the sliding views. */
static enum splash_status tables_grow(struct gptoss_model *model, struct gptoss_seq *seq,
                                      int64_t need, struct splash_err *err)
{
    int32_t n_full = model->n_full, n_swa = model->cfg.n_swa;
    if (need <= seq->cap_pages)
        return SPLASH_OK;
    int64_t cap = seq->cap_pages ? seq->cap_pages : 16;
    while (cap < need)
        cap *= 2;
    void **pages = calloc((size_t)n_full * (size_t)cap + 1, sizeof *pages);
    void **view = calloc((size_t)n_swa * (size_t)cap + 1, sizeof *view);
    if (!pages || !view) {
        free(pages);
        free(view);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the KV page table");
    }
    for (int32_t a = 0; a < n_full; a++)
        memcpy(pages + (size_t)a * cap, seq->pages + (size_t)a * seq->cap_pages,
               (size_t)seq->n_pages * sizeof *pages);
    for (int32_t s = 0; s < n_swa; s++)
        for (int64_t p = 0; p < cap; p++)
            view[(size_t)s * cap + p] = seq->ring[(size_t)s * model->ring_pages +
                                                  (size_t)(p % model->ring_pages)];
    model->cache_bytes += ((size_t)cap - (size_t)seq->cap_pages) *
                          (size_t)(n_full + n_swa) * sizeof *pages;
    free(seq->pages);
    free(seq->view);
    seq->pages = pages;
    seq->view = view;
    seq->cap_pages = cap;
    return SPLASH_OK;
}

enum splash_status gptoss_seq_create(struct gptoss_model *model, struct gptoss_seq **out,
                                     struct splash_err *err)
{
    struct gptoss_seq *seq = calloc(1, sizeof *seq);
    size_t n_ring = (size_t)model->cfg.n_swa * (size_t)model->ring_pages;
    if (!seq || !(seq->ring = calloc(n_ring + 1, sizeof *seq->ring))) {
        free(seq);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    struct kv_pages kp = pool(model);
    for (size_t i = 0; i < n_ring; i++)
        if (!(seq->ring[i] = kv_page_alloc(&kp))) {
            gptoss_seq_destroy(model, seq);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the sliding KV");
        }
    enum splash_status st = tables_grow(model, seq, 16, err);
    if (st) {
        gptoss_seq_destroy(model, seq);
        return st;
    }
    *out = seq;
    return SPLASH_OK;
}

static void free_pages(struct gptoss_model *model, struct gptoss_seq *seq, int64_t keep)
{
    for (int32_t a = 0; a < model->n_full; a++)
        for (int64_t p = keep; p < seq->n_pages; p++) {
            page_unref(model, seq->pages[(size_t)a * seq->cap_pages + p]);
            seq->pages[(size_t)a * seq->cap_pages + p] = NULL;
        }
    if (seq->n_pages > keep)
        seq->n_pages = keep;
}

void gptoss_seq_destroy(struct gptoss_model *model, struct gptoss_seq *seq)
{
    if (!seq)
        return;
    if (seq->pages)
        free_pages(model, seq, 0);
    size_t n_ring = (size_t)model->cfg.n_swa * (size_t)model->ring_pages;
    for (size_t i = 0; seq->ring && i < n_ring; i++)
        page_unref(model, seq->ring[i]);
    model->cache_bytes -= (size_t)seq->cap_pages * (size_t)(model->n_full + model->cfg.n_swa) *
                          sizeof *seq->pages;
    free(seq->ring);
    free(seq->pages);
    free(seq->view);
    free(seq);
}

/* Whether the rings of a sequence of `have` tokens still hold the window before
 * position n (n <= have): the ring holds the pages of its last ring_pages. */
static int ring_holds(const struct gptoss_model *model, int64_t have, int64_t n)
{
    if (n == 0 || n == have || model->cfg.n_swa == 0)
        return 1;
    int64_t last = (have - 1) / GPTOSS_PAGE_TOKENS;
    int64_t first = n > model->cfg.window ? (n - model->cfg.window) / GPTOSS_PAGE_TOKENS : 0;
    return first > last - model->ring_pages;
}

enum splash_status gptoss_seq_truncate(struct gptoss_model *model, struct gptoss_seq *seq,
                                       int32_t n_keep, struct splash_err *err)
{
    if (n_keep < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "truncate to %d tokens", n_keep);
    if (n_keep >= seq->n_tokens)
        return SPLASH_OK;
    if (!ring_holds(model, seq->n_tokens, n_keep))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the sliding layers hold the last %d pages of %lld tokens, not "
                              "the window before %d",
                              model->ring_pages, (long long)seq->n_tokens, n_keep);
    free_pages(model, seq, (n_keep + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS);
    seq->n_tokens = n_keep;
    return SPLASH_OK;
}

enum splash_status gptoss_seq_share(struct gptoss_model *model, const struct gptoss_seq *src,
                                    int64_t n_tokens, struct gptoss_seq **out,
                                    struct splash_err *err)
{
    int64_t n_pages = (n_tokens + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS;
    if (n_tokens < 0 || n_pages > src->n_pages)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "a sequence of %lld tokens needs %lld pages, the source holds %lld",
                              (long long)n_tokens, (long long)n_pages, (long long)src->n_pages);
    struct gptoss_seq *seq;
    enum splash_status st = gptoss_seq_create(model, &seq, err);
    if (st)
        return st;
    if ((st = tables_grow(model, seq, n_pages, err))) {
        gptoss_seq_destroy(model, seq);
        return st;
    }
    kv_pages_share(seq->pages, seq->cap_pages, src->pages, src->cap_pages, model->n_full, n_pages);
    seq->n_pages = n_pages;
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}

void gptoss_seq_copy_ring(const struct gptoss_model *model, const struct gptoss_seq *src,
                          int32_t slot, struct gptoss_seq *dst)
{
    for (int32_t i = 0; i < model->ring_pages; i++) {
        size_t at = (size_t)slot * (size_t)model->ring_pages + (size_t)i;
        memcpy(dst->ring[at], src->ring[at], model->kv_page_bytes);
    }
}

enum splash_status gptoss_seq_fork(struct gptoss_model *model, const struct gptoss_seq *src,
                                   int32_t n_tokens, struct gptoss_seq **out,
                                   struct splash_err *err)
{
    if (n_tokens < 0 || n_tokens > src->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "fork of %d tokens from a sequence of %lld",
                              n_tokens, (long long)src->n_tokens);
    if (!ring_holds(model, src->n_tokens, n_tokens))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the sliding layers hold the last %d pages of %lld tokens, not "
                              "the window before %d",
                              model->ring_pages, (long long)src->n_tokens, n_tokens);
    enum splash_status st = gptoss_seq_share(model, src, n_tokens, out, err);
    if (st)
        return st;
    for (int32_t slot = 0; slot < model->cfg.n_swa; slot++)
        gptoss_seq_copy_ring(model, src, slot, *out);
    return SPLASH_OK;
}

enum splash_status gptoss_seq_reserve(struct gptoss_model *model, struct gptoss_seq *seq,
                                      int64_t n_tokens, struct splash_err *err)
{
    int64_t need = (n_tokens + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS;
    enum splash_status st = tables_grow(model, seq, need, err);
    if (st)
        return st;
    /* the page appended into: the sequence's own */
    struct kv_pages kp = pool(model);
    if (seq->n_tokens % GPTOSS_PAGE_TOKENS &&
        (st = kv_pages_own(&kp, seq->pages, seq->cap_pages, model->n_full,
                           seq->n_tokens / GPTOSS_PAGE_TOKENS, err)))
        return st;
    for (int64_t p = seq->n_pages; p < need; p++) {
        if ((st = kv_pages_add(&kp, seq->pages, seq->cap_pages, model->n_full, p, err)))
            return st;
        seq->n_pages = p + 1;
    }
    return SPLASH_OK;
}
