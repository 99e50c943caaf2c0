/* What prefix caching needs of the hybrid trunk (family ABI 1.2): KV pages counted by
 * reference so sequences share a prefix's pages copy-on-write, forks that take a
 * sequence's pages and a copy of its GDN state, and the bytes every cache holds.
 *
 * A page's rows never change once written (each row has its own int8 scale), so a
 * page shared by several sequences is read by all of them and written by none: a
 * sequence that appends into a shared page copies it first (hybrid_page_own). */
#include <stdlib.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/kv_pages.h"

/* The pages come from the host and are counted in cache_bytes. */
static struct kv_pages pool(struct hybrid_model *model)
{
    return (struct kv_pages){model->host, model->kv_page_bytes, &model->cache_bytes};
}

void *hybrid_page_alloc(struct hybrid_model *model)
{
    struct kv_pages kp = pool(model);
    return kv_page_alloc(&kp);
}

void hybrid_page_unref(struct hybrid_model *model, void *page)
{
    struct kv_pages kp = pool(model);
    kv_page_unref(&kp, page);
}

enum splash_status hybrid_page_own(struct hybrid_model *model, struct hybrid_seq *seq, int64_t p,
                                   struct splash_err *err)
{
    struct kv_pages kp = pool(model);
    return kv_pages_own(&kp, seq->pages, seq->cap_pages, model->cfg.n_attn, p, err);
}

enum splash_status hybrid_page_add(struct hybrid_model *model, struct hybrid_seq *seq, int64_t p,
                                   struct splash_err *err)
{
    struct kv_pages kp = pool(model);
    return kv_pages_add(&kp, seq->pages, seq->cap_pages, model->cfg.n_attn, p, err);
}

enum splash_status hybrid_seq_pages_grow(struct hybrid_model *model, struct hybrid_seq *seq,
                                         int64_t need, struct splash_err *err)
{
    int32_t n_attn = model->cfg.n_attn;
    if (need <= seq->cap_pages || n_attn == 0)
        return SPLASH_OK;
    int64_t cap = seq->cap_pages ? seq->cap_pages : 16;
    while (cap < need)
        cap *= 2;
    void **pages = calloc((size_t)n_attn * (size_t)cap, sizeof *pages);
    if (!pages)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the KV page table");
    for (int32_t a = 0; a < n_attn; a++)
        for (int64_t p = 0; p < seq->n_pages; p++)
            pages[(size_t)a * cap + p] = seq->pages[(size_t)a * seq->cap_pages + p];
    model->cache_bytes += ((size_t)cap - (size_t)seq->cap_pages) * (size_t)n_attn * sizeof *pages;
    free(seq->pages);
    seq->pages = pages;
    seq->cap_pages = cap;
    return SPLASH_OK;
}

enum splash_status hybrid_seq_fork(struct hybrid_model *model, const struct hybrid_seq *src,
                                   int32_t n_tokens, struct hybrid_seq **out,
                                   struct splash_err *err)
{
    if (n_tokens < 0 || n_tokens > src->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "fork of %d tokens from a sequence of %lld",
                              n_tokens, (long long)src->n_tokens);
    if (n_tokens != src->n_tokens && model->n_gdn > 0)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the GDN state exists only at the sequence's end (%lld tokens), "
                              "not at %d",
                              (long long)src->n_tokens, n_tokens);
    return hybrid_seq_fork_pages(model, src, n_tokens, out, err);
}

enum splash_status hybrid_seq_fork_pages(struct hybrid_model *model, const struct hybrid_seq *src,
                                         int64_t n_tokens, struct hybrid_seq **out,
                                         struct splash_err *err)
{
    struct hybrid_seq *seq;
    enum splash_status st = hybrid_seq_create(model, &seq, err);
    if (st)
        return st;
    int64_t n_pages = ((int64_t)n_tokens + model->page_tokens - 1) / model->page_tokens;
    if ((st = hybrid_seq_pages_grow(model, seq, n_pages, err))) {
        hybrid_seq_destroy(model, seq);
        return st;
    }
    kv_pages_share(seq->pages, seq->cap_pages, src->pages, src->cap_pages, model->cfg.n_attn,
                   n_pages);
    seq->n_pages = n_pages;
    seq->n_tokens = n_tokens;
    size_t n_gdn = (size_t)model->n_gdn;
    memcpy(seq->gdn_state, src->gdn_state, n_gdn * model->gdn_state_bytes);
    memcpy(seq->conv_state, src->conv_state, n_gdn * model->conv_state_bytes);
    *out = seq;
    return SPLASH_OK;
}

uint64_t hybrid_cache_bytes(const struct hybrid_model *model)
{
    return model->cache_bytes;
}
