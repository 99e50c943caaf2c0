/* Loading a DFlash2 draft: its BF16 tensors to float, its projections quantized into
 * af4g64 as MLX rounds them (or kept in F32 for the exact path), and the target's
 * token table and head read by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/drafts/dflash2/dflash2.h"
#include "splash/format.h"

float *dflash2_alloc(const struct dflash2_model *m, size_t n_floats)
{
    return m->host->alloc_aligned(64, (n_floats ? n_floats : 1) * sizeof(float));
}

void dflash2_free(const struct dflash2_model *m, void *p)
{
    if (p)
        m->host->free_aligned(p);
}

void dflash2_rope_cs(const struct dflash2_model *m, int64_t pos0, int64_t n, float *cs)
{
    const int32_t pairs = DFLASH2_HEAD_DIM / 2;
    for (int64_t r = 0; r < n; r++)
        for (int32_t p = 0; p < pairs; p++) {
            double th = (double)(pos0 + r) * m->rope_freq[p];
            cs[(r * pairs + p) * 2] = (float)cos(th);
            cs[(r * pairs + p) * 2 + 1] = (float)sin(th);
        }
}

/* A stored tensor's values as floats (a new buffer in *out). */
static enum splash_status tensor_floats(struct dflash2_model *m, const struct splash_meta *meta,
                                        const char *name, float **out, struct splash_err *err)
{
    const struct splash_tensor_info *t = m->host->meta->tensor_find(meta, name);
    if (!t || !t->data || !t->format)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft tensor %s is %s", name,
                              !t ? "missing" : "not readable (no data or format)");
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *x = dflash2_alloc(m, (size_t)n);
    if (!x)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
    m->k->to_float(t, x);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            dflash2_free(m, x);
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "draft tensor %s holds a value that is not finite (element "
                                  "%lld)",
                                  name, (long long)i);
        }
    m->weight_bytes += (uint64_t)n * sizeof(float);
    *out = x;
    return SPLASH_OK;
}

/* A projection: af4g64 (MLX's affine rounding) unless keep_stored or its input width is
 * not whole groups, else F32. */
static enum splash_status load_weight(struct dflash2_model *m, const struct splash_meta *meta,
                                      const char *name, int quantize, struct dflash2_weight *w,
                                      struct splash_err *err)
{
    float *x = NULL;
    enum splash_status st = tensor_floats(m, meta, name, &x, err);
    if (st)
        return st;
    const struct splash_tensor_info *t = m->host->meta->tensor_find(meta, name);
    int64_t cols = t->ne[0], rows = t->ne[1];
    m->weight_bytes -= (uint64_t)(cols * rows) * sizeof(float);
    const struct splash_format_type *af =
        quantize && cols % 64 == 0 ? m->host->format_find_name(m->host, "af4g64") : NULL;
    const struct splash_format_type *f =
        af && af->from_float ? af : m->host->format_find_name(m->host, "F32");
    if (!f) {
        dflash2_free(m, x);
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: no F32 format plugin is loaded", name);
    }
    size_t bytes = splash_format_row_bytes(f, cols) * (size_t)rows;
    /* quantized rows in memory the kernels give back once they hold the repacked image
     * (host ABI 1.5), so the draft's projections are held once */
    w->own_region = m->host->abi_minor >= 5 && m->host->weight_rows_alloc &&
                    m->host->weight_rows_hand_over && m->host->weight_rows_free;
    if (f->from_float && f != m->host->format_find_name(m->host, "F32")) {
        w->data = w->own_region ? m->host->weight_rows_alloc(bytes)
                                : m->host->alloc_aligned(64, bytes);
        if (!w->data) {
            dflash2_free(m, x);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
        }
        for (int64_t r = 0; r < rows; r++)
            f->from_float(x + r * cols, (char *)w->data + (size_t)r * (bytes / (size_t)rows),
                          cols, NULL);
        dflash2_free(m, x);
    } else {
        w->data = x;
        w->own_region = 0;
    }
    w->info = (struct splash_tensor_info){.name = t->name,
                                          .dtype = f->gguf_type >= 0 ? f->gguf_type : -100,
                                          .type_name = f->name,
                                          .n_dims = 2,
                                          .ne = {cols, rows, 1, 1},
                                          .n_bytes = bytes,
                                          .data = w->data,
                                          .format = f};
    m->weight_bytes += bytes;
    if (w->own_region)
        m->host->weight_rows_hand_over(w->data);
    return m->k->weight_create(&w->info, &w->w, err);
}

