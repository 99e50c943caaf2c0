/* A DFlash2 draft's config.json, held to the sizes its kernels are built for and to its
 * target (models.md "Drafts"). Every refusal names the key or tensor. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "families/drafts/dflash2/dflash2.h"

struct reader {
    const struct splash_host *host;
    const struct splash_meta *m;
    const char *file; /* "config.json" */
    struct splash_err *err;
};

static enum splash_status get_int(const struct reader *r, const char *key, int64_t *out,
                                  int64_t dflt, int required)
{
    const struct splash_meta_api *api = r->host->meta;
    struct splash_err e;
    enum splash_status st = api->get_i64(r->m, key, out, &e);
    if (st == SPLASH_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return SPLASH_OK;
    }
    if (st == SPLASH_ERR_NOT_FOUND)
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is missing", r->file, key);
    if (st)
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is not an integer", r->file,
                              key);
    return SPLASH_OK;
}

/* A number, or dflt when absent (or null where null_ok). */
static enum splash_status get_num(const struct reader *r, const char *key, double *out,
                                  double dflt)
{
    const struct splash_meta_api *api = r->host->meta;
    struct splash_err e;
    enum splash_status st = api->get_f64(r->m, key, out, &e);
    if (st == SPLASH_ERR_NOT_FOUND) {
        *out = dflt;
        return SPLASH_OK;
    }
    if (st || !isfinite(*out))
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is not a finite number",
                              r->file, key);
    return SPLASH_OK;
}

static enum splash_status must_equal(const struct reader *r, const char *key, int64_t have,
                                     int64_t want, const char *why)
{
    if (have != want)
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is %lld, %s %lld", r->file, key,
                              (long long)have, why, (long long)want);
    return SPLASH_OK;
}

/* The target's decoder layers (without MTP/nextn layers) and its token table and head. */
static enum splash_status read_target(const struct splash_host *host,
                                      const struct splash_meta *t, struct dflash2_config *cfg,
                                      struct splash_err *err)
{
    const struct splash_meta_api *api = host->meta;
    struct splash_err e;
    int64_t layers = 0;
    if (api->source(t) == SPLASH_META_GGUF) {
        const char *arch = NULL;
        char key[96];
        if (api->get_str(t, "general.architecture", &arch, &e))
            return splash_err_set(err, SPLASH_ERR_INVALID, "target: general.architecture is missing");
        snprintf(key, sizeof key, "%s.block_count", arch);
        if (api->get_i64(t, key, &layers, &e))
            return splash_err_set(err, SPLASH_ERR_INVALID, "target: %s is missing", key);
        int64_t nextn = 0;
        snprintf(key, sizeof key, "%s.nextn_predict_layers", arch);
        if (api->get_i64(t, key, &nextn, &e) == SPLASH_OK && nextn > 0 && nextn < layers)
            layers -= nextn;
    } else if (api->get_i64(t, "text_config.num_hidden_layers", &layers, &e) &&
               api->get_i64(t, "num_hidden_layers", &layers, &e)) {
        return splash_err_set(err, SPLASH_ERR_INVALID, "target: num_hidden_layers is missing");
    }
    cfg->target_layers = layers;
    static const char *const embd[] = {"token_embd.weight", "model.embed_tokens.weight",
                                       "model.language_model.embed_tokens.weight",
                                       "language_model.model.embed_tokens.weight", NULL};
    static const char *const head[] = {"output.weight", "lm_head.weight",
                                       "language_model.lm_head.weight", NULL};
    const struct splash_tensor_info *te = NULL, *th = NULL;
    for (size_t i = 0; embd[i] && !te; i++)
        if ((te = api->tensor_find(t, embd[i])))
            snprintf(cfg->target_embd, sizeof cfg->target_embd, "%s", embd[i]);
    if (!te && api->n_tensors(t) == 0 && api->source(t) == SPLASH_META_CONFIG) {
        /* a config.json alone (model-check before a download): its sizes */
        if ((api->get_i64(t, "text_config.hidden_size", &cfg->n_embd, &e) &&
             api->get_i64(t, "hidden_size", &cfg->n_embd, &e)) ||
            (api->get_i64(t, "text_config.vocab_size", &cfg->n_vocab, &e) &&
             api->get_i64(t, "vocab_size", &cfg->n_vocab, &e)))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "target: hidden_size or vocab_size is missing");
        snprintf(cfg->target_embd, sizeof cfg->target_embd, "%s", embd[0]);
        snprintf(cfg->target_head, sizeof cfg->target_head, "%s", embd[0]);
        return SPLASH_OK;
    }
    if (!te)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "target: no token table (token_embd.weight) for the draft to read");
    for (size_t i = 0; head[i] && !th; i++)
        if ((th = api->tensor_find(t, head[i])))
            snprintf(cfg->target_head, sizeof cfg->target_head, "%s", head[i]);
    if (!th)
        snprintf(cfg->target_head, sizeof cfg->target_head, "%s", cfg->target_embd);
    if (te->n_dims != 2)
        return splash_err_set(err, SPLASH_ERR_INVALID, "target: %s is not a matrix",
                              cfg->target_embd);
    /* GGUF order: ne[0] the hidden size, ne[1] the vocabulary */
    cfg->n_embd = te->ne[0];
    cfg->n_vocab = te->ne[1];
    if (th && (th->n_dims != 2 || th->ne[0] != te->ne[0] || th->ne[1] != te->ne[1]))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "target: %s is not shaped like its token table", cfg->target_head);
    return SPLASH_OK;
}

