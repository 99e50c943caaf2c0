/* The DFlash2 draft plugin: claims config.json's DFlash2DraftModel architecture. */
#include <stdio.h>

#include "families/drafts/dflash2/dflash2.h"
#include "splash/draft.h"
#include "splash/plugin.h"

static enum splash_status d_check(const struct splash_host *host, const struct splash_meta *draft,
                                  const struct splash_meta *target, struct splash_draft_verdict *v,
                                  struct splash_err *err)
{
    struct dflash2_config cfg;
    enum splash_status st = dflash2_config_read(host, draft, target, &cfg, err);
    if (st)
        return st;
    v->score = 1;
    snprintf(v->architecture, sizeof v->architecture, "DFlash2");
    dflash2_config_summary(&cfg, v->summary, sizeof v->summary);
    return SPLASH_OK;
}

static enum splash_status d_create(const struct splash_host *host,
                                   const struct splash_meta *draft,
                                   const struct splash_meta *target,
                                   const struct splash_draft_opts *opts, void **model,
                                   struct splash_err *err)
{
    struct dflash2_model *m;
    enum splash_status st = dflash2_model_create(host, draft, target, opts, &m, err);
    if (!st)
        *model = m;
    return st;
}

static void d_destroy(void *model)
{
    dflash2_model_destroy(model);
}

static void d_info(const void *model, struct splash_draft_info *info)
{
    const struct dflash2_model *m = model;
    info->block_size = DFLASH2_MIN_BLOCK;
    info->n_taps = m->cfg.n_taps;
    for (int32_t i = 0; i < m->cfg.n_taps; i++)
        info->tap_layers[i] = m->cfg.taps[i];
    info->n_embd = m->cfg.n_embd;
    info->n_vocab = m->cfg.n_vocab;
    info->window = m->cfg.window;
    info->top_k = DFLASH2_TOP_K;
    info->weight_bytes = m->weight_bytes;
    info->ctx_bytes = 2ull * (uint64_t)m->cfg.n_layers * (uint64_t)m->ring * DFLASH2_KV_HEADS *
                      DFLASH2_HEAD_DIM * sizeof(float);
}

static enum splash_status d_ctx_create(void *model, void **ctx, struct splash_err *err)
{
    struct dflash2_ctx *c;
    enum splash_status st = dflash2_ctx_create(model, &c, err);
    if (!st)
        *ctx = c;
    return st;
}

static void d_ctx_destroy(void *model, void *ctx)
{
    dflash2_ctx_destroy(model, ctx);
}

static enum splash_status d_ctx_fork(void *model, const void *ctx, void **out,
                                     struct splash_err *err)
{
    struct dflash2_ctx *c;
    enum splash_status st = dflash2_ctx_fork(model, ctx, &c, err);
    if (!st)
        *out = c;
    return st;
}

static enum splash_status d_append(void *model, void *ctx, const float *taps, int64_t stride,
                                   int32_t pos0, int32_t n, struct splash_err *err)
{
    return dflash2_append(model, ctx, taps, stride, pos0, n, err);
}

static enum splash_status d_rollback(void *model, void *ctx, int32_t n_keep,
                                     struct splash_err *err)
{
    return dflash2_rollback(model, ctx, n_keep, err);
}

static enum splash_status d_propose(void *model, void *ctx, const struct splash_draft_block *b,
                                    struct splash_err *err)
{
    return dflash2_propose(model, ctx, b, err);
}

static const char *const architectures[] = {"DFlash2DraftModel", NULL};

static const struct splash_draft_plugin dflash2_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_DRAFT, "dflash2", "1.0",
                                        struct splash_draft_plugin),
    .architectures = architectures,
    .check = d_check,
    .create = d_create,
    .destroy = d_destroy,
    .info = d_info,
    .ctx_create = d_ctx_create,
    .ctx_destroy = d_ctx_destroy,
    .append_context = d_append,
    .rollback = d_rollback,
    .propose = d_propose,
    .ctx_fork = d_ctx_fork,
};

static const struct splash_plugin_header *dflash2_entry(const struct splash_host *host)
{
    (void)host;
    return &dflash2_plugin.header;
}

SPLASH_PLUGIN_DEFINE(draft_dflash2, dflash2_entry)
