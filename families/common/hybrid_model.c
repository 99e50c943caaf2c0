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

/* ---- weights ---------------------------------------------------------------- */

static const struct splash_tensor_info *find(struct hybrid_model *model, int32_t il,
                                             const char *name, struct splash_err *err)
{
    char full[96];
    if (il >= 0)
        snprintf(full, sizeof full, "blk.%d.%s", il, name);
    else
        snprintf(full, sizeof full, "%s", name);
    const struct splash_tensor_info *t = model->host->meta->tensor_find(model->meta, full);
    if (!t)
        splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: tensor %s is missing",
                       model->host->meta->path(model->meta), full);
    else if (!t->data)
        splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s is not mapped",
                       model->host->meta->path(model->meta), full);
    return t && t->data ? t : NULL;
}

enum splash_status hybrid_weight_scale(struct hybrid_model *model,
                                       const struct splash_tensor_info *t, struct splash_weight *w,
                                       float *single, struct splash_err *err)
{
    const struct splash_meta_api *api = model->host->meta;
    const char *path = api->path(model->meta);
    size_t base = strlen(t->name);
    if (base > 7 && !strcmp(t->name + base - 7, ".weight"))
        base -= 7;
    char name[160], input_name[160];
    snprintf(name, sizeof name, "%.*s.scale", (int)base, t->name);
    snprintf(input_name, sizeof input_name, "%.*s.input_scale", (int)base, t->name);
    const struct splash_tensor_info *sc = api->tensor_find(model->meta, name);
    const struct splash_tensor_info *in = api->tensor_find(model->meta, input_name);
    if (!sc && !in)
        return SPLASH_OK;
    const struct splash_format_type *f = t->format;
    if (!f || !(f->flags & SPLASH_FORMAT_TENSOR_SCALE))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s beside a %s weight is refused: only NVFP4 rows take a "
                              "per-tensor scale",
                              path, sc ? name : input_name, f ? f->name : "?");
    if (!sc)
        return SPLASH_OK; /* NVIDIA's activation scale alone plays no part */
    int64_t n = 1, experts = t->n_dims >= 3 ? t->ne[2] : 1;
    for (int32_t d = 0; d < sc->n_dims; d++)
        n *= sc->ne[d];
    const struct splash_format_type *sf = sc->format;
    if (!sf || strcmp(sf->name, "F32") || !sc->data || (n != 1 && n != experts))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s must be F32 with 1 value or one per expert (%lld), not "
                              "%lld %s values",
                              path, name, (long long)experts, (long long)n, sf ? sf->name : "?");
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    model->k->to_float(sc, v);
    enum splash_status st = SPLASH_OK;
    if (w) {
        st = model->k->weight_set_scale(w, v, n, err);
    } else if (single) {
        *single = v[0];
        if (n != 1 || !isfinite(v[0]))
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s must be one finite value", path,
                                name);
    }
    free(v);
    return st;
}

static enum splash_status load_weight(struct hybrid_model *model, int32_t il, const char *name,
                                      struct splash_weight **out, struct splash_err *err)
{
    const struct splash_tensor_info *t = find(model, il, name, err);
    if (!t)
        return SPLASH_ERR_NOT_FOUND;
    model->weight_bytes += t->n_bytes;
    enum splash_status st = model->k->weight_create(t, out, err);
    if (!st)
        st = hybrid_weight_scale(model, t, *out, NULL, err);
    return st;
}

/* A small tensor as n floats (norms, conv, decay); `plus_one` adds 1 (HF's zero-centred norms). */
static enum splash_status load_floats(struct hybrid_model *model, int32_t il, const char *name,
                                      int64_t n, int plus_one, float **out, struct splash_err *err)
{
    const struct splash_tensor_info *t = find(model, il, name, err);
    if (!t)
        return SPLASH_ERR_NOT_FOUND;
    int64_t have = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (have != n)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s holds %lld values, expected %lld",
                              model->host->meta->path(model->meta), t->name, (long long)have,
                              (long long)n);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", t->name);
    model->k->to_float(t, v);
    if (plus_one)
        for (int64_t i = 0; i < n; i++)
            v[i] += 1.0f;
    model->weight_bytes += t->n_bytes;
    *out = v;
    return SPLASH_OK;
}

/* ---- dense FFN ------------------------------------------------------------------ */

struct dense_ffn {
    struct splash_weight *gate, *up, *down;
};

void hybrid_ffn_dense_declare(const struct hybrid_config *cfg, int32_t il, splash_decl_emit_fn emit,
                              void *ctx);

static enum splash_status dense_create(struct hybrid_model *model, int32_t il, void **layer_ffn,
                                       struct splash_err *err)
{
    struct dense_ffn *f = calloc(1, sizeof *f);
    if (!f)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st;
    if ((st = load_weight(model, il, "ffn_gate.weight", &f->gate, err)) ||
        (st = load_weight(model, il, "ffn_up.weight", &f->up, err)) ||
        (st = load_weight(model, il, "ffn_down.weight", &f->down, err))) {
        model->k->weight_destroy(f->gate);
        model->k->weight_destroy(f->up);
        free(f);
        return st;
    }
    *layer_ffn = f;
    return SPLASH_OK;
}

