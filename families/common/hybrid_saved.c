/* A sequence's caches as bytes (family ABI 1.3 seq_save / seq_load), for the SSD tier of
 * the prefix cache: a header that names the layout, then every attention layer's pages
 * that hold the tokens (whole pages), then the GDN states and the conv states. A blob is
 * only read back by a model of the same layout; the header says which. The blank
 * sequence a loader fills is shared with the parts' loader (hybrid_parts.c). */
#include <stdint.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/saved_header.h"

enum splash_status hybrid_seq_blank(struct hybrid_model *model, int64_t n_tokens,
                                    struct hybrid_seq **out, struct splash_err *err)
{
    struct hybrid_seq *seq;
    enum splash_status st = hybrid_seq_create(model, &seq, err);
    if (st)
        return st;
    int64_t n_pages = (n_tokens + model->page_tokens - 1) / model->page_tokens;
    if ((st = hybrid_seq_pages_grow(model, seq, n_pages, err))) {
        hybrid_seq_destroy(model, seq);
        return st;
    }
    for (int64_t pg = 0; pg < n_pages; pg++) {
        seq->n_pages = pg + 1; /* a failure frees what this page's layers got (NULL the rest) */
        for (int32_t a = 0; a < model->cfg.n_attn; a++) {
            void *page = hybrid_page_alloc(model);
            if (!page) {
                hybrid_seq_destroy(model, seq);
                return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for KV pages");
            }
            seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg] = page;
        }
    }
    seq->n_tokens = n_tokens;
    *out = seq;
    return SPLASH_OK;
}

/* The layout a blob states: page size, attention layers, GDN layers and state sizes. */
static struct saved_layout layout_of(const struct hybrid_model *model)
{
    return (struct saved_layout){.magic = "SPLSEQ1",
                                 .n_fields = 6,
                                 .fields = {model->page_tokens, (int64_t)model->kv_page_bytes,
                                            model->cfg.n_attn, model->n_gdn,
                                            (int64_t)model->gdn_state_bytes,
                                            (int64_t)model->conv_state_bytes}};
}

static uint64_t saved_bytes(const void *model_, int64_t n_tokens)
{
    const struct hybrid_model *model = model_;
    struct saved_layout l = layout_of(model);
    int64_t n_pages = (n_tokens + model->page_tokens - 1) / model->page_tokens;
    return saved_header_bytes(&l) +
           (uint64_t)model->cfg.n_attn * (uint64_t)n_pages * model->kv_page_bytes +
           (uint64_t)model->n_gdn * (model->gdn_state_bytes + model->conv_state_bytes);
}

uint64_t hybrid_family_seq_saved_bytes(const void *model, int32_t n_tokens)
{
    return saved_bytes(model, n_tokens);
}

enum splash_status hybrid_family_seq_save(void *model_, const void *seq_,
                                          int (*write)(void *ctx, const void *bytes, size_t n),
                                          void *ctx, struct splash_err *err)
{
    const struct hybrid_model *model = model_;
    const struct hybrid_seq *seq = seq_;
    struct saved_layout l = layout_of(model);
    int64_t n_pages = (seq->n_tokens + model->page_tokens - 1) / model->page_tokens;
    int stop = saved_header_write(&l, seq->n_tokens, write, ctx);
    for (int32_t a = 0; a < model->cfg.n_attn && !stop; a++)
        for (int64_t pg = 0; pg < n_pages && !stop; pg++)
            stop = write(ctx, seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
                         model->kv_page_bytes);
    if (!stop)
        stop = write(ctx, seq->gdn_state, (size_t)model->n_gdn * model->gdn_state_bytes);
    if (!stop)
        stop = write(ctx, seq->conv_state, (size_t)model->n_gdn * model->conv_state_bytes);
    return stop ? splash_err_set(err, SPLASH_ERR_IO, "a saved sequence's bytes were not taken")
                : SPLASH_OK;
}

enum splash_status hybrid_family_seq_load(void *model_, const void *buf, uint64_t size,
                                          void **out, struct splash_err *err)
{
    struct hybrid_model *model = model_;
    struct saved_layout l = layout_of(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st = saved_header_read(&l, buf, size, model->max_context, saved_bytes,
                                              model, &n_tokens, &p, err);
    if (st)
        return st;
    struct hybrid_seq *seq;
    if ((st = hybrid_seq_blank(model, n_tokens, &seq, err)))
        return st;
    int64_t n_pages = seq->n_pages;
    for (int32_t a = 0; a < model->cfg.n_attn; a++)
        for (int64_t pg = 0; pg < n_pages; pg++)
            memcpy(seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
                   p + ((size_t)a * (size_t)n_pages + (size_t)pg) * model->kv_page_bytes,
                   model->kv_page_bytes);
    p += (size_t)model->cfg.n_attn * (size_t)n_pages * model->kv_page_bytes;
    memcpy(seq->gdn_state, p, (size_t)model->n_gdn * model->gdn_state_bytes);
    p += (size_t)model->n_gdn * model->gdn_state_bytes;
    memcpy(seq->conv_state, p, (size_t)model->n_gdn * model->conv_state_bytes);
    *out = seq;
    return SPLASH_OK;
}
