/* The NextN draft plugin: the target's own MTP block (llama.cpp's blk.{n_layer}.nextn.*),
 * which the engine asks for by the architecture name "NextN" with the target's metadata
 * as the draft's (core/draft.c splash_draft_select_nextn). */
#include <stdio.h>

#include "families/drafts/nextn/nextn.h"
#include "splash/draft.h"
#include "splash/plugin.h"

static enum splash_status n_check(const struct splash_host *host, const struct splash_meta *draft,
                                  const struct splash_meta *target, struct splash_draft_verdict *v,
                                  struct splash_err *err)
{
    struct nextn_config cfg;
    if (draft != target)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "NextN: the MTP block is read from the target's own file");
    enum splash_status st = nextn_config_read(host, target, &cfg, err);
    if (st)
        return st;
    v->score = 1;
    snprintf(v->architecture, sizeof v->architecture, "NextN");
    nextn_config_summary(&cfg, v->summary, sizeof v->summary);
    return SPLASH_OK;
}

static enum splash_status n_create(const struct splash_host *host, const struct splash_meta *draft,
                                   const struct splash_meta *target,
                                   const struct splash_draft_opts *opts, void **model,
                                   struct splash_err *err)
{
    if (draft != target)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "NextN: the MTP block is read from the target's own file");
    struct nextn_model *m;
    enum splash_status st = nextn_model_create(host, target, opts, &m, err);
    if (!st)
        *model = m;
    return st;
}

static void n_destroy(void *model)
{
    nextn_model_destroy(model);
}

static void n_info(const void *model, struct splash_draft_info *info)
{
    const struct nextn_model *m = model;
    info->block_size = NEXTN_BLOCK;
    info->n_taps = 1;
    info->tap_layers[0] = m->cfg.n_layers - 1; /* the trunk's output, before the final norm */
    info->n_embd = m->cfg.n_embd;
    info->n_vocab = m->cfg.n_vocab;
    info->window = NEXTN_WINDOW;
    info->top_k = NEXTN_TOP_K;
    info->weight_bytes = m->weight_bytes;
    info->ctx_bytes = nextn_ctx_bytes(m);
}

static enum splash_status n_ctx_create(void *model, void **ctx, struct splash_err *err)
{
    struct nextn_ctx *c;
    enum splash_status st = nextn_ctx_create(model, &c, err);
    if (!st)
        *ctx = c;
    return st;
}

static void n_ctx_destroy(void *model, void *ctx)
{
    nextn_ctx_destroy(model, ctx);
}

static enum splash_status n_ctx_fork(void *model, const void *ctx, void **out,
                                     struct splash_err *err)
{
    struct nextn_ctx *c;
    enum splash_status st = nextn_ctx_fork(model, ctx, &c, err);
    if (!st)
        *out = c;
    return st;
}

static enum splash_status n_append(void *model, void *ctx, const float *taps, int64_t stride,
                                   int32_t pos0, int32_t n, struct splash_err *err)
{
    return nextn_append(model, ctx, taps, stride, pos0, n, err);
}

static enum splash_status n_rollback(void *model, void *ctx, int32_t n_keep,
                                     struct splash_err *err)
{
    return nextn_rollback(model, ctx, n_keep, err);
}

static enum splash_status n_propose(void *model, void *ctx, const struct splash_draft_block *b,
                                    struct splash_err *err)
{
    return nextn_propose(model, ctx, b, err);
}

static const char *const architectures[] = {"NextN", NULL};

static const struct splash_draft_plugin nextn_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_DRAFT, "nextn", "1.0",
                                        struct splash_draft_plugin),
    .architectures = architectures,
    .check = n_check,
    .create = n_create,
    .destroy = n_destroy,
    .info = n_info,
    .ctx_create = n_ctx_create,
    .ctx_destroy = n_ctx_destroy,
    .append_context = n_append,
    .rollback = n_rollback,
    .propose = n_propose,
    .ctx_fork = n_ctx_fork,
};

static const struct splash_plugin_header *nextn_entry(const struct splash_host *host)
{
    (void)host;
    return &nextn_plugin.header;
}

SPLASH_PLUGIN_DEFINE(draft_nextn, nextn_entry)
