/* A gpt-oss sequence in parts (family ABI 1.6), for the SSD tier that keeps a prefix's
 * pages once for every restore point along it. A page is every full layer's page at that
 * index: positions stay where they were written there, and their rows rest on the tokens
 * up to them. A sliding layer keeps a ring whose pages are written over as its window
 * moves on, so a page of it is no page of the sequence's: the rest holds those layers'
 * window, as seq_save does (a window's pages, not the sequence's). The rest: a header
 * naming the layout (magic SPLGOSR1) and the token count, every full layer's partial last
 * page (when the tokens end inside one), then per sliding layer the logical pages from
 * position n - window on. */
#include <string.h>

#include "families/common/saved_header.h"
#include "families/gpt_oss/gpt_oss.h"

static struct saved_layout rest_layout(const struct gptoss_model *model)
{
    struct saved_layout l;
    gptoss_saved_layout(model, &l);
    memcpy(l.magic, "SPLGOSR1", sizeof l.magic);
    return l;
}

static uint64_t rest_bytes(const void *model_, int64_t n_tokens)
{
    const struct gptoss_model *model = model_;
    struct saved_layout l = rest_layout(model);
    int64_t first, last;
    gptoss_window_pages(model, n_tokens, &first, &last);
    int64_t partial = n_tokens % GPTOSS_PAGE_TOKENS ? model->n_full : 0;
    return saved_header_bytes(&l) +
           ((uint64_t)partial + (uint64_t)model->cfg.n_swa * (uint64_t)(last - first + 1)) *
               model->kv_page_bytes;
}

uint64_t gptoss_seq_rest_bytes(const struct gptoss_model *model, int64_t n_tokens)
{
    return rest_bytes(model, n_tokens);
}

/* Every full layer's page pg, layer by layer. */
static int write_full_page(const struct gptoss_model *model, const struct gptoss_seq *seq,
                           int64_t pg, int (*write)(void *ctx, const void *bytes, size_t n),
                           void *ctx)
{
    int stop = 0;
    for (int32_t a = 0; a < model->n_full && !stop; a++)
        stop = write(ctx, seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
                     model->kv_page_bytes);
    return stop;
}

enum splash_status gptoss_seq_save_page(const struct gptoss_model *model,
                                        const struct gptoss_seq *seq, int64_t page,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err)
{
    int64_t whole = seq->n_tokens / GPTOSS_PAGE_TOKENS;
    if (page < 0 || page >= whole)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "page %lld of a sequence of %lld tokens, which fill %lld whole "
                              "pages",
                              (long long)page, (long long)seq->n_tokens, (long long)whole);
    return write_full_page(model, seq, page, write, ctx)
               ? splash_err_set(err, SPLASH_ERR_IO, "a saved page's bytes were not taken")
               : SPLASH_OK;
}

enum splash_status gptoss_seq_save_rest(const struct gptoss_model *model,
                                        const struct gptoss_seq *seq,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err)
{
    struct saved_layout l = rest_layout(model);
    int64_t first, last;
    gptoss_window_pages(model, seq->n_tokens, &first, &last);
    int stop = saved_header_write(&l, seq->n_tokens, write, ctx);
    if (!stop && seq->n_tokens % GPTOSS_PAGE_TOKENS)
        stop = write_full_page(model, seq, seq->n_tokens / GPTOSS_PAGE_TOKENS, write, ctx);
    for (int32_t slot = 0; slot < model->cfg.n_swa && !stop; slot++)
        for (int64_t p = first; p <= last && !stop; p++)
            stop = write(ctx, gptoss_ring_page(model, seq, slot, p), model->kv_page_bytes);
    return stop ? splash_err_set(err, SPLASH_ERR_IO, "a saved rest's bytes were not taken")
                : SPLASH_OK;
}

enum splash_status gptoss_seq_load_parts(struct gptoss_model *model, const void *const *pages,
                                         int64_t n_pages, const void *rest, uint64_t rest_size,
                                         struct gptoss_seq **out, struct splash_err *err)
{
    struct saved_layout l = rest_layout(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st =
        saved_header_read_parts(&l, rest, rest_size, model->max_context, rest_bytes, model,
                                GPTOSS_PAGE_TOKENS, pages, n_pages, &n_tokens, &p, err);
    if (st)
        return st;
    int64_t whole = n_tokens / GPTOSS_PAGE_TOKENS, first, last;
    struct gptoss_seq *seq;
    if ((st = gptoss_seq_create(model, &seq, err)))
        return st;
    /* the full layers' pages to hold the tokens, as a step would reserve them */
    if ((st = gptoss_seq_reserve(model, seq, n_tokens, err))) {
        gptoss_seq_destroy(model, seq);
        return st;
    }
    size_t pb = model->kv_page_bytes;
    for (int32_t a = 0; a < model->n_full; a++) {
        for (int64_t pg = 0; pg < n_pages; pg++)
            memcpy(seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
                   (const char *)pages[pg] + (size_t)a * pb, pb);
        if (n_tokens % GPTOSS_PAGE_TOKENS)
            memcpy(seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)whole],
                   p + (size_t)a * pb, pb);
    }
    if (n_tokens % GPTOSS_PAGE_TOKENS)
        p += (size_t)model->n_full * pb;
    gptoss_window_pages(model, n_tokens, &first, &last);
    for (int32_t slot = 0; slot < model->cfg.n_swa; slot++)
        for (int64_t pg = first; pg <= last; pg++, p += pb)
            memcpy(gptoss_ring_page(model, seq, slot, pg), p, pb);
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}
