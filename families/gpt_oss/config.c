/* gpt-oss's header: sizes, the sliding-window layout, experts and YaRN, read and held to
 * what the family runs; and the tensors it declares. */
#include <stdio.h>
#include <string.h>

#include "families/common/meta_keys.h"
#include "families/common/tensor_decls.h"
#include "families/gpt_oss/gpt_oss.h"

/* Which layers slide: attention.sliding_window_pattern as a per-layer bool array, or as
 * a period n (the last of every n layers full), else llama.cpp's gpt-oss default, every
 * other layer from layer 0. */
static enum splash_status read_pattern(const struct splash_meta_api *api,
                                       const struct splash_meta *m, struct gptoss_config *c,
                                       struct splash_err *err)
{
    char k[128];
    meta_key(k, sizeof k, GPTOSS_ARCH, "attention.sliding_window_pattern");
    int64_t period = 2;
    size_t len = 0;
    if (api->has(m, k) && api->arr_len(m, k, &len, NULL) == SPLASH_OK) {
        if (len != (size_t)c->n_layers)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu values for %lld layers",
                                  api->path(m), k, len, (long long)c->n_layers);
        for (size_t i = 0; i < len; i++) {
            int64_t v;
            enum splash_status st = api->arr_i64(m, k, i, &v, err);
            if (st)
                return st;
            c->is_swa[i] = v != 0;
        }
    } else {
        enum splash_status st =
            meta_get_int(api, m, GPTOSS_ARCH, "attention.sliding_window_pattern", 1, 1,
                         GPTOSS_MAX_LAYERS, &period, err);
        if (st)
            return st;
        for (int64_t il = 0; il < c->n_layers; il++)
            c->is_swa[il] = il % period < period - 1;
    }
    c->n_swa = 0;
    for (int64_t il = 0; il < c->n_layers; il++)
        c->n_swa += c->is_swa[il];
    return SPLASH_OK;
}

/* YaRN as llama.cpp reads it: rope.scaling.{type,factor,original_context_length} and the
 * optional yarn_* overrides; ext factor 1 for YaRN. */
static enum splash_status read_rope(const struct splash_meta_api *api, const struct splash_meta *m,
                                    struct gptoss_config *c, struct splash_err *err)
{
    char k[128];
    enum splash_status st;
    float base = 10000.0f;
    if ((st = meta_get_float(api, m, GPTOSS_ARCH, "rope.freq_base", 1, 0, &base, err)))
        return st;
    c->rope = (struct splash_rope_args){.size = sizeof c->rope,
                                        .n_dims = c->n_rot,
                                        .freq_base = base,
                                        .freq_scale = 1.0f,
                                        .attn_factor = 1.0f,
                                        .beta_fast = 32.0f,
                                        .beta_slow = 1.0f,
                                        .n_ctx_orig = (int32_t)c->n_ctx_train};
    c->yarn_factor = 1.0;
    const char *type = "none";
    meta_key(k, sizeof k, GPTOSS_ARCH, "rope.scaling.type");
    if (api->has(m, k) && (st = api->get_str(m, k, &type, err)))
        return st;
    if (!strcmp(type, "none"))
        return SPLASH_OK;
    if (strcmp(type, "yarn"))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: \"%s\" (none or yarn served)", api->path(m), k, type);
    float factor = 1.0f, ext = 1.0f;
    int64_t orig = c->n_ctx_train;
    if ((st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.factor", 0, 0, &factor, err)) ||
        (st = meta_get_int(api, m, GPTOSS_ARCH, "rope.scaling.original_context_length", 1, 1,
                           c->n_ctx_train, &orig, err)) ||
        (st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.attn_factor", 1, 0,
                             &c->rope.attn_factor, err)) ||
        (st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.yarn_attn_factor", 1, 0,
                             &c->rope.attn_factor, err)) ||
        (st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.yarn_ext_factor", 1, 1, &ext,
                             err)) ||
        (st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.yarn_beta_fast", 1, 0,
                             &c->rope.beta_fast, err)) ||
        (st = meta_get_float(api, m, GPTOSS_ARCH, "rope.scaling.yarn_beta_slow", 1, 0,
                             &c->rope.beta_slow, err)))
        return st;
    c->yarn_factor = factor;
    c->rope.freq_scale = 1.0f / factor;
    c->rope.ext_factor = ext;
    c->rope.n_ctx_orig = (int32_t)orig;
    return SPLASH_OK;
}

