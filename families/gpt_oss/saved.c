/* A gpt-oss sequence as bytes (family ABI 1.3 seq_save / seq_load), for the SSD tier of
 * the prefix cache: a header naming the layout, every full layer's pages that hold the
 * tokens, then per sliding layer only the pages its window still reads (the positions
 * from n - window on: a 131K-token sequence saves a window's worth there). A blob is only
 * read back by a model of the same layout and KV format; the header says which. */
#include <stdint.h>
#include <string.h>

#include "families/common/saved_header.h"
#include "families/gpt_oss/gpt_oss.h"

void gptoss_saved_layout(const struct gptoss_model *model, struct saved_layout *l)
{
    *l = (struct saved_layout){
        .magic = "SPLGOSS1",
        .n_fields = 7,
        .fields = {GPTOSS_PAGE_TOKENS, (int64_t)model->kv_page_bytes, model->opts.kv_format,
                   model->n_full, model->cfg.n_swa, model->cfg.window, model->ring_pages}};
}

static struct saved_layout layout_of(const struct gptoss_model *model)
{
    struct saved_layout l;
    gptoss_saved_layout(model, &l);
    return l;
}

void gptoss_window_pages(const struct gptoss_model *model, int64_t n, int64_t *first,
                         int64_t *last)
{
    int64_t w = model->cfg.window;
    *first = n > w ? (n - w) / GPTOSS_PAGE_TOKENS : 0;
    *last = n > 0 ? (n - 1) / GPTOSS_PAGE_TOKENS : -1;
}

static uint64_t saved_bytes(const void *model_, int64_t n_tokens)
{
    const struct gptoss_model *model = model_;
    struct saved_layout l = layout_of(model);
    int64_t first, last;
    gptoss_window_pages(model, n_tokens, &first, &last);
    int64_t n_pages = (n_tokens + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS;
    return saved_header_bytes(&l) +
           ((uint64_t)model->n_full * (uint64_t)n_pages +
            (uint64_t)model->cfg.n_swa * (uint64_t)(last - first + 1)) *
               model->kv_page_bytes;
}

uint64_t gptoss_seq_saved_bytes(const struct gptoss_model *model, int64_t n_tokens)
{
    return saved_bytes(model, n_tokens);
}

void *gptoss_ring_page(const struct gptoss_model *model, const struct gptoss_seq *seq,
                       int32_t slot, int64_t p)
{
    return seq->ring[(size_t)slot * (size_t)model->ring_pages + (size_t)(p % model->ring_pages)];
}

enum splash_status gptoss_seq_save(const struct gptoss_model *model, const struct gptoss_seq *seq,
                                   int (*write)(void *ctx, const void *bytes, size_t n),
                                   void *ctx, struct splash_err *err)
{
    struct saved_layout l = layout_of(model);
    int64_t n_pages = (seq->n_tokens + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS, first, last;
    gptoss_window_pages(model, seq->n_tokens, &first, &last);
    int stop = saved_header_write(&l, seq->n_tokens, write, ctx);
    for (int32_t a = 0; a < model->n_full && !stop; a++)
        for (int64_t p = 0; p < n_pages && !stop; p++)
            stop = write(ctx, seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)p],
                         model->kv_page_bytes);
    for (int32_t slot = 0; slot < model->cfg.n_swa && !stop; slot++)
        for (int64_t p = first; p <= last && !stop; p++)
            stop = write(ctx, gptoss_ring_page(model, seq, slot, p), model->kv_page_bytes);
    return stop ? splash_err_set(err, SPLASH_ERR_IO, "a saved sequence's bytes were not taken")
                : SPLASH_OK;
}

enum splash_status gptoss_seq_load(struct gptoss_model *model, const void *buf, uint64_t size,
                                   struct gptoss_seq **out, struct splash_err *err)
{
    struct saved_layout l = layout_of(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st = saved_header_read(&l, buf, size, model->max_context, saved_bytes,
                                              model, &n_tokens, &p, err);
    if (st)
        return st;
    struct gptoss_seq *seq;
    st = gptoss_seq_create(model, &seq, err);
    if (st)
        return st;
    /* the full layers' pages to hold the tokens, as a step would reserve them */
    if ((st = gptoss_seq_reserve(model, seq, n_tokens, err))) {
        gptoss_seq_destroy(model, seq);
        return st;
    }
    int64_t n_pages = (n_tokens + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS, first, last;
    gptoss_window_pages(model, n_tokens, &first, &last);
    for (int32_t a = 0; a < model->n_full; a++)
        for (int64_t pg = 0; pg < n_pages; pg++, p += model->kv_page_bytes)
            memcpy(seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg], p,
                   model->kv_page_bytes);
    for (int32_t slot = 0; slot < model->cfg.n_swa; slot++)
        for (int64_t pg = first; pg <= last; pg++, p += model->kv_page_bytes)
            memcpy(gptoss_ring_page(model, seq, slot, pg), p, model->kv_page_bytes);
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}
