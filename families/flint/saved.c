/* A Flint sequence as bytes (family ABI 1.3 seq_save / seq_load), for the SSD tier of the
 * prefix cache: the shared header naming the layout, then every full layer's pages that
 * hold the tokens, then per sliding layer only the pages its window still reads (from the
 * page of position n - window + 1 on), layer by layer in order. A loaded sequence holds
 * what a live one keeps at least: the window before its end. */
#include <string.h>

#include "families/common/saved_header.h"
#include "families/flint/flint.h"

void flint_saved_layout(const struct flint_model *model, struct saved_layout *l)
{
    const struct flint_config *c = &model->cfg;
    *l = (struct saved_layout){.magic = "SPLFLNT1",
                               .n_fields = 8,
                               .fields = {FLINT_PAGE_TOKENS, (int64_t)model->kv_page_bytes,
                                          model->opts.kv_format, c->n_layers, c->window,
                                          c->n_swa}};
    for (int64_t il = 0; il < c->n_layers; il++)
        if (c->is_swa[il])
            l->fields[6 + il / 64] |= (int64_t)((uint64_t)1 << (il % 64));
}

static struct saved_layout layout_of(const struct flint_model *model)
{
    struct saved_layout l;
    flint_saved_layout(model, &l);
    return l;
}

void flint_window_pages(const struct flint_model *model, int64_t n, int64_t *first,
                        int64_t *last)
{
    int64_t from = n - model->cfg.window + 1;
    *first = from > 0 ? from / FLINT_PAGE_TOKENS : 0;
    *last = n > 0 ? (n - 1) / FLINT_PAGE_TOKENS : -1;
}

static uint64_t saved_bytes(const void *model_, int64_t n_tokens)
{
    const struct flint_model *model = model_;
    struct saved_layout l = layout_of(model);
    int64_t first, last;
    flint_window_pages(model, n_tokens, &first, &last);
    int64_t n_pages = (n_tokens + FLINT_PAGE_TOKENS - 1) / FLINT_PAGE_TOKENS;
    int64_t n_full = model->cfg.n_layers - model->cfg.n_swa;
    return saved_header_bytes(&l) + ((uint64_t)n_full * (uint64_t)n_pages +
                                     (uint64_t)model->cfg.n_swa * (uint64_t)(last - first + 1)) *
                                        model->kv_page_bytes;
}

uint64_t flint_seq_saved_bytes(const struct flint_model *model, int64_t n_tokens)
{
    return saved_bytes(model, n_tokens);
}

/* Layer il's saved pages for n tokens: [*from, *to]. */
static void layer_pages(const struct flint_model *model, int64_t il, int64_t n, int64_t *from,
                        int64_t *to)
{
    flint_window_pages(model, n, from, to);
    if (!model->cfg.is_swa[il])
        *from = 0;
}

enum splash_status flint_seq_save(const struct flint_model *model, const struct flint_seq *seq,
                                  int (*write)(void *ctx, const void *bytes, size_t n), void *ctx,
                                  struct splash_err *err)
{
    struct saved_layout l = layout_of(model);
    int stop = saved_header_write(&l, seq->n_tokens, write, ctx);
    for (int64_t il = 0; il < model->cfg.n_layers && !stop; il++) {
        int64_t from, to;
        layer_pages(model, il, seq->n_tokens, &from, &to);
        for (int64_t p = from; p <= to && !stop; p++) {
            const void *page = seq->pages[il * seq->cap_pages + p];
            if (!page) /* a fork's window reaches past what its source still held */
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "layer %lld lets go of page %lld, which its window reads",
                                      (long long)il, (long long)p);
            stop = write(ctx, page, model->kv_page_bytes);
        }
    }
    return stop ? splash_err_set(err, SPLASH_ERR_IO, "a saved sequence's bytes were not taken")
                : SPLASH_OK;
}

enum splash_status flint_seq_load(struct flint_model *model, const void *buf, uint64_t size,
                                  struct flint_seq **out, struct splash_err *err)
{
    struct saved_layout l = layout_of(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st = saved_header_read(&l, buf, size, model->max_context, saved_bytes, model,
                                              &n_tokens, &p, err);
    if (st)
        return st;
    int64_t first, last;
    flint_window_pages(model, n_tokens, &first, &last);
    struct flint_seq *seq;
    if ((st = flint_seq_blank(model, n_tokens, first, &seq, err)))
        return st;
    for (int64_t il = 0; il < model->cfg.n_layers; il++) {
        int64_t from, to;
        layer_pages(model, il, n_tokens, &from, &to);
        for (int64_t pg = from; pg <= to; pg++, p += model->kv_page_bytes)
            memcpy(seq->pages[il * seq->cap_pages + pg], p, model->kv_page_bytes);
    }
    *out = seq;
    return SPLASH_OK;
}