enum splash_status gptoss_config_read(const struct splash_host *host, const struct splash_meta *m,
                                      struct gptoss_config *c, struct splash_err *err)
{
    const struct splash_meta_api *api = host->meta;
    const char *path = api->path(m);
    memset(c, 0, sizeof *c);
    if (api->source(m) != SPLASH_META_GGUF)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: gpt-oss loads from a GGUF only (no MLX layout is served)", path);
    int64_t v[12];
    static const struct meta_int_key keys[] = {
        {"context_length", 1, INT32_MAX},
        {"embedding_length", 1, 1 << 20},
        {"block_count", 1, GPTOSS_MAX_LAYERS},
        {"attention.head_count", 1, 1024},
        {"attention.head_count_kv", 1, 1024},
        {"attention.key_length", 2, 1024},
        {"attention.value_length", 2, 1024},
        {"attention.sliding_window", 1, INT32_MAX},
        {"expert_count", 1, GPTOSS_MAX_EXPERTS},
        {"expert_used_count", 1, GPTOSS_MAX_USED},
        {"expert_feed_forward_length", 1, 1 << 20},
    };
    enum splash_status st;
    if ((st = meta_get_ints(api, m, GPTOSS_ARCH, keys, sizeof keys / sizeof keys[0], v, err)))
        return st;
    c->n_ctx_train = v[0];
    c->n_embd = v[1];
    c->n_layers = v[2];
    c->n_head = (int32_t)v[3];
    c->n_head_kv = (int32_t)v[4];
    c->head_dim = (int32_t)v[5];
    c->window = (int32_t)v[7];
    c->n_expert = (int32_t)v[8];
    c->n_used = (int32_t)v[9];
    c->n_ff_exp = v[10];
    char k[128];
    if ((st = meta_check_shapes(path, GPTOSS_ARCH, v[5], v[6], c->n_head, c->n_head_kv, c->n_expert,
                                c->n_used, err)))
        return st;
    int64_t n_rot = c->head_dim;
    if ((st = meta_get_int(api, m, GPTOSS_ARCH, "rope.dimension_count", 1, 2, c->head_dim, &n_rot,
                           err)))
        return st;
    if (n_rot % 2)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld is odd", path,
                              meta_key(k, sizeof k, GPTOSS_ARCH, "rope.dimension_count"),
                              (long long)n_rot);
    c->n_rot = (int32_t)n_rot;
    c->rms_eps = 1e-5f;
    if ((st = meta_get_float(api, m, GPTOSS_ARCH, "attention.layer_norm_rms_epsilon", 0, 0,
                             &c->rms_eps, err)) ||
        (st = read_pattern(api, m, c, err)) || (st = read_rope(api, m, c, err)))
        return st;
    const struct splash_tensor_info *te = api->tensor_find(m, "token_embd.weight");
    if (!te)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: token_embd.weight is missing", path);
    c->n_vocab = te->ne[1];
    c->tied = api->tensor_find(m, "output.weight") == NULL;
    return SPLASH_OK;
}

void gptoss_config_summary(const struct gptoss_config *c, char *buf, size_t size)
{
    snprintf(buf, size,
             "hidden %lld, %lld layers (%d sliding of %d), %d experts (%d used) of ff %lld, "
             "vocab %lld",
             (long long)c->n_embd, (long long)c->n_layers, c->n_swa, c->window, c->n_expert,
             c->n_used, (long long)c->n_ff_exp, (long long)c->n_vocab);
}

/* The list's walk: where each entry goes in the model (dst NULL when only checking). */
struct decls {
    splash_decl_emit_fn emit;
    void *ctx;
    int bind; /* a model is being built */
};

#define DST(d, field) ((d)->bind ? (void *)&(field) : NULL)

static void decl(const struct decls *ds, int32_t il, const char *name, uint32_t accept,
                 uint32_t flags, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t bind,
                 void *dst)
{
    tensor_decls_emit(ds->emit, ds->ctx, il, name, accept, flags, n_dims, ne0, ne1, ne2, bind, dst);
}

/* A matrix or a stack of experts (kernels weight), and a vector or table of floats. */
static void weight(const struct decls *ds, int32_t il, const char *name, uint32_t accept,
                   int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, void *dst)
{
    decl(ds, il, name, accept, 0, n_dims, ne0, ne1, ne2, SPLASH_BIND_WEIGHT, dst);
}

