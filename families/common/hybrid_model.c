/* Building the hybrid trunk over mapped tensors, its per-sequence caches, and
 * the dense SwiGLU FFN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "splash/format.h"
#include "splash/fp.h"

#define HYBRID_PAGE_TOKENS 64

/* ---- dense FFN ------------------------------------------------------------------ */

static enum splash_status dense_create(struct hybrid_model *model, int32_t il, void **layer_ffn,
                                       struct splash_err *err)
{
    struct hybrid_dense_ffn *f = calloc(1, sizeof *f);
    if (!f)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    *layer_ffn = f;
    return SPLASH_OK;
}

static void dense_destroy(struct hybrid_model *model, void *layer_ffn)
{
    free(layer_ffn);
}

struct swiglu_task {
    const struct hybrid_act *act;
    float *gate;
    const float *up;
};

static void swiglu_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct swiglu_task *t = ctx;
    t->act->silu_mul(end - begin, t->up + begin, t->gate + begin, t->gate + begin);
}

static void dense_forward(struct hybrid_model *model, void *layer_ffn, const float *x, int64_t n,
                          float *out, float *scratch)
{
    const struct hybrid_dense_ffn *f = layer_ffn;
    int64_t ff = model->cfg.n_ff;
    float *gate = scratch;        /* (n, n_ff) */
    float *up = scratch + n * ff; /* (n, n_ff) */
    const struct splash_weight *w[2] = {f->gate, f->up};
    float *y[2] = {gate, up};
    hybrid_matmuls(model, w, 2, x, n, y);
    struct swiglu_task t = {.act = model->act, .gate = gate, .up = up};
    hybrid_parallel(model, n * ff, HYBRID_SECTION_MIN_VALUES, swiglu_range, &t);
    model->k->matmul(model->opts.pool, f->down, gate, n, out);
}

static int64_t dense_scratch(const struct hybrid_config *cfg)
{
    return 2 * cfg->n_ff;
}

const struct hybrid_ffn_ops hybrid_ffn_dense = {
    .declare = hybrid_ffn_dense_declare,
    .create = dense_create,
    .destroy = dense_destroy,
    .forward = dense_forward,
    .scratch_per_row = dense_scratch,
};

/* ---- model -------------------------------------------------------------------------- */

void hybrid_parallel(struct hybrid_model *model, int64_t n, int64_t grain, splash_range_fn fn,
                     void *ctx)
{
    model->host->parallel_for(model->opts.pool, n, grain, fn, ctx);
}

/* After binding: HF's zero-centred norms become 1 + w, and its A_log the decay -exp(A_log). */
static void plus_one(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        v[i] += 1.0f;
}

static void adjust_weights(struct hybrid_model *model)
{
    const struct hybrid_config *c = &model->cfg;
    if (c->norm_plus_one) {
        plus_one(model->output_norm, c->n_embd);
        for (int64_t il = 0; il < c->n_layers; il++) {
            struct hybrid_layer *L = &model->layers[il];
            plus_one(L->attn_norm, c->n_embd);
            plus_one(L->post_norm, c->n_embd);
            if (L->is_attn) {
                plus_one(L->q_norm, c->head_dim);
                plus_one(L->k_norm, c->head_dim);
            }
        }
    }
    if (c->source == SPLASH_META_CONFIG) /* HF stores A_log */
        for (int64_t il = 0; il < c->n_layers; il++)
            if (!model->layers[il].is_attn)
                for (int32_t h = 0; h < c->n_v_heads; h++)
                    model->layers[il].ssm_a[h] = -expf(model->layers[il].ssm_a[h]);
}

/* YaRN (Peng et al. 2023): dimensions whose wavelength fits the native window many
 * times keep their frequency, those longer than it are interpolated by the factor,
 * with a linear ramp between (beta_fast 32, beta_slow 1 rotations). */
static double yarn_freq(double freq, double factor, int64_t native)
{
    const double beta_fast = 32.0, beta_slow = 1.0;
    double rotations = (double)native * freq / (2.0 * M_PI);
    double ramp = (rotations - beta_slow) / (beta_fast - beta_slow);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return freq / factor * (1.0 - ramp) + freq * ramp;
}

