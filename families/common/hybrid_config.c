/* The hybrid trunk's sizes from GGUF metadata or config.json, and its tensors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/tensor_decls.h"

/* ---- key reading ---------------------------------------------------------- */

struct reader {
    const struct splash_host *host;
    const struct splash_meta *m;
    const struct splash_meta_api *api;
    const char *arch;
    int gguf;
    char key[128];
};

/* The key as this source spells it: "qwen35.<gguf>" or, for config.json,
 * "text_config.<cfg>" when the config nests its text model, else "<cfg>". */
static const char *key_of(struct reader *r, const char *gguf, const char *cfg)
{
    if (r->gguf)
        snprintf(r->key, sizeof r->key, "%s.%s", r->arch, gguf);
    else if (r->api->has(r->m, "text_config"))
        snprintf(r->key, sizeof r->key, "text_config.%s", cfg);
    else
        snprintf(r->key, sizeof r->key, "%s", cfg);
    return r->key;
}

static enum splash_status get_i64(struct reader *r, const char *gguf, const char *cfg, int64_t *out,
                                  struct splash_err *err)
{
    return r->api->get_i64(r->m, key_of(r, gguf, cfg), out, err);
}

static enum splash_status get_i32(struct reader *r, const char *gguf, const char *cfg, int32_t *out,
                                  struct splash_err *err)
{
    int64_t v;
    enum splash_status st = get_i64(r, gguf, cfg, &v, err);
    if (st)
        return st;
    if (v < 0 || v > INT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %lld is out of range",
                              r->api->path(r->m), r->key, (long long)v);
    *out = (int32_t)v;
    return SPLASH_OK;
}

/* ---- config ------------------------------------------------------------------ */

static enum splash_status read_layer_types(struct reader *r, struct hybrid_config *cfg,
                                           struct splash_err *err)
{
    const struct splash_meta_api *api = r->api;
    int64_t interval = 0;
    if (r->gguf) {
        if (api->has(r->m, key_of(r, "full_attention_interval", ""))) {
            enum splash_status st = get_i64(r, "full_attention_interval", "", &interval, err);
            if (st)
                return st;
        } else {
            /* no interval: the tensor directory is the per-layer list */
            char name[96];
            for (int64_t il = 0; il < cfg->n_layers; il++) {
                snprintf(name, sizeof name, "blk.%lld.attn_q.weight", (long long)il);
                cfg->is_attn[il] = api->tensor_find(r->m, name) != NULL;
            }
            return SPLASH_OK;
        }
    } else {
        const char *key = key_of(r, "", "layer_types");
        size_t n;
        if (api->has(r->m, key) && api->arr_len(r->m, key, &n, err) == SPLASH_OK) {
            if ((int64_t)n != cfg->n_layers)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: %s: %zu entries for %lld layers", api->path(r->m), key,
                                      n, (long long)cfg->n_layers);
            for (size_t i = 0; i < n; i++) {
                const char *s;
                enum splash_status st = api->arr_str(r->m, key, i, &s, err);
                if (st)
                    return st;
                if (!strcmp(s, "full_attention"))
                    cfg->is_attn[i] = 1;
                else if (!strcmp(s, "linear_attention"))
                    cfg->is_attn[i] = 0;
                else
                    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s[%zu]: \"%s\"",
                                          api->path(r->m), key, i, s);
            }
            return SPLASH_OK;
        }
        enum splash_status st = get_i64(r, "", "full_attention_interval", &interval, err);
        if (st)
            return st;
    }
    if (interval < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %lld", api->path(r->m), r->key,
                              (long long)interval);
    for (int64_t il = 0; il < cfg->n_layers; il++)
        cfg->is_attn[il] = (il + 1) % interval == 0;
    return SPLASH_OK;
}

