/* Building a gpt-oss model over mapped tensors, and what it tells the core. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/gpt_oss/gpt_oss.h"

static const struct splash_tensor_info *find(struct gptoss_model *model, int32_t il,
                                             const char *name, struct splash_err *err)
{
    const struct splash_meta_api *api = model->host->meta;
    char full[96];
    if (il >= 0)
        snprintf(full, sizeof full, "blk.%d.%s", il, name);
    else
        snprintf(full, sizeof full, "%s", name);
    const struct splash_tensor_info *t = api->tensor_find(model->meta, full);
    if (!t)
        splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: tensor %s is missing",
                       api->path(model->meta), full);
    else if (!t->data)
        splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s is not mapped",
                       api->path(model->meta), full);
    return t && t->data ? t : NULL;
}

/* A weight of exactly this shape (ne2 = 1 for a matrix). */
static enum splash_status load_weight(struct gptoss_model *model, int32_t il, const char *name,
                                      int64_t ne0, int64_t ne1, int64_t ne2,
                                      struct splash_weight **out, struct splash_err *err)
{
    const struct splash_tensor_info *t = find(model, il, name, err);
    if (!t)
        return SPLASH_ERR_NOT_FOUND;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s is %lldx%lldx%lld, expected %lldx%lldx%lld",
                              model->host->meta->path(model->meta), t->name, (long long)t->ne[0],
                              (long long)t->ne[1], (long long)t->ne[2], (long long)ne0,
                              (long long)ne1, (long long)ne2);
    model->weight_bytes += t->n_bytes;
    return model->k->weight_create(t, out, err);
}

/* A small tensor of n values as floats (norms, biases, sinks). */
static enum splash_status load_floats(struct gptoss_model *model, int32_t il, const char *name,
                                      int64_t n, float **out, struct splash_err *err)
{
    const struct splash_tensor_info *t = find(model, il, name, err);
    if (!t)
        return SPLASH_ERR_NOT_FOUND;
    int64_t have = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (have != n)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s holds %lld values, expected %lld",
                              model->host->meta->path(model->meta), t->name, (long long)have,
                              (long long)n);
    if (!t->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: type %s has no format",
                              model->host->meta->path(model->meta), t->name, t->type_name);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", t->name);
    model->k->to_float(t, v);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            free(v);
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%lld] is not finite",
                                  model->host->meta->path(model->meta), t->name, (long long)i);
        }
    model->weight_bytes += t->n_bytes;
    *out = v;
    return SPLASH_OK;
}

static enum splash_status load_layer(struct gptoss_model *model, int32_t il,
                                     struct splash_err *err)
{
    const struct gptoss_config *c = &model->cfg;
    struct gptoss_layer *L = &model->layers[il];
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, x = c->n_expert, ff = c->n_ff_exp;
    enum splash_status st;
    if ((st = load_floats(model, il, "attn_norm.weight", e, &L->attn_norm, err)) ||
        (st = load_floats(model, il, "post_attention_norm.weight", e, &L->post_norm, err)) ||
        (st = load_weight(model, il, "attn_q.weight", e, qd, 1, &L->wq, err)) ||
        (st = load_weight(model, il, "attn_k.weight", e, kvd, 1, &L->wk, err)) ||
        (st = load_weight(model, il, "attn_v.weight", e, kvd, 1, &L->wv, err)) ||
        (st = load_weight(model, il, "attn_output.weight", qd, e, 1, &L->wo, err)) ||
        (st = load_floats(model, il, "attn_q.bias", qd, &L->bq, err)) ||
        (st = load_floats(model, il, "attn_k.bias", kvd, &L->bk, err)) ||
        (st = load_floats(model, il, "attn_v.bias", kvd, &L->bv, err)) ||
        (st = load_floats(model, il, "attn_output.bias", e, &L->bo, err)) ||
        (st = load_floats(model, il, "attn_sinks.weight", c->n_head, &L->sinks, err)) ||
        (st = load_weight(model, il, "ffn_gate_inp.weight", e, x, 1, &L->router, err)) ||
        (st = load_floats(model, il, "ffn_gate_inp.bias", x, &L->b_router, err)) ||
        (st = load_weight(model, il, "ffn_gate_exps.weight", e, ff, x, &L->gate, err)) ||
        (st = load_weight(model, il, "ffn_up_exps.weight", e, ff, x, &L->up, err)) ||
        (st = load_weight(model, il, "ffn_down_exps.weight", ff, e, x, &L->down, err)) ||
        (st = load_floats(model, il, "ffn_gate_exps.bias", ff * x, &L->b_gate, err)) ||
        (st = load_floats(model, il, "ffn_up_exps.bias", ff * x, &L->b_up, err)) ||
        (st = load_floats(model, il, "ffn_down_exps.bias", e * x, &L->b_down, err)))
        return st;
    return SPLASH_OK;
}

