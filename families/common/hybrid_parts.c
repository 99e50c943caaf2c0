/* A sequence's caches in parts (family ABI 1.6), for the SSD tier of the prefix cache:
 * each whole page (every attention layer's page at that index, layer by layer) kept once
 * for every restore point whose tokens begin with it, and a rest per point. A page's rows
 * are written once, from the tokens up to them only (each int8 row has its own scale),
 * so its bytes rest on those tokens as they were computed: the chunked delta rule counts
 * its 64-row chunks from a call's (a run's) start and a decode step runs the plain
 * recurrence, so the same tokens prefilled with chunks that start elsewhere, or decoded,
 * give other last bits (the prefill plan starts them in the same places for the same
 * tokens). The rest: a header naming the layout and the token count, every attention
 * layer's partial last page (when the tokens end inside one), then the GDN states and
 * the conv states. */
#include <stdint.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/saved_header.h"

/* The layout a rest states: page size and bytes, KV and state formats, attention layers,
 * GDN layers and state sizes. */
static struct saved_layout rest_layout(const struct hybrid_model *model)
{
    return (struct saved_layout){
        .magic = "SPLREST1",
        .n_fields = 8,
        .fields = {model->page_tokens, (int64_t)model->kv_page_bytes, model->opts.kv_format,
                   model->opts.state_format, model->cfg.n_attn, model->n_gdn,
                   (int64_t)model->gdn_state_bytes, (int64_t)model->conv_state_bytes}};
}

/* Bytes of all attention layers' page at one index (model_info.kv_page_bytes). */
static size_t page_bytes(const struct hybrid_model *model)
{
    return (size_t)model->cfg.n_attn * model->kv_page_bytes;
}

static uint64_t rest_bytes(const void *model_, int64_t n_tokens)
{
    const struct hybrid_model *model = model_;
    struct saved_layout l = rest_layout(model);
    int partial = n_tokens % model->page_tokens != 0;
    return saved_header_bytes(&l) + (partial ? page_bytes(model) : 0) +
           (uint64_t)model->n_gdn * (model->gdn_state_bytes + model->conv_state_bytes);
}

uint64_t hybrid_family_seq_rest_bytes(const void *model, int32_t n_tokens)
{
    return rest_bytes(model, n_tokens);
}

/* Every attention layer's page pg of seq, layer by layer. */
static int write_page(const struct hybrid_model *model, const struct hybrid_seq *seq, int64_t pg,
                      int (*write)(void *ctx, const void *bytes, size_t n), void *ctx)
{
    int stop = 0;
    for (int32_t a = 0; a < model->cfg.n_attn && !stop; a++)
        stop = write(ctx, seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
                     model->kv_page_bytes);
    return stop;
}

enum splash_status hybrid_family_seq_save_page(void *model_, const void *seq_, int64_t page,
                                               int (*write)(void *ctx, const void *bytes, size_t n),
                                               void *ctx, struct splash_err *err)
{
    const struct hybrid_model *model = model_;
    const struct hybrid_seq *seq = seq_;
    int64_t whole = seq->n_tokens / model->page_tokens;
    if (page < 0 || page >= whole)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "page %lld of a sequence of %lld tokens, which fill %lld whole "
                              "pages",
                              (long long)page, (long long)seq->n_tokens, (long long)whole);
    return write_page(model, seq, page, write, ctx)
               ? splash_err_set(err, SPLASH_ERR_IO, "a saved page's bytes were not taken")
               : SPLASH_OK;
}

enum splash_status hybrid_family_seq_save_rest(void *model_, const void *seq_,
                                               int (*write)(void *ctx, const void *bytes, size_t n),
                                               void *ctx, struct splash_err *err)
{
    const struct hybrid_model *model = model_;
    const struct hybrid_seq *seq = seq_;
    struct saved_layout l = rest_layout(model);
    int stop = saved_header_write(&l, seq->n_tokens, write, ctx);
    if (!stop && seq->n_tokens % model->page_tokens)
        stop = write_page(model, seq, seq->n_tokens / model->page_tokens, write, ctx);
    if (!stop)
        stop = write(ctx, seq->gdn_state, (size_t)model->n_gdn * model->gdn_state_bytes);
    if (!stop)
        stop = write(ctx, seq->conv_state, (size_t)model->n_gdn * model->conv_state_bytes);
    return stop ? splash_err_set(err, SPLASH_ERR_IO, "a saved rest's bytes were not taken")
                : SPLASH_OK;
}

/* seq's page pg of every attention layer from src (layer by layer, as write_page). */
static void fill_page(const struct hybrid_model *model, struct hybrid_seq *seq, int64_t pg,
                      const char *src)
{
    for (int32_t a = 0; a < model->cfg.n_attn; a++)
        memcpy(seq->pages[(size_t)a * (size_t)seq->cap_pages + (size_t)pg],
               src + (size_t)a * model->kv_page_bytes, model->kv_page_bytes);
}

enum splash_status hybrid_family_seq_load_parts(void *model_, const void *const *pages,
                                                int64_t n_pages, const void *rest,
                                                uint64_t rest_size, void **out,
                                                struct splash_err *err)
{
    struct hybrid_model *model = model_;
    struct saved_layout l = rest_layout(model);
    int64_t n_tokens;
    const char *p;
    enum splash_status st =
        saved_header_read_parts(&l, rest, rest_size, model->max_context, rest_bytes, model,
                                model->page_tokens, pages, n_pages, &n_tokens, &p, err);
    if (st)
        return st;
    int64_t whole = n_tokens / model->page_tokens;
    struct hybrid_seq *seq;
    if ((st = hybrid_seq_blank(model, n_tokens, &seq, err)))
        return st;
    for (int64_t pg = 0; pg < n_pages; pg++)
        fill_page(model, seq, pg, pages[pg]);
    if (n_tokens % model->page_tokens) {
        fill_page(model, seq, whole, p);
        p += page_bytes(model);
    }
    memcpy(seq->gdn_state, p, (size_t)model->n_gdn * model->gdn_state_bytes);
    p += (size_t)model->n_gdn * model->gdn_state_bytes;
    memcpy(seq->conv_state, p, (size_t)model->n_gdn * model->conv_state_bytes);
    *out = seq;
    return SPLASH_OK;
}