static void rope_tables(struct hybrid_model *model)
{
    const struct hybrid_config *c = &model->cfg;
    int32_t pairs = c->n_rot / 2;
    const int32_t *sec = c->rope_sections;
    int32_t sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    model->yarn_factor = model->opts.rope_yarn_factor > 1.0 ? model->opts.rope_yarn_factor
                         : model->max_context > c->n_ctx_train
                             ? (double)model->max_context / (double)c->n_ctx_train
                             : 1.0;
    model->yarn_mscale =
        model->yarn_factor > 1.0 ? (float)(0.1 * log(model->yarn_factor) + 1.0) : 1.0f;
    for (int32_t i = 0; i < pairs; i++) {
        double freq = pow(c->rope_base, -2.0 * i / c->n_rot);
        if (model->yarn_factor > 1.0)
            freq = yarn_freq(freq, model->yarn_factor, c->n_ctx_train);
        model->rope_freq[i] = (float)freq;
        model->rope_on[i] = 1;
        if (sect_dims > 0) {
            /* interleaved M-RoPE: pairs cycle t, h, w within 3x each section; the rest
             * read the fourth position, which is 0 for text tokens */
            int32_t s = i % sect_dims;
            int on = (s % 3 == 0 && s < 3 * sec[0]) || (s % 3 == 1 && s < 3 * sec[1]) ||
                     (s % 3 == 2 && s < 3 * sec[2]);
            model->rope_on[i] = (uint8_t)on;
        }
    }
}

enum splash_status hybrid_model_create(const struct splash_host *host, const struct splash_meta *m,
                                       const char *arch, const struct hybrid_ffn_ops *ffn,
                                       splash_declare_fn declare,
                                       const struct splash_model_opts *opts,
                                       struct hybrid_model **out, struct splash_err *err)
{
    struct hybrid_model *model = calloc(1, sizeof *model);
    if (!model)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    model->host = host;
    model->k = host->kernels;
    model->ssm = host->ssm;
    model->meta = m;
    model->opts = *opts;
    model->ffn = ffn ? ffn : &hybrid_ffn_dense;
    model->act = hybrid_act_pick(host->cpu_features());
    enum splash_status st = hybrid_config_read(host, m, arch, model->ffn, &model->cfg, err);
    if (st)
        goto out_free;
    const struct hybrid_config *c = &model->cfg;
    if (opts->kv_format != SPLASH_KV_INT8 && opts->kv_format != SPLASH_KV_BF16 &&
        opts->kv_format != SPLASH_KV_F16 && opts->kv_format != SPLASH_KV_F32) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "kv format %d", opts->kv_format);
        goto out_free;
    }
    if (opts->state_format != SPLASH_STATE_F32 && opts->state_format != SPLASH_STATE_BF16) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "state format %d", opts->state_format);
        goto out_free;
    }
    model->layers = calloc((size_t)c->n_layers, sizeof *model->layers);
    if (!model->layers) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_free;
    }
    if (model->ffn->model_prepare && (st = model->ffn->model_prepare(model, err)))
        goto out_destroy;
    int32_t n_attn = 0, n_gdn = 0;
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        struct hybrid_layer *L = &model->layers[il];
        L->is_attn = c->is_attn[il];
        L->slot = c->is_attn[il] ? n_attn++ : n_gdn++;
        if ((st = model->ffn->create(model, il, &L->ffn, err)))
            goto out_destroy;
    }
    model->declare = declare;
    if ((st = host->bind_tensors(host, m, declare, model, &model->weight_bytes, err)))
        goto out_destroy;
    adjust_weights(model);
    if (model->ffn->model_ready && (st = model->ffn->model_ready(model, err)))
        goto out_destroy;
    model->n_gdn = n_gdn;
    model->max_context = opts->max_context > 0 ? opts->max_context : c->n_ctx_train;
    model->page_tokens = HYBRID_PAGE_TOKENS;
    model->kv_page_bytes =
        model->k->kv_page_bytes(opts->kv_format, model->page_tokens, c->n_head_kv, c->head_dim);
    model->gdn_state_bytes = (size_t)c->n_v_heads * (size_t)c->d_v * (size_t)c->d_k *
                             (opts->state_format == SPLASH_STATE_BF16 ? 2 : 4);
    model->conv_state_bytes = (size_t)(c->conv_kernel - 1) * (size_t)c->conv_dim * sizeof(float);
    rope_tables(model);
    *out = model;
    return SPLASH_OK;

out_destroy:
    hybrid_model_destroy(model);
    return st;
out_free:
    free(model);
    return st;
}

void hybrid_model_destroy(struct hybrid_model *model)
{
    if (!model)
        return;
    if (model->layers) {
        if (model->declare)
            model->host->unbind_tensors(model->host, model->meta, model->declare, model);
        for (int64_t il = 0; il < model->cfg.n_layers; il++)
            if (model->layers[il].ffn)
                model->ffn->destroy(model, model->layers[il].ffn);
        free(model->layers);
    }
    if (model->ffn->model_free)
        model->ffn->model_free(model);
    model->host->free_aligned(model->step_arena.p);
    model->host->free_aligned(model->ffn_arena.p);
    model->host->free_aligned(model->logits.p);
    free(model);
}