static void free_weight(struct dflash2_model *m, struct dflash2_weight *w)
{
    if (w->w)
        m->k->weight_destroy(w->w);
    if (w->data && w->own_region)
        m->host->weight_rows_free(w->data);
    else if (w->data)
        m->host->free_aligned(w->data);
    memset(w, 0, sizeof *w);
}

static enum splash_status load_layer(struct dflash2_model *m, const struct splash_meta *meta,
                                     int32_t il, int quantize, struct splash_err *err)
{
    struct dflash2_layer *L = &m->layers[il];
    char n[128];
    enum splash_status st;
#define F(dst, suffix)                                                                             \
    snprintf(n, sizeof n, "layers.%d.%s", il, suffix);                                            \
    if ((st = tensor_floats(m, meta, n, &dst, err)))                                               \
        return st;
#define W(dst, suffix)                                                                             \
    snprintf(n, sizeof n, "layers.%d.%s", il, suffix);                                            \
    if ((st = load_weight(m, meta, n, quantize, &dst, err)))                                       \
        return st;
    F(L->in_norm, "input_layernorm.weight");
    F(L->post_norm, "post_attention_layernorm.weight");
    F(L->q_norm, "self_attn.q_norm.weight");
    F(L->k_norm, "self_attn.k_norm.weight");
    F(L->attn_conv.base, "attention_conv.base_kernel");
    F(L->mlp_conv.base, "mlp_conv.base_kernel");
    W(L->wq, "self_attn.q_proj.weight");
    W(L->wk, "self_attn.k_proj.weight");
    W(L->wv, "self_attn.v_proj.weight");
    W(L->wo, "self_attn.o_proj.weight");
    W(L->gate, "mlp.gate_proj.weight");
    W(L->up, "mlp.up_proj.weight");
    W(L->down, "mlp.down_proj.weight");
    W(L->attn_conv.proj, "attention_conv.kernel_projection.weight");
    W(L->mlp_conv.proj, "mlp_conv.kernel_projection.weight");
#undef F
#undef W
    return SPLASH_OK;
}

/* The target's token table and head, read by name: a format the kernels decode. */
static enum splash_status bind_target(struct dflash2_model *m, const struct splash_meta *target,
                                      struct splash_err *err)
{
    const struct splash_meta_api *api = m->host->meta;
    m->tok_embd = api->tensor_find(target, m->cfg.target_embd);
    const struct splash_tensor_info *head = api->tensor_find(target, m->cfg.target_head);
    if (!m->tok_embd || !m->tok_embd->data || !m->tok_embd->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "target: %s has no data or format the draft can read",
                              m->cfg.target_embd);
    if (!head || !head->data || !head->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "target: %s has no data or format the draft can read",
                              m->cfg.target_head);
    /* a per-tensor scale beside either (NVFP4's NAME.scale) is the family's to apply */
    const char *names[2] = {m->cfg.target_embd, m->cfg.target_head};
    for (int i = 0; i < 2; i++) {
        char scale[128];
        size_t len = strlen(names[i]);
        if (len > 7 && !strcmp(names[i] + len - 7, ".weight"))
            len -= 7;
        snprintf(scale, sizeof scale, "%.*s.scale", (int)len, names[i]);
        if (api->tensor_find(target, scale))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "target: %s (a per-tensor scale) is not one the draft reads",
                                  scale);
    }
    return m->k->weight_create(head, &m->head, err);
}