static void dense_destroy(struct hybrid_model *model, void *layer_ffn)
{
    struct dense_ffn *f = layer_ffn;
    if (!f)
        return;
    model->k->weight_destroy(f->gate);
    model->k->weight_destroy(f->up);
    model->k->weight_destroy(f->down);
    free(f);
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
    const struct dense_ffn *f = layer_ffn;
    int64_t ff = model->cfg.n_ff;
    float *gate = scratch;        /* (n, n_ff) */
    float *up = scratch + n * ff; /* (n, n_ff) */
    const struct splash_weight *w[2] = {f->gate, f->up};
    float *y[2] = {gate, up};
    hybrid_matmuls(model, w, 2, x, n, y);
    struct swiglu_task t = {.act = model->act, .gate = gate, .up = up};
    hybrid_parallel(model, n * ff, 16384, swiglu_range, &t);
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

static enum splash_status load_layer(struct hybrid_model *model, int32_t il, struct splash_err *err)
{
    const struct hybrid_config *c = &model->cfg;
    struct hybrid_layer *L = &model->layers[il];
    int p1 = c->norm_plus_one;
    enum splash_status st;
    L->is_attn = c->is_attn[il];
    if ((st = load_floats(model, il, "attn_norm.weight", c->n_embd, p1, &L->attn_norm, err)) ||
        (st = load_floats(model, il, "post_attention_norm.weight", c->n_embd, p1, &L->post_norm,
                          err)))
        return st;
    if (L->is_attn) {
        if ((st = load_weight(model, il, "attn_q.weight", &L->wq, err)) ||
            (st = load_weight(model, il, "attn_k.weight", &L->wk, err)) ||
            (st = load_weight(model, il, "attn_v.weight", &L->wv, err)) ||
            (st = load_weight(model, il, "attn_output.weight", &L->wo, err)) ||
            (st = load_floats(model, il, "attn_q_norm.weight", c->head_dim, p1, &L->q_norm, err)) ||
            (st = load_floats(model, il, "attn_k_norm.weight", c->head_dim, p1, &L->k_norm, err)))
            return st;
    } else {
        if ((st = load_weight(model, il, "attn_qkv.weight", &L->qkv, err)) ||
            (st = load_weight(model, il, "attn_gate.weight", &L->z, err)) ||
            (st = load_weight(model, il, "ssm_alpha.weight", &L->alpha, err)) ||
            (st = load_weight(model, il, "ssm_beta.weight", &L->beta, err)) ||
            (st = load_weight(model, il, "ssm_out.weight", &L->ssm_out, err)) ||
            (st = load_floats(model, il, "ssm_conv1d.weight", c->conv_dim * c->conv_kernel, 0,
                              &L->conv_w, err)) ||
            (st = load_floats(model, il, "ssm_dt.bias", c->n_v_heads, 0, &L->dt_bias, err)) ||
            (st = load_floats(model, il, "ssm_a", c->n_v_heads, 0, &L->ssm_a, err)) ||
            (st = load_floats(model, il, "ssm_norm.weight", c->d_v, 0, &L->ssm_norm, err)))
            return st;
        if (c->source == SPLASH_META_CONFIG) /* HF stores A_log */
            for (int32_t h = 0; h < c->n_v_heads; h++)
                L->ssm_a[h] = -expf(L->ssm_a[h]);
    }
    return model->ffn->create(model, il, &L->ffn, err);
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
    enum splash_status st = hybrid_config_read(host, m, arch, &model->cfg, err);
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
    model->tok_embd = find(model, -1, "token_embd.weight", err);
    if (!model->tok_embd) {
        st = SPLASH_ERR_NOT_FOUND;
        goto out_destroy;
    }
    model->weight_bytes += model->tok_embd->n_bytes;
    model->tok_embd_scale = 1.0f;
    if ((st = hybrid_weight_scale(model, model->tok_embd, NULL, &model->tok_embd_scale, err)))
        goto out_destroy;
    if ((st = load_floats(model, -1, "output_norm.weight", c->n_embd, c->norm_plus_one,
                          &model->output_norm, err)))
        goto out_destroy;
    if (c->tied) {
        st = model->k->weight_create(model->tok_embd, &model->output, err);
        if (!st)
            st = hybrid_weight_scale(model, model->tok_embd, model->output, NULL, err);
    } else
        st = load_weight(model, -1, "output.weight", &model->output, err);
    if (st)
        goto out_destroy;
    int32_t n_attn = 0, n_gdn = 0;
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        model->layers[il].slot = c->is_attn[il] ? n_attn++ : n_gdn++;
        if ((st = load_layer(model, il, err)))
            goto out_destroy;
    }
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
    const struct splash_kernels *k = model->k;
    if (model->layers) {
        for (int64_t il = 0; il < model->cfg.n_layers; il++) {
            struct hybrid_layer *L = &model->layers[il];
            free(L->attn_norm);
            free(L->post_norm);
            k->weight_destroy(L->qkv);
            k->weight_destroy(L->z);
            k->weight_destroy(L->alpha);
            k->weight_destroy(L->beta);
            k->weight_destroy(L->ssm_out);
            free(L->conv_w);
            free(L->dt_bias);
            free(L->ssm_a);
            free(L->ssm_norm);
            k->weight_destroy(L->wq);
            k->weight_destroy(L->wk);
            k->weight_destroy(L->wv);
            k->weight_destroy(L->wo);
            free(L->q_norm);
            free(L->k_norm);
            if (L->ffn)
                model->ffn->destroy(model, L->ffn);
        }
        free(model->layers);
    }
    k->weight_destroy(model->output);
    free(model->output_norm);
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

void *hybrid_buffer_get(const struct hybrid_model *model, struct hybrid_buffer *b, size_t bytes)
{
    if (bytes > b->size) {
        model->host->free_aligned(b->p);
        b->p = model->host->alloc_aligned(64, bytes);
        b->size = b->p ? bytes : 0;
    }
    return b->p;
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