static enum splash_status read_rope(struct reader *r, struct hybrid_config *cfg,
                                    struct splash_err *err)
{
    const struct splash_meta_api *api = r->api;
    enum splash_status st;
    memset(cfg->rope_sections, 0, sizeof cfg->rope_sections);
    if (r->gguf) {
        if ((st = get_i32(r, "rope.dimension_count", "", &cfg->n_rot, err)))
            return st;
        if ((st = api->get_f64(r->m, key_of(r, "rope.freq_base", ""), &cfg->rope_base, err)))
            return st;
        const char *key = key_of(r, "rope.dimension_sections", "");
        size_t n = 0;
        if (api->has(r->m, key) && (st = api->arr_len(r->m, key, &n, err)))
            return st;
        for (size_t i = 0; i < n && i < 4; i++) {
            int64_t v;
            if ((st = api->arr_i64(r->m, key, i, &v, err)))
                return st;
            cfg->rope_sections[i] = (int32_t)v;
        }
        return SPLASH_OK;
    }
    /* config.json: rope_parameters (transformers 5) or the flat keys */
    double factor = 1.0;
    char sub[160];
    const char *base = key_of(r, "", "rope_parameters");
    int nested = api->has(r->m, base);
    snprintf(sub, sizeof sub, "%s.rope_theta", base);
    if (!nested || api->get_f64(r->m, sub, &cfg->rope_base, NULL))
        if ((st = api->get_f64(r->m, key_of(r, "", "rope_theta"), &cfg->rope_base, err)))
            return st;
    base = key_of(r, "", "rope_parameters");
    snprintf(sub, sizeof sub, "%s.partial_rotary_factor", base);
    if (!nested || api->get_f64(r->m, sub, &factor, NULL))
        if (api->has(r->m, key_of(r, "", "partial_rotary_factor")))
            if ((st = api->get_f64(r->m, r->key, &factor, err)))
                return st;
    cfg->n_rot = (int32_t)lround(cfg->head_dim * factor);
    base = key_of(r, "", "rope_parameters");
    snprintf(sub, sizeof sub, "%s.mrope_section", base);
    size_t n = 0;
    if (nested && api->has(r->m, sub) && (st = api->arr_len(r->m, sub, &n, err)))
        return st;
    for (size_t i = 0; i < n && i < 3; i++) {
        int64_t v;
        if ((st = api->arr_i64(r->m, sub, i, &v, err)))
            return st;
        cfg->rope_sections[i] = (int32_t)v;
    }
    return SPLASH_OK;
}