static enum splash_status read_taps(const struct reader *r, struct dflash2_config *cfg)
{
    const struct splash_meta_api *api = r->host->meta;
    const char *key = "dflash_config.target_layer_ids";
    struct splash_err e;
    size_t n = 0;
    if (api->arr_len(r->m, key, &n, &e))
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is missing", r->file, key);
    if (n < 1 || n > SPLASH_DRAFT_MAX_TAPS)
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s holds %zu layers, 1 to %d",
                              r->file, key, n, SPLASH_DRAFT_MAX_TAPS);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (api->arr_i64(r->m, key, i, &v, &e))
            return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s[%zu] is not an integer",
                                  r->file, key, i);
        if (v < 0 || v >= cfg->target_layers)
            return splash_err_set(r->err, SPLASH_ERR_INVALID,
                                  "%s: %s[%zu] is %lld, the target has layers 0 to %lld", r->file,
                                  key, i, (long long)v, (long long)cfg->target_layers - 1);
        if (i && v <= cfg->taps[i - 1])
            return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: %s is not ascending",
                                  r->file, key);
        cfg->taps[i] = (int32_t)v;
    }
    cfg->n_taps = (int32_t)n;
    return SPLASH_OK;
}

/* Every layer windowed (the kernels attend the last `window` context rows). */
static enum splash_status read_layer_types(const struct reader *r, const struct dflash2_config *c)
{
    const struct splash_meta_api *api = r->host->meta;
    struct splash_err e;
    size_t n = 0;
    if (api->arr_len(r->m, "layer_types", &n, &e) == SPLASH_ERR_NOT_FOUND)
        return SPLASH_OK;
    if (n != (size_t)c->n_layers)
        return splash_err_set(r->err, SPLASH_ERR_INVALID,
                              "%s: layer_types holds %zu entries for %d layers", r->file, n,
                              c->n_layers);
    for (size_t i = 0; i < n; i++) {
        const char *t = NULL;
        if (api->arr_str(r->m, "layer_types", i, &t, &e) || strcmp(t, "sliding_attention"))
            return splash_err_set(r->err, SPLASH_ERR_INVALID,
                                  "%s: layer_types[%zu] is %s, the draft kernels run "
                                  "sliding_attention only",
                                  r->file, i, t ? t : "not a string");
    }
    return SPLASH_OK;
}

