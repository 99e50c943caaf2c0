/* A Flint sequence in parts (family ABI 1.6), for the SSD tier that keeps a prefix's pages
 * once for every restore point along it. A page is every full layer's page at that index:
 * positions stay where they were written there, and their rows rest on the tokens up to
 * them. A sliding layer lets go of the pages its window has passed, so a page of it is
 * not kept for long sequences: the rest holds those layers' window, as seq_save does
 * (a window's pages, not the sequence's). The rest: a header naming the layout (magic
 * SPLFLNR1) and the token count, every full layer's partial last page (when the tokens
 * end inside one), then per sliding layer the pages from position n - window + 1 on. */
#include <string.h>

#include "families/common/saved_header.h"
#include "families/flint/flint.h"

static struct saved_layout rest_layout(const struct flint_model *model)
{
    struct saved_layout l;
    flint_saved_layout(model, &l);
    memcpy(l.magic, "SPLFLNR1", sizeof l.magic);
    return l;
}

static int64_t n_full(const struct flint_model *model)
{
    return model->cfg.n_layers - model->cfg.n_swa;
}

static uint64_t rest_bytes(const void *model_, int64_t n_tokens)
{
    const struct flint_model *model = model_;
    struct saved_layout l = rest_layout(model);
    int64_t first, last;
    flint_window_pages(model, n_tokens, &first, &last);
    int64_t partial = n_tokens % FLINT_PAGE_TOKENS ? n_full(model) : 0;
    return saved_header_bytes(&l) +
           ((uint64_t)partial + (uint64_t)model->cfg.n_swa * (uint64_t)(last - first + 1)) *
               model->kv_page_bytes;
}

uint64_t flint_seq_rest_bytes(const struct flint_model *model, int64_t n_tokens)
{
    return rest_bytes(model, n_tokens);
}

/* Pages [from, to] of the layers that slide (slide) or not, layer by layer in order; a
 * page let go of is refused. */
static enum splash_status write_pages(const struct flint_model *model, const struct flint_seq *seq,
                                      int slide, int64_t from, int64_t to,
                                      int (*write)(void *ctx, const void *bytes, size_t n),
                                      void *ctx, struct splash_err *err)
{
    for (int64_t il = 0; il < model->cfg.n_layers; il++) {
        if (!model->cfg.is_swa[il] != !slide)
            continue;
        for (int64_t p = from; p <= to; p++) {
            const void *page = seq->pages[il * seq->cap_pages + p];
            if (!page) /* a fork's window reaches past what its source still held */
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "layer %lld lets go of page %lld, which is saved",
                                      (long long)il, (long long)p);
            if (write(ctx, page, model->kv_page_bytes))
                return splash_err_set(err, SPLASH_ERR_IO, "a saved page's bytes were not taken");
        }
    }
    return SPLASH_OK;
}

enum splash_status flint_seq_save_page(const struct flint_model *model, const struct flint_seq *seq,
                                       int64_t page,
                                       int (*write)(void *ctx, const void *bytes, size_t n),
                                       void *ctx, struct splash_err *err)
{
    int64_t whole = seq->n_tokens / FLINT_PAGE_TOKENS;
    if (page < 0 || page >= whole)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "page %lld of a sequence of %lld tokens, which fill %lld whole "
                              "pages",
                              (long long)page, (long long)seq->n_tokens, (long long)whole);
    return write_pages(model, seq, 0, page, page, write, ctx, err);
}

enum splash_status flint_seq_save_rest(const struct flint_model *model, const struct flint_seq *seq,
                                       int (*write)(void *ctx, const void *bytes, size_t n),
                                       void *ctx, struct splash_err *err)
{
    struct saved_layout l = rest_layout(model);
    if (saved_header_write(&l, seq->n_tokens, write, ctx))
        return splash_err_set(err, SPLASH_ERR_IO, "a saved rest's bytes were not taken");
    int64_t whole = seq->n_tokens / FLINT_PAGE_TOKENS, first, last;
    enum splash_status st;
    if (seq->n_tokens % FLINT_PAGE_TOKENS &&
        (st = write_pages(model, seq, 0, whole, whole, write, ctx, err)))
        return st;
    flint_window_pages(model, seq->n_tokens, &first, &last);
    return write_pages(model, seq, 1, first, last, write, ctx, err);
}

enum splash_status flint_seq_load_parts(struct flint_model *model, const void *const *pages,
                                        int64_t n_pages, const void *rest, uint64_t rest_size,
                                        struct flint_seq **out, struct splash_err *err)
{
    struct saved_layout l = rest_layout(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st =
        saved_header_read_parts(&l, rest, rest_size, model->max_context, rest_bytes, model,
                                FLINT_PAGE_TOKENS, pages, n_pages, &n_tokens, &p, err);
    if (st)
        return st;
    int64_t whole = n_tokens / FLINT_PAGE_TOKENS, first, last;
    flint_window_pages(model, n_tokens, &first, &last);
    struct flint_seq *seq;
    if ((st = flint_seq_blank(model, n_tokens, first, &seq, err)))
        return st;
    size_t pb = model->kv_page_bytes;
    for (int64_t il = 0, a = 0; il < model->cfg.n_layers; il++) {
        if (model->cfg.is_swa[il])
            continue;
        for (int64_t pg = 0; pg < n_pages; pg++)
            memcpy(seq->pages[il * seq->cap_pages + pg], (const char *)pages[pg] + a * pb, pb);
        if (n_tokens % FLINT_PAGE_TOKENS)
            memcpy(seq->pages[il * seq->cap_pages + whole], p + a * pb, pb);
        a++;
    }
    if (n_tokens % FLINT_PAGE_TOKENS)
        p += (size_t)n_full(model) * pb;
    for (int64_t il = 0; il < model->cfg.n_layers; il++)
        if (model->cfg.is_swa[il])
            for (int64_t pg = first; pg <= last; pg++, p += pb)
                memcpy(seq->pages[il * seq->cap_pages + pg], p, pb);
    *out = seq;
    return SPLASH_OK;
}