enum splash_status hybrid_config_read(const struct splash_host *host, const struct splash_meta *m,
                                      const char *arch, const struct hybrid_ffn_ops *ffn,
                                      struct hybrid_config *cfg, struct splash_err *err)
{
    const int dense = ffn == &hybrid_ffn_dense;
    const struct splash_meta_api *api = host->meta;
    struct reader r = {
        .host = host, .m = m, .api = api, .arch = arch, .gguf = api->source(m) == SPLASH_META_GGUF};
    enum splash_status st;
    const char *path = api->path(m);
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);
    cfg->source = api->source(m);
    cfg->gdn_grouped = !r.gguf;
    cfg->norm_plus_one = !r.gguf;

    if ((st = get_i64(&r, "embedding_length", "hidden_size", &cfg->n_embd, err)) ||
        (st = get_i64(&r, "block_count", "num_hidden_layers", &cfg->n_layers, err)) ||
        (dense &&
         (st = get_i64(&r, "feed_forward_length", "intermediate_size", &cfg->n_ff, err))) ||
        (st = get_i64(&r, "context_length", "max_position_embeddings", &cfg->n_ctx_train, err)) ||
        (st = get_i32(&r, "attention.head_count", "num_attention_heads", &cfg->n_head, err)) ||
        (st =
             get_i32(&r, "attention.head_count_kv", "num_key_value_heads", &cfg->n_head_kv, err)) ||
        (st = get_i32(&r, "attention.key_length", "head_dim", &cfg->head_dim, err)) ||
        (st = get_i32(&r, "ssm.conv_kernel", "linear_conv_kernel_dim", &cfg->conv_kernel, err)) ||
        (st = get_i32(&r, "ssm.state_size", "linear_key_head_dim", &cfg->d_k, err)) ||
        (st = get_i32(&r, "ssm.group_count", "linear_num_key_heads", &cfg->n_k_heads, err)) ||
        (st = get_i32(&r, "ssm.time_step_rank", "linear_num_value_heads", &cfg->n_v_heads, err)))
        return st;
    /* llama.cpp counts a GGUF's MTP blocks (blk.{n_layer}.nextn.*) in block_count; the
     * trunk is the layers before them (config.json states them apart, mtp_num_hidden_layers) */
    if (r.gguf && api->has(m, key_of(&r, "nextn_predict_layers", ""))) {
        if ((st = get_i32(&r, "nextn_predict_layers", "", &cfg->n_nextn, err)))
            return st;
        if (cfg->n_nextn >= cfg->n_layers)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s.nextn_predict_layers: %d of %lld blocks leave no layer",
                                  path, arch, cfg->n_nextn, (long long)cfg->n_layers);
        cfg->n_layers -= cfg->n_nextn;
    }
    double eps;
    if ((st = api->get_f64(m, key_of(&r, "attention.layer_norm_rms_epsilon", "rms_norm_eps"), &eps,
                           err)))
        return st;
    cfg->rms_eps = (float)eps;
    if (r.gguf) {
        int32_t v_len, inner;
        if ((st = get_i32(&r, "attention.value_length", "", &v_len, err)) ||
            (st = get_i32(&r, "ssm.inner_size", "", &inner, err)))
            return st;
        if (v_len != cfg->head_dim)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s.attention.value_length: %d, key_length is %d", path, arch,
                                  v_len, cfg->head_dim);
        if (cfg->n_v_heads <= 0 || inner % cfg->n_v_heads)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s.ssm.inner_size: %d is not a multiple of %d value heads",
                                  path, arch, inner, cfg->n_v_heads);
        cfg->d_v = inner / cfg->n_v_heads;
        const struct splash_tensor_info *te = api->tensor_find(m, "token_embd.weight");
        if (!te)
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: token_embd.weight is missing",
                                  path);
        cfg->n_vocab = te->ne[1];
        cfg->tied = api->tensor_find(m, "output.weight") == NULL;
    } else {
        if ((st = get_i32(&r, "", "linear_value_head_dim", &cfg->d_v, err)) ||
            (st = get_i64(&r, "", "vocab_size", &cfg->n_vocab, err)))
            return st;
        int tie = 0;
        if (api->get_bool(m, key_of(&r, "", "tie_word_embeddings"), &tie, NULL) &&
            api->get_bool(m, "tie_word_embeddings", &tie, NULL))
            tie = 0;
        cfg->tied = tie;
    }
    if ((st = read_rope(&r, cfg, err)))
        return st;

