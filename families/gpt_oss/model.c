/* Building a gpt-oss model over mapped tensors, and what it tells the core. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/gpt_oss/gpt_oss.h"

/* The small float vectors as bound: a NaN or infinity in a bias, norm or sink would
 * spread through every row, so it is refused naming the tensor and the element. */
static enum splash_status check_finite(const struct gptoss_model *model, int32_t il,
                                       const char *name, const float *v, int64_t n,
                                       struct splash_err *err)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return il >= 0 ? splash_err_set(err, SPLASH_ERR_INVALID,
                                            "%s: blk.%d.%s[%lld] is not finite",
                                            model->host->meta->path(model->meta), il, name,
                                            (long long)i)
                           : splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%lld] is not finite",
                                            model->host->meta->path(model->meta), name,
                                            (long long)i);
    return SPLASH_OK;
}

static enum splash_status check_layers_finite(const struct gptoss_model *model,
                                              struct splash_err *err)
{
    const struct gptoss_config *c = &model->cfg;
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, x = c->n_expert, ff = c->n_ff_exp;
    enum splash_status st = check_finite(model, -1, "output_norm.weight", model->output_norm, e,
                                         err);
    for (int32_t il = 0; !st && il < (int32_t)c->n_layers; il++) {
        const struct gptoss_layer *L = &model->layers[il];
        const struct {
            const char *name;
            const float *v;
            int64_t n;
        } vecs[] = {{"attn_norm.weight", L->attn_norm, e},
                    {"post_attention_norm.weight", L->post_norm, e},
                    {"attn_q.bias", L->bq, qd},
                    {"attn_k.bias", L->bk, kvd},
                    {"attn_v.bias", L->bv, kvd},
                    {"attn_output.bias", L->bo, e},
                    {"attn_sinks.weight", L->sinks, c->n_head},
                    {"ffn_gate_inp.bias", L->b_router, x},
                    {"ffn_gate_exps.bias", L->b_gate, ff * x},
                    {"ffn_up_exps.bias", L->b_up, ff * x},
                    {"ffn_down_exps.bias", L->b_down, e * x}};
        for (size_t i = 0; !st && i < sizeof vecs / sizeof vecs[0]; i++)
            st = check_finite(model, il, vecs[i].name, vecs[i].v, vecs[i].n, err);
    }
    return st;
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
    int32_t n_full = 0, n_swa = 0;
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++)
        model->layers[il].slot = c->is_swa[il] ? n_swa++ : n_full++;
    if ((st = host->bind_tensors(host, m, gptoss_declare, model, &model->weight_bytes, err)))
        goto out_destroy;
    model->bound = 1;
    if ((st = check_layers_finite(model, err)))
        goto out_destroy;
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
    if (model->bound)
        model->host->unbind_tensors(model->host, model->meta, gptoss_declare, model);
    free(model->layers);
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

void *gptoss_buffer_get(const struct gptoss_model *model, struct step_buffer *b, size_t bytes)
{
    return step_buffer_get(model->host, b, bytes);
}

void gptoss_parallel(const struct gptoss_model *model, int64_t n, int64_t grain,
                     splash_range_fn fn, void *ctx)
{
    model->host->parallel_for(model->opts.pool, n, grain, fn, ctx);
}