/* The tensors, where the meta holds them (a header copy or the files). */
static enum splash_status check_tensor(const struct reader *r, const char *name, int64_t ne0,
                                       int64_t ne1, int64_t ne2)
{
    const struct splash_tensor_info *t = r->host->meta->tensor_find(r->m, name);
    if (!t)
        return splash_err_set(r->err, SPLASH_ERR_INVALID, "%s: tensor %s is missing", r->file,
                              name);
    int dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    if (t->n_dims != dims || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2)
        return splash_err_set(r->err, SPLASH_ERR_INVALID,
                              "%s: tensor %s is [%lld, %lld, %lld], expected [%lld, %lld, %lld] "
                              "(GGUF order)",
                              r->file, name, (long long)t->ne[0], (long long)t->ne[1],
                              (long long)t->ne[2], (long long)ne0, (long long)ne1,
                              (long long)ne2);
    if (t->dtype != SPLASH_DTYPE_BF16 && t->dtype != SPLASH_DTYPE_F32 &&
        t->dtype != SPLASH_DTYPE_F16)
        return splash_err_set(r->err, SPLASH_ERR_INVALID,
                              "%s: tensor %s is %s, a draft holds BF16 (or F16, F32)", r->file,
                              name, t->type_name ? t->type_name : "?");
    return SPLASH_OK;
}

static enum splash_status check_tensors(const struct reader *r, const struct dflash2_config *c)
{
    const int64_t H = c->n_embd, F = c->n_ff, Q = DFLASH2_HEADS * DFLASH2_HEAD_DIM,
                  KV = DFLASH2_KV_HEADS * DFLASH2_HEAD_DIM, K = c->conv_kernel;
    const int64_t dyn = 2 * K * c->conv_groups;
    enum splash_status st;
    char n[128];
#define T(name_, a, b, d)                                                                          \
    if ((st = check_tensor(r, name_, a, b, d)))                                                    \
    return st
    T("fc.weight", (int64_t)c->n_taps * H, H, 1);
    T("hidden_norm.weight", H, 1, 1);
    T("norm.weight", H, 1, 1);
    T("candidate_selector.hidden_projection.weight", H, DFLASH2_RANK, 1);
    T("candidate_selector.predecessor_codebook", DFLASH2_RANK, c->n_vocab, 1);
    T("candidate_selector.successor_codebook", DFLASH2_RANK, c->n_vocab, 1);
    if (r->host->meta->tensor_find(r->m, "mask_embedding"))
        T("mask_embedding", H, 1, 1);
    for (int32_t il = 0; il < c->n_layers; il++) {
#define L(suffix, a, b, d)                                                                         \
    snprintf(n, sizeof n, "layers.%d.%s", il, suffix);                                            \
    T(n, a, b, d)
        L("input_layernorm.weight", H, 1, 1);
        L("post_attention_layernorm.weight", H, 1, 1);
        L("self_attn.q_proj.weight", H, Q, 1);
        L("self_attn.k_proj.weight", H, KV, 1);
        L("self_attn.v_proj.weight", H, KV, 1);
        L("self_attn.o_proj.weight", Q, H, 1);
        L("self_attn.q_norm.weight", DFLASH2_HEAD_DIM, 1, 1);
        L("self_attn.k_norm.weight", DFLASH2_HEAD_DIM, 1, 1);
        L("mlp.gate_proj.weight", H, F, 1);
        L("mlp.up_proj.weight", H, F, 1);
        L("mlp.down_proj.weight", F, H, 1);
        L("attention_conv.base_kernel", H, K, 2);
        L("attention_conv.kernel_projection.weight", H, dyn, 1);
        L("mlp_conv.base_kernel", H, K, 2);
        L("mlp_conv.kernel_projection.weight", H, dyn, 1);
#undef L
    }
#undef T
    return SPLASH_OK;
}