#define KEY(gguf, json) key_of(&r, gguf, json)
    /* what the kernels can run; each refusal names the key as this source spells it */
    if (cfg->n_layers < 1 || cfg->n_layers > HYBRID_MAX_LAYERS)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld layers (1 to %d served)",
                              path, KEY("block_count", "num_hidden_layers"),
                              (long long)cfg->n_layers, HYBRID_MAX_LAYERS);
    const char *empty = cfg->n_embd < 1          ? KEY("embedding_length", "hidden_size")
                        : dense && cfg->n_ff < 1 ? KEY("feed_forward_length", "intermediate_size")
                        : cfg->n_vocab < 1 ? (r.gguf ? "token_embd.weight" : KEY("", "vocab_size"))
                        : cfg->n_ctx_train < 1 ? KEY("context_length", "max_position_embeddings")
                                               : NULL;
    if (empty)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: an empty model dimension", path,
                              empty);
    if (cfg->n_head < 1 || cfg->n_head_kv < 1 || cfg->n_head % cfg->n_head_kv ||
        cfg->n_head / cfg->n_head_kv > 64)
        return splash_err_set(
            err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %d query heads over %d KV heads", path,
            cfg->n_head < 1 ? KEY("attention.head_count", "num_attention_heads")
                            : KEY("attention.head_count_kv", "num_key_value_heads"),
            cfg->n_head, cfg->n_head_kv);
    if (cfg->head_dim < 2 || cfg->head_dim % 2 || cfg->n_rot < 0 || cfg->n_rot > cfg->head_dim ||
        cfg->n_rot % 2 || cfg->n_rot / 2 > HYBRID_MAX_ROPE_PAIRS)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: head_dim %d with %d rotary dims", path,
                              cfg->head_dim < 2 || cfg->head_dim % 2
                                  ? KEY("attention.key_length", "head_dim")
                                  : KEY("rope.dimension_count", "partial_rotary_factor"),
                              cfg->head_dim, cfg->n_rot);
    if (cfg->n_k_heads < 1 || cfg->n_v_heads < 1 || cfg->n_v_heads % cfg->n_k_heads)
        return splash_err_set(
            err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %d GDN value heads over %d key heads", path,
            cfg->n_k_heads < 1 ? KEY("ssm.group_count", "linear_num_key_heads")
                               : KEY("ssm.time_step_rank", "linear_num_value_heads"),
            cfg->n_v_heads, cfg->n_k_heads);
    if (cfg->d_k < 1 || cfg->d_k > 1024 || cfg->d_v < 1)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: GDN head dims %d / %d", path,
                              cfg->d_k < 1 || cfg->d_k > 1024
                                  ? KEY("ssm.state_size", "linear_key_head_dim")
                                  : KEY("ssm.inner_size", "linear_value_head_dim"),
                              cfg->d_k, cfg->d_v);
    if (cfg->conv_kernel < 1 || cfg->conv_kernel > 16)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: GDN conv kernel %d (1 to 16)",
                              path, KEY("ssm.conv_kernel", "linear_conv_kernel_dim"),
                              cfg->conv_kernel);
    if (!(cfg->rms_eps > 0.0f))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: RMS epsilon %g", path,
                              KEY("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
                              (double)cfg->rms_eps);
    if (!(cfg->rope_base > 0.0))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: RoPE base %g", path,
                              KEY("rope.freq_base", "rope_theta"), cfg->rope_base);
    int32_t sect = 0;
    const char *sect_key = KEY("rope.dimension_sections", "rope_parameters.mrope_section");
    for (int i = 0; i < 4; i++) {
        if (cfg->rope_sections[i] < 0)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: a negative RoPE section", path,
                                  sect_key);
        sect += cfg->rope_sections[i];
    }
    if (sect > cfg->n_rot / 2)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s: RoPE sections cover %d pairs of %d rotary dims", path,
                              sect_key, sect, cfg->n_rot);
#undef KEY
    cfg->conv_dim = 2 * (int64_t)cfg->n_k_heads * cfg->d_k + (int64_t)cfg->n_v_heads * cfg->d_v;
    if ((st = read_layer_types(&r, cfg, err)))
        return st;
    cfg->n_attn = 0;
    for (int64_t il = 0; il < cfg->n_layers; il++)
        cfg->n_attn += cfg->is_attn[il];
    return SPLASH_OK;
}

void hybrid_config_summary(const struct hybrid_config *cfg, char *buf, size_t size)
{
    int n = snprintf(buf, size, "hidden %lld, %lld layers (%d attention), vocab %lld",
                     (long long)cfg->n_embd, (long long)cfg->n_layers, cfg->n_attn,
                     (long long)cfg->n_vocab);
    if (cfg->n_nextn > 0 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ", %d MTP layer%s (a draft: --speculative mtp)", cfg->n_nextn,
                 cfg->n_nextn == 1 ? "" : "s");
}

/* ---- the declaration list ------------------------------------------------------ */

void hybrid_decl(const struct hybrid_decls *h, int32_t il, const char *name, uint32_t accept,
                 uint32_t flags, int32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
                 uint32_t bind, void *dst)
{
    tensor_decls_emit(h->emit, h->ctx, il, name, accept, flags, n_dims, ne0, ne1, ne2, bind, dst);
}