void hybrid_matmuls(const struct hybrid_model *model, const struct splash_weight *const *w, int n_w,
                    const float *x, int64_t n, float *const *y)
{
    model->k->matmul_many(model->opts.pool, w, n_w, x, n, y);
}

void *hybrid_buffer_get(const struct hybrid_model *model, struct step_buffer *b, size_t bytes)
{
    return step_buffer_get(model->host, b, bytes);
}

void hybrid_model_info(const struct hybrid_model *model, struct splash_model_info *info)
{
    const struct hybrid_config *c = &model->cfg;
    memset(info, 0, sizeof *info);
    info->n_vocab = c->n_vocab;
    info->n_embd = c->n_embd;
    info->n_layers = c->n_layers;
    info->n_ctx_train = c->n_ctx_train;
    info->weight_bytes = model->weight_bytes;
    info->kv_bytes_per_token = (uint64_t)c->n_attn * model->kv_page_bytes / model->page_tokens;
    info->state_bytes_per_seq =
        (uint64_t)model->n_gdn * (model->gdn_state_bytes + model->conv_state_bytes);
    info->kv_page_tokens = model->page_tokens;
    info->kv_page_bytes = (uint64_t)c->n_attn * model->kv_page_bytes;
    info->n_ctx_max = c->n_ctx_train > HYBRID_QWEN_CONTEXT_MAX ? c->n_ctx_train
                                                                : HYBRID_QWEN_CONTEXT_MAX;
    if (model->ffn->model_info)
        model->ffn->model_info(model, info);
}

/* ---- sequences ------------------------------------------------------------------------ */

enum splash_status hybrid_seq_create(struct hybrid_model *model, struct hybrid_seq **out,
                                     struct splash_err *err)
{
    struct hybrid_seq *seq = calloc(1, sizeof *seq);
    if (!seq)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    size_t n_gdn = (size_t)model->n_gdn;
    seq->gdn_state = model->host->alloc_aligned(64, n_gdn * model->gdn_state_bytes + 64);
    seq->conv_state = model->host->alloc_aligned(64, n_gdn * model->conv_state_bytes + 64);
    if (!seq->gdn_state || !seq->conv_state) {
        hybrid_seq_destroy(model, seq);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the GDN state");
    }
    memset(seq->gdn_state, 0, n_gdn * model->gdn_state_bytes);
    memset(seq->conv_state, 0, n_gdn * model->conv_state_bytes);
    model->cache_bytes += n_gdn * (model->gdn_state_bytes + model->conv_state_bytes);
    *out = seq;
    return SPLASH_OK;
}

static void free_pages(struct hybrid_model *model, struct hybrid_seq *seq, int64_t keep)
{
    for (int32_t a = 0; a < model->cfg.n_attn; a++)
        for (int64_t p = keep; p < seq->n_pages; p++) {
            hybrid_page_unref(model, seq->pages[(size_t)a * seq->cap_pages + p]);
            seq->pages[(size_t)a * seq->cap_pages + p] = NULL;
        }
    if (seq->n_pages > keep)
        seq->n_pages = keep;
}

void hybrid_seq_destroy(struct hybrid_model *model, struct hybrid_seq *seq)
{
    if (!seq)
        return;
    if (seq->pages)
        free_pages(model, seq, 0);
    free(seq->pages);
    model->cache_bytes -= (size_t)seq->cap_pages * (size_t)model->cfg.n_attn * sizeof *seq->pages;
    if (seq->gdn_state && seq->conv_state)
        model->cache_bytes -=
            (size_t)model->n_gdn * (model->gdn_state_bytes + model->conv_state_bytes);
    hybrid_rewind_free(model, seq);
    model->host->free_aligned(seq->gdn_state);
    model->host->free_aligned(seq->conv_state);
    free(seq);
}

enum splash_status hybrid_seq_truncate(struct hybrid_model *model, struct hybrid_seq *seq,
                                       int32_t n_keep, struct splash_err *err)
{
    if (n_keep < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "truncate to %d tokens", n_keep);
    if (n_keep >= seq->n_tokens)
        return SPLASH_OK;
    enum splash_status st;
    if (n_keep > 0 && model->n_gdn > 0 && (st = hybrid_rewind_to(model, seq, n_keep, err)))
        return st;
    if (seq->rewind)
        seq->rewind->n_saved = 0;
    free_pages(model, seq, (n_keep + model->page_tokens - 1) / model->page_tokens);
    if (n_keep == 0) {
        memset(seq->gdn_state, 0, (size_t)model->n_gdn * model->gdn_state_bytes);
        memset(seq->conv_state, 0, (size_t)model->n_gdn * model->conv_state_bytes);
    }
    seq->n_tokens = n_keep;
    return SPLASH_OK;
}