enum splash_status gptoss_model_create(const struct splash_host *host, const struct splash_meta *m,
                                       const struct splash_model_opts *opts,
                                       struct gptoss_model **out, struct splash_err *err)
{
    struct gptoss_model *model = calloc(1, sizeof *model);
    if (!model)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    model->host = host;
    model->k = host->kernels;
    model->meta = m;
    model->opts = *opts;
    enum splash_status st = gptoss_config_read(host, m, &model->cfg, err);
    if (st)
        goto out_destroy;
    const struct gptoss_config *c = &model->cfg;
    const char *path = host->meta->path(m);
    if (opts->kv_format != SPLASH_KV_INT8 && opts->kv_format != SPLASH_KV_BF16 &&
        opts->kv_format != SPLASH_KV_F16 && opts->kv_format != SPLASH_KV_F32) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: kv format %d", path, opts->kv_format);
        goto out_destroy;
    }
    /* the header's YaRN already stretches RoPE to the native window: no more */
    if (opts->rope_yarn_factor > 1.0 || opts->max_context > c->n_ctx_train) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                            "%s: a context of %lld tokens: gpt-oss serves at most its native "
                            "%lld (its header's YaRN is fixed)",
                            path, (long long)opts->max_context, (long long)c->n_ctx_train);
        goto out_destroy;
    }
    model->layers = calloc((size_t)c->n_layers, sizeof *model->layers);
    if (!model->layers) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_destroy;
    }
    model->tok_embd = find(model, -1, "token_embd.weight", err);
    if (!model->tok_embd) {
        st = SPLASH_ERR_NOT_FOUND;
        goto out_destroy;
    }
    model->weight_bytes += model->tok_embd->n_bytes;
    if ((st = load_floats(model, -1, "output_norm.weight", c->n_embd, &model->output_norm, err)))
        goto out_destroy;
    if (c->tied)
        st = model->k->weight_create(model->tok_embd, &model->output, err);
    else
        st = load_weight(model, -1, "output.weight", c->n_embd, c->n_vocab, 1, &model->output, err);
    if (st)
        goto out_destroy;
    int32_t n_full = 0, n_swa = 0;
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        model->layers[il].slot = c->is_swa[il] ? n_swa++ : n_full++;
        if ((st = load_layer(model, il, err)))
            goto out_destroy;
    }
    model->n_full = n_full;
    model->max_context = opts->max_context > 0 ? opts->max_context : c->n_ctx_train;
    model->kv_page_bytes = model->k->kv_page_bytes(opts->kv_format, GPTOSS_PAGE_TOKENS,
                                                   c->n_head_kv, c->head_dim);
    /* the pages a block of GPTOSS_SWA_ROWS rows and the window before its first row span */
    int64_t ring = (c->window + GPTOSS_SWA_ROWS - 2 + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS + 1;
    /* a context shorter than that never wraps: its pages, no more */
    int64_t all = (model->max_context + GPTOSS_PAGE_TOKENS - 1) / GPTOSS_PAGE_TOKENS;
    model->ring_pages = (int32_t)(ring < all ? ring : all);
    *out = model;
    return SPLASH_OK;

out_destroy:
    gptoss_model_destroy(model);
    return st;
}

void gptoss_model_destroy(struct gptoss_model *model)
{
    if (!model)
        return;
    const struct splash_kernels *k = model->k;
    if (model->layers) {
        for (int64_t il = 0; il < model->cfg.n_layers; il++) {
            struct gptoss_layer *L = &model->layers[il];
            float *floats[] = {L->attn_norm, L->post_norm, L->bq,     L->bk,   L->bv,    L->bo,
                               L->sinks,     L->b_router,  L->b_gate, L->b_up, L->b_down};
            for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
                free(floats[i]);
            struct splash_weight *w[] = {L->wq,     L->wk,   L->wv, L->wo,
                                         L->router, L->gate, L->up, L->down};
            for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
                k->weight_destroy(w[i]);
        }
        free(model->layers);
    }
    k->weight_destroy(model->output);
    free(model->output_norm);
    model->host->free_aligned(model->step_arena.p);
    model->host->free_aligned(model->moe_arena.p);
    model->host->free_aligned(model->logits.p);
    free(model);
}

void gptoss_model_info(const struct gptoss_model *model, struct splash_model_info *info)
{
    const struct gptoss_config *c = &model->cfg;
    memset(info, 0, sizeof *info);
    info->n_vocab = c->n_vocab;
    info->n_embd = c->n_embd;
    info->n_layers = c->n_layers;
    info->n_ctx_train = c->n_ctx_train;
    info->weight_bytes = model->weight_bytes;
    /* only the full layers' KV grows with the context; a sliding layer's ring is a
     * fixed cost per sequence, like a recurrent state */
    info->kv_bytes_per_token = (uint64_t)model->n_full * model->kv_page_bytes / GPTOSS_PAGE_TOKENS;
    info->state_bytes_per_seq =
        (uint64_t)c->n_swa * (uint64_t)model->ring_pages * model->kv_page_bytes;
    info->kv_page_tokens = GPTOSS_PAGE_TOKENS;
    info->kv_page_bytes = (uint64_t)model->n_full * model->kv_page_bytes;
    info->n_ctx_max = c->n_ctx_train; /* the header's YaRN is fixed: no context past it */
}

void *gptoss_buffer_get(const struct gptoss_model *model, struct gptoss_buffer *b, size_t bytes)
{
    if (bytes > b->size) {
        model->host->free_aligned(b->p);
        b->p = model->host->alloc_aligned(64, bytes);
        b->size = b->p ? bytes : 0;
    }
    return b->p;
}

void gptoss_parallel(const struct gptoss_model *model, int64_t n, int64_t grain,
                     splash_range_fn fn, void *ctx)
{
    model->host->parallel_for(model->opts.pool, n, grain, fn, ctx);
}