/* A Flint target: a GGUF of architecture flint, or Flint's flat config.json. */
static int target_is_flint(const struct splash_host *host, const struct splash_meta *t)
{
    const struct splash_meta_api *api = host->meta;
    const char *name = NULL;
    struct splash_err e;
    if (api->source(t) == SPLASH_META_GGUF)
        return !api->get_str(t, "general.architecture", &name, &e) && !strcmp(name, "flint");
    return !api->get_str(t, "model_type", &name, &e) && !strcmp(name, "flint");
}

enum splash_status dflash2_config_read(const struct splash_host *host,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       struct dflash2_config *cfg, struct splash_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    struct reader r = {.host = host, .m = draft, .file = "config.json", .err = err};
    enum splash_status st;
    if ((st = read_target(host, target, cfg, err)))
        return st;
    int64_t v;
    double d;
    /* sizes: the target's, and the kernels' */
    if ((st = get_int(&r, "hidden_size", &v, 0, 1)) ||
        (st = must_equal(&r, "hidden_size", v, cfg->n_embd, "the target's hidden size is")))
        return st;
    if ((st = get_int(&r, "vocab_size", &v, 0, 1)) ||
        (st = must_equal(&r, "vocab_size", v, cfg->n_vocab, "the target's vocabulary is")))
        return st;
    if (cfg->n_embd % DFLASH2_CONV_GROUP || cfg->n_embd % 64)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: hidden_size %lld is not whole 64-channel groups",
                              (long long)cfg->n_embd);
    if ((st = get_int(&r, "num_attention_heads", &v, 0, 1)) ||
        (st = must_equal(&r, "num_attention_heads", v, DFLASH2_HEADS, "the kernels take")))
        return st;
    if ((st = get_int(&r, "num_key_value_heads", &v, 0, 1)) ||
        (st = must_equal(&r, "num_key_value_heads", v, DFLASH2_KV_HEADS, "the kernels take")))
        return st;
    if ((st = get_int(&r, "head_dim", &v, DFLASH2_HEAD_DIM, 0)) ||
        (st = must_equal(&r, "head_dim", v, DFLASH2_HEAD_DIM, "the kernels take")))
        return st;
    if ((st = get_int(&r, "num_hidden_layers", &v, 0, 1)))
        return st;
    if (v < 1 || v > DFLASH2_MAX_LAYERS)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: num_hidden_layers is %lld, 1 to %d", (long long)v,
                              DFLASH2_MAX_LAYERS);
    cfg->n_layers = (int32_t)v;
    if ((st = get_int(&r, "intermediate_size", &v, 0, 1)))
        return st;
    if (v < 64 || v % 64 || v > (1 << 20))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: intermediate_size is %lld, a positive multiple of 64",
                              (long long)v);
    cfg->n_ff = v;
    if ((st = get_num(&r, "rms_norm_eps", &d, 1e-6)))
        return st;
    if (d <= 0 || d > 1)
        return splash_err_set(err, SPLASH_ERR_INVALID, "config.json: rms_norm_eps is %g", d);
    cfg->rms_eps = (float)d;
    double base = 0;
    if ((st = get_num(&r, "rope_theta", &base, 0)))
        return st;
    if (base == 0 && (st = get_num(&r, "rope_parameters.rope_theta", &base, 0)))
        return st;
    if (base <= 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: rope_theta is %s", base == 0 ? "missing" : "<= 1");
    cfg->rope_base = base;
    if ((st = get_int(&r, "sliding_window", &v, DFLASH2_WINDOW, 0)) ||
        (st = must_equal(&r, "sliding_window", v, DFLASH2_WINDOW, "the kernels take")))
        return st;
    cfg->window = DFLASH2_WINDOW;
    if ((st = read_layer_types(&r, cfg)))
        return st;

    /* dflash_config */
    if ((st = read_taps(&r, cfg)))
        return st;
    if ((st = get_int(&r, "dflash_config.mask_token_id", &v, 0, 1)))
        return st;
    if (v < 0 || v >= cfg->n_vocab)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.mask_token_id is %lld, not a token of "
                              "the target's vocabulary of %lld",
                              (long long)v, (long long)cfg->n_vocab);
    if (target_is_flint(host, target) &&
        (v < DFLASH2_FLINT_FIRST_MASK || v > DFLASH2_FLINT_LAST_MASK))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.mask_token_id is %lld, not one of Flint's "
                              "reserved special tokens (%d to %d) a Flint draft masks with",
                              (long long)v, DFLASH2_FLINT_FIRST_MASK, DFLASH2_FLINT_LAST_MASK);
    cfg->mask_token = (int32_t)v;
    if ((st = get_int(&r, "dflash_config.block_size", &v, 0, 1)))
        return st;
    if (v < DFLASH2_MIN_BLOCK || v > 64)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.block_size is %lld, 8 to 64 (a cycle "
                              "drafts 8 rows)",
                              (long long)v);
    cfg->block = (int32_t)v;
    if ((st = get_int(&r, "dflash_config.conv_group_size", &v, 0, 1)) ||
        (st = must_equal(&r, "dflash_config.conv_group_size", v, DFLASH2_CONV_GROUP,
                         "the kernels take")))
        return st;
    cfg->conv_groups = (int32_t)(cfg->n_embd / DFLASH2_CONV_GROUP);
    if ((st = get_int(&r, "dflash_config.conv_kernel_size", &v, 0, 1)))
        return st;
    if (v < 1 || v > DFLASH2_MAX_KERNEL)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.conv_kernel_size is %lld, 1 to %d",
                              (long long)v, DFLASH2_MAX_KERNEL);
    cfg->conv_kernel = (int32_t)v;
    if ((st = get_int(&r, "dflash_config.selector_rank", &v, 0, 1)) ||
        (st = must_equal(&r, "dflash_config.selector_rank", v, DFLASH2_RANK, "the kernels take")))
        return st;
    if ((st = get_int(&r, "dflash_config.selector_top_k", &v, 0, 1)) ||
        (st = must_equal(&r, "dflash_config.selector_top_k", v, DFLASH2_TOP_K,
                         "the kernels take")))
        return st;
    if ((st = get_num(&r, "dflash_config.final_logit_softcapping", &d, 0)))
        return st;
    if (d < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.final_logit_softcapping is negative");
    cfg->softcap = (float)d;
    if ((st = get_num(&r, "dflash_config.output_multiplier", &d, 1.0)))
        return st;
    if (d <= 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.output_multiplier is not positive");
    cfg->out_mult = (float)d;
    const char *red = NULL;
    struct splash_err e;
    if (host->meta->get_str(draft, "dflash_config.target_hidden_reduction", &red, &e) ==
            SPLASH_OK &&
        strcmp(red, "none"))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: dflash_config.target_hidden_reduction is %s, this "
                              "target's taps are its layers' outputs (none)",
                              red);
    if (host->meta->n_tensors(draft) && (st = check_tensors(&r, cfg)))
        return st;
    return SPLASH_OK;
}

void dflash2_config_summary(const struct dflash2_config *cfg, char *buf, size_t size)
{
    char taps[64] = "";
    size_t used = 0;
    for (int32_t i = 0; i < cfg->n_taps && used < sizeof taps; i++)
        used += (size_t)snprintf(taps + used, sizeof taps - used, "%s%d", i ? "," : "",
                                 cfg->taps[i]);
    snprintf(buf, size, "%d layer%s, hidden %lld, block %d, taps %s, window %d", cfg->n_layers,
             cfg->n_layers == 1 ? "" : "s", (long long)cfg->n_embd, cfg->block, taps,
             cfg->window);
}