enum splash_status dflash2_model_create(const struct splash_host *host,
                                        const struct splash_meta *draft,
                                        const struct splash_meta *target,
                                        const struct splash_draft_opts *opts,
                                        struct dflash2_model **out, struct splash_err *err)
{
    struct dflash2_model *m = calloc(1, sizeof *m);
    if (!m)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the draft");
    m->host = host;
    m->k = host->kernels;
    m->pool = opts ? opts->pool : NULL;
    int quantize = !(opts && opts->keep_stored);
    enum splash_status st = dflash2_config_read(host, draft, target, &m->cfg, err);
    if (st)
        goto fail;
    if (!(m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers))) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the draft");
        goto fail;
    }
    for (int32_t p = 0; p < DFLASH2_HEAD_DIM / 2; p++)
        m->rope_freq[p] = (float)pow(m->cfg.rope_base, -2.0 * p / DFLASH2_HEAD_DIM);
    m->ring = m->cfg.window + 4 * m->cfg.block;
    m->attn = dflash2_attn_pick(host->cpu_features());
    if ((st = bind_target(m, target, err)))
        goto fail;
    if ((st = load_weight(m, draft, "fc.weight", quantize, &m->fc, err)) ||
        (st = load_weight(m, draft, "candidate_selector.hidden_projection.weight", quantize,
                          &m->sel_proj, err)))
        goto fail;
    if ((st = tensor_floats(m, draft, "hidden_norm.weight", &m->hidden_norm, err)) ||
        (st = tensor_floats(m, draft, "norm.weight", &m->norm, err)) ||
        (st = tensor_floats(m, draft, "candidate_selector.predecessor_codebook", &m->pred_book,
                            err)) ||
        (st = tensor_floats(m, draft, "candidate_selector.successor_codebook", &m->succ_book,
                            err)))
        goto fail;
    /* the mask rows: the release's trained embedding, else the target's row of the token */
    if (host->meta->tensor_find(draft, "mask_embedding")) {
        if ((st = tensor_floats(m, draft, "mask_embedding", &m->mask_row, err)))
            goto fail;
    } else {
        if (!(m->mask_row = dflash2_alloc(m, (size_t)m->cfg.n_embd))) {
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the draft");
            goto fail;
        }
        m->k->embed_rows(m->tok_embd, &m->cfg.mask_token, 1, m->mask_row);
    }
    for (int32_t il = 0; il < m->cfg.n_layers; il++)
        if ((st = load_layer(m, draft, il, quantize, err)))
            goto fail;
    *out = m;
    return SPLASH_OK;
fail:
    dflash2_model_destroy(m);
    return st;
}

void dflash2_model_destroy(struct dflash2_model *m)
{
    if (!m)
        return;
    for (int32_t il = 0; m->layers && il < m->cfg.n_layers; il++) {
        struct dflash2_layer *L = &m->layers[il];
        dflash2_free(m, L->in_norm);
        dflash2_free(m, L->post_norm);
        dflash2_free(m, L->q_norm);
        dflash2_free(m, L->k_norm);
        dflash2_free(m, L->attn_conv.base);
        dflash2_free(m, L->mlp_conv.base);
        struct dflash2_weight *ws[] = {&L->wq,   &L->wk, &L->wv,   &L->wo,
                                       &L->gate, &L->up, &L->down, &L->attn_conv.proj,
                                       &L->mlp_conv.proj};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            free_weight(m, ws[i]);
    }
    free(m->layers);
    free_weight(m, &m->fc);
    free_weight(m, &m->sel_proj);
    if (m->head)
        m->k->weight_destroy(m->head);
    dflash2_free(m, m->hidden_norm);
    dflash2_free(m, m->norm);
    dflash2_free(m, m->mask_row);
    dflash2_free(m, m->pred_book);
    dflash2_free(m, m->succ_book);
    free(m);
}