/* A matrix (n_in inputs, n_out outputs) bound as a kernels weight, or a vector bound as floats. */
static void weight(const struct hybrid_decls *h, int32_t il, const char *name, uint32_t accept,
                   int64_t n_in, int64_t n_out, void *dst)
{
    hybrid_decl(h, il, name, accept, 0, n_out > 1 ? 2 : 1, n_in, n_out, 1, SPLASH_BIND_WEIGHT, dst);
}

static void floats(const struct hybrid_decls *h, int32_t il, const char *name, uint32_t accept,
                   int64_t ne0, int64_t ne1, void *dst)
{
    hybrid_decl(h, il, name, accept, 0, ne1 > 1 ? 2 : 1, ne0, ne1, 1, SPLASH_BIND_FLOATS, dst);
}

/* The dense FFN's list lives here beside the trunk's; its forward in hybrid_model.c. */
void hybrid_ffn_dense_declare(const struct hybrid_decls *h, int32_t il, void *layer_ffn)
{
    struct hybrid_dense_ffn *f = layer_ffn;
    int64_t e = h->cfg->n_embd, ff = h->cfg->n_ff;
    weight(h, il, "ffn_gate.weight", SPLASH_ACCEPT_LINEAR, e, ff, f ? &f->gate : NULL);
    weight(h, il, "ffn_up.weight", SPLASH_ACCEPT_LINEAR, e, ff, f ? &f->up : NULL);
    weight(h, il, "ffn_down.weight", SPLASH_ACCEPT_LINEAR, ff, e, f ? &f->down : NULL);
}