static void floats(const struct decls *ds, int32_t il, const char *name, uint32_t accept,
                   int n_dims, int64_t ne0, int64_t ne1, void *dst)
{
    decl(ds, il, name, accept, 0, n_dims, ne0, ne1, 1, SPLASH_BIND_FLOATS, dst);
}

enum splash_status gptoss_declare(const struct splash_host *host, const struct splash_meta *m,
                                  void *model_, splash_decl_emit_fn emit, void *ctx,
                                  struct splash_err *err)
{
    struct gptoss_model *model = model_;
    struct gptoss_config read;
    const struct gptoss_config *c = &read;
    if (model) {
        c = &model->cfg;
    } else {
        enum splash_status st = gptoss_config_read(host, m, &read, err);
        if (st)
            return st;
    }
    struct decls d = {.emit = emit, .ctx = ctx, .bind = model != NULL};
    const uint32_t lin = SPLASH_ACCEPT_LINEAR, flt = SPLASH_ACCEPT_FLOAT;
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, x = c->n_expert, ff = c->n_ff_exp;
    decl(&d, -1, "token_embd.weight", lin, 0, 2, e, c->n_vocab, 1, SPLASH_BIND_TENSOR,
         DST(&d, model->tok_embd));
    floats(&d, -1, "output_norm.weight", flt, 1, e, 1, DST(&d, model->output_norm));
    /* a tied head is the token table again, bound as a weight */
    if (c->tied)
        decl(&d, -1, "token_embd.weight", lin, SPLASH_DECL_AGAIN, 2, e, c->n_vocab, 1,
             SPLASH_BIND_WEIGHT, DST(&d, model->output));
    else
        weight(&d, -1, "output.weight", lin, 2, e, c->n_vocab, 1, DST(&d, model->output));
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        struct gptoss_layer *L = model ? &model->layers[il] : NULL;
        floats(&d, il, "attn_norm.weight", flt, 1, e, 1, DST(&d, L->attn_norm));
        weight(&d, il, "attn_q.weight", lin, 2, e, qd, 1, DST(&d, L->wq));
        weight(&d, il, "attn_k.weight", lin, 2, e, kvd, 1, DST(&d, L->wk));
        weight(&d, il, "attn_v.weight", lin, 2, e, kvd, 1, DST(&d, L->wv));
        weight(&d, il, "attn_output.weight", lin, 2, qd, e, 1, DST(&d, L->wo));
        floats(&d, il, "attn_q.bias", flt, 1, qd, 1, DST(&d, L->bq));
        floats(&d, il, "attn_k.bias", flt, 1, kvd, 1, DST(&d, L->bk));
        floats(&d, il, "attn_v.bias", flt, 1, kvd, 1, DST(&d, L->bv));
        floats(&d, il, "attn_output.bias", flt, 1, e, 1, DST(&d, L->bo));
        floats(&d, il, "attn_sinks.weight", SPLASH_ACCEPT_F32, 1, c->n_head, 1, DST(&d, L->sinks));
        floats(&d, il, "post_attention_norm.weight", flt, 1, e, 1, DST(&d, L->post_norm));
        /* the router stays a float, as the reference quantizer leaves it (F16 in the test
         * data, F32 in OpenAI's own GGUFs) */
        weight(&d, il, "ffn_gate_inp.weight", flt, 2, e, x, 1, DST(&d, L->router));
        floats(&d, il, "ffn_gate_inp.bias", flt, 1, x, 1, DST(&d, L->b_router));
        weight(&d, il, "ffn_gate_exps.weight", lin, 3, e, ff, x, DST(&d, L->gate));
        weight(&d, il, "ffn_up_exps.weight", lin, 3, e, ff, x, DST(&d, L->up));
        weight(&d, il, "ffn_down_exps.weight", lin, 3, ff, e, x, DST(&d, L->down));
        floats(&d, il, "ffn_gate_exps.bias", flt, 2, ff, x, DST(&d, L->b_gate));
        floats(&d, il, "ffn_up_exps.bias", flt, 2, ff, x, DST(&d, L->b_up));
        floats(&d, il, "ffn_down_exps.bias", flt, 2, e, x, DST(&d, L->b_down));
    }
    return SPLASH_OK;
}