enum splash_status hybrid_declare(const struct splash_host *host, const struct splash_meta *m,
                                  const char *arch, const struct hybrid_ffn_ops *ffn,
                                  const void *ffn_config, struct hybrid_model *model,
                                  splash_decl_emit_fn emit, void *ctx, struct splash_err *err)
{
    struct hybrid_config read;
    const struct hybrid_config *c = &read;
    if (model) {
        c = &model->cfg;
        ffn = model->ffn;
    } else {
        enum splash_status st = hybrid_config_read(host, m, arch, ffn, &read, err);
        if (st)
            return st;
    }
    struct hybrid_decls h = {.cfg = c, .model = model, .ffn_config = ffn_config, .host = host,
                             .m = m, .emit = emit, .ctx = ctx};
    const uint32_t lin = SPLASH_ACCEPT_LINEAR, flt = SPLASH_ACCEPT_FLOAT, f32 = SPLASH_ACCEPT_F32;
    int64_t e = c->n_embd, inner = (int64_t)c->n_v_heads * c->d_v;
    int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    hybrid_decl(&h, -1, "token_embd.weight", lin, 0, 2, e, c->n_vocab, 1, SPLASH_BIND_TENSOR,
                HYBRID_DST(&h, model->tok_embd));
    floats(&h, -1, "output_norm.weight", flt, e, 1, HYBRID_DST(&h, model->output_norm));
    /* a tied head is the token table again, bound as a weight */
    if (c->tied)
        hybrid_decl(&h, -1, "token_embd.weight", lin, SPLASH_DECL_AGAIN, 2, e, c->n_vocab, 1,
                    SPLASH_BIND_WEIGHT, HYBRID_DST(&h, model->output));
    else
        weight(&h, -1, "output.weight", lin, e, c->n_vocab, HYBRID_DST(&h, model->output));
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        struct hybrid_layer *L = model ? &model->layers[il] : NULL;
        floats(&h, il, "attn_norm.weight", flt, e, 1, HYBRID_DST(&h, L->attn_norm));
        floats(&h, il, "post_attention_norm.weight", flt, e, 1, HYBRID_DST(&h, L->post_norm));
        if (c->is_attn[il]) {
            weight(&h, il, "attn_q.weight", lin, e, 2 * q_dim, HYBRID_DST(&h, L->wq));
            weight(&h, il, "attn_k.weight", lin, e, kv_dim, HYBRID_DST(&h, L->wk));
            weight(&h, il, "attn_v.weight", lin, e, kv_dim, HYBRID_DST(&h, L->wv));
            weight(&h, il, "attn_output.weight", lin, q_dim, e, HYBRID_DST(&h, L->wo));
            floats(&h, il, "attn_q_norm.weight", flt, c->head_dim, 1, HYBRID_DST(&h, L->q_norm));
            floats(&h, il, "attn_k_norm.weight", flt, c->head_dim, 1, HYBRID_DST(&h, L->k_norm));
        } else {
            weight(&h, il, "attn_qkv.weight", lin, e, c->conv_dim, HYBRID_DST(&h, L->qkv));
            weight(&h, il, "attn_gate.weight", lin, e, inner, HYBRID_DST(&h, L->z));
            weight(&h, il, "ssm_alpha.weight", lin | f32, e, c->n_v_heads,
                   HYBRID_DST(&h, L->alpha));
            weight(&h, il, "ssm_beta.weight", lin | f32, e, c->n_v_heads, HYBRID_DST(&h, L->beta));
            floats(&h, il, "ssm_conv1d.weight", f32, c->conv_kernel, c->conv_dim,
                   HYBRID_DST(&h, L->conv_w));
            floats(&h, il, "ssm_dt.bias", f32, c->n_v_heads, 1, HYBRID_DST(&h, L->dt_bias));
            floats(&h, il, "ssm_a", f32, c->n_v_heads, 1, HYBRID_DST(&h, L->ssm_a));
            floats(&h, il, "ssm_norm.weight", flt, c->d_v, 1, HYBRID_DST(&h, L->ssm_norm));
            weight(&h, il, "ssm_out.weight", lin, inner, e, HYBRID_DST(&h, L->ssm_out));
        }
        ffn->declare(&h, il, L ? L->ffn : NULL);
    }
    /* The MTP (nextn) blocks after the trunk, in llama.cpp's layout: a full-attention layer
     * with the block's own input projection and norms. Checked and written (make-model),
     * never bound: the trunk does not run them; the NextN draft (families/drafts/nextn)
     * reads them from the file. The block's own token table, head and head norm are
     * optional (the model's stand in). */
    struct hybrid_decls hn = h;
    hn.model = NULL;
    const uint32_t opt = SPLASH_DECL_OPTIONAL;
    for (int32_t il = (int32_t)c->n_layers; il < (int32_t)c->n_layers + c->n_nextn; il++) {
        weight(&hn, il, "nextn.eh_proj.weight", lin | f32, 2 * e, e, NULL);
        floats(&hn, il, "nextn.enorm.weight", flt, e, 1, NULL);
        floats(&hn, il, "nextn.hnorm.weight", flt, e, 1, NULL);
        hybrid_decl(&hn, il, "nextn.embed_tokens.weight", lin, opt, 2, e, c->n_vocab, 1,
                    SPLASH_BIND_NONE, NULL);
        hybrid_decl(&hn, il, "nextn.shared_head_head.weight", lin, opt, 2, e, c->n_vocab, 1,
                    SPLASH_BIND_NONE, NULL);
        hybrid_decl(&hn, il, "nextn.shared_head_norm.weight", flt, opt, 1, e, 1, 1,
                    SPLASH_BIND_NONE, NULL);
        floats(&hn, il, "attn_norm.weight", flt, e, 1, NULL);
        floats(&hn, il, "post_attention_norm.weight", flt, e, 1, NULL);
        weight(&hn, il, "attn_q.weight", lin, e, 2 * q_dim, NULL);
        weight(&hn, il, "attn_k.weight", lin, e, kv_dim, NULL);
        weight(&hn, il, "attn_v.weight", lin, e, kv_dim, NULL);
        weight(&hn, il, "attn_output.weight", lin, q_dim, e, NULL);
        floats(&hn, il, "attn_q_norm.weight", flt, c->head_dim, 1, NULL);
        floats(&hn, il, "attn_k_norm.weight", flt, c->head_dim, 1, NULL);
        ffn->declare(&hn, il, NULL);
    }
    return SPLASH_OK;
}
