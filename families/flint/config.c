/* Flint's header: sizes, the layer patterns (sliding window, RoPE), the dense leading
 * layers, the router and the stop tokens, read and held to what the family runs; and
 * the flat configuration they derive (gguf.flint_text_config). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "families/common/meta_keys.h"
#include "families/flint/flint.h"

/* A per-layer pattern: a bool (or integer) array of one value per layer, as llama.cpp
 * writes attention.sliding_window_pattern. */
static enum splash_status read_layer_pattern(const struct splash_meta_api *api,
                                             const struct splash_meta *m, const char *suffix,
                                             int64_t n_layers, uint8_t *out,
                                             struct splash_err *err)
{
    char k[128];
    meta_key(k, sizeof k, FLINT_ARCH, suffix);
    size_t len = 0;
    enum splash_status st;
    if (!api->has(m, k))
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: %s is missing", api->path(m), k);
    if ((st = api->arr_len(m, k, &len, err)))
        return st;
    if (len != (size_t)n_layers)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu values for %lld layers",
                              api->path(m), k, len, (long long)n_layers);
    for (size_t i = 0; i < len; i++) {
        int64_t v;
        if ((st = api->arr_i64(m, k, i, &v, err)))
            return st;
        out[i] = v != 0;
    }
    return SPLASH_OK;
}

/* The router: expert_gating_func (llama.cpp's enum: 1 softmax, 2 sigmoid), expert_weights_norm
 * (norm_topk_prob) and expert_weights_scale (routed_scaling_factor). */
static enum splash_status read_router(const struct splash_meta_api *api,
                                      const struct splash_meta *m, struct flint_config *c,
                                      struct splash_err *err)
{
    char k[128];
    int64_t gating = 0;
    enum splash_status st;
    if ((st = meta_get_int(api, m, FLINT_ARCH, "expert_gating_func", 0, 0, 16, &gating, err)))
        return st;
    if (gating != FLINT_GATING_SOFTMAX && gating != FLINT_GATING_SIGMOID)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: %lld (1 softmax or 2 sigmoid served)", api->path(m),
                              meta_key(k, sizeof k, FLINT_ARCH, "expert_gating_func"),
                              (long long)gating);
    c->gating = (int32_t)gating;
    c->norm_topk = 0;
    meta_key(k, sizeof k, FLINT_ARCH, "expert_weights_norm");
    if (api->has(m, k) && (st = api->get_bool(m, k, &c->norm_topk, err)))
        return st;
    c->routed_scale = 1.0f;
    meta_key(k, sizeof k, FLINT_ARCH, "expert_weights_scale");
    c->has_routed_scale = api->has(m, k);
    return meta_get_float(api, m, FLINT_ARCH, "expert_weights_scale", 1, 0, &c->routed_scale, err);
}

/* RoPE of the layers that have it: NeoX pairs over rope.dimension_count dims of each head.
 * Flint's full layers have no RoPE to stretch, so no scaling is served. */
static enum splash_status read_rope(const struct splash_meta_api *api, const struct splash_meta *m,
                                    struct flint_config *c, struct splash_err *err)
{
    char k[128];
    enum splash_status st;
    int64_t n_rot = c->head_dim;
    if ((st = meta_get_int(api, m, FLINT_ARCH, "rope.dimension_count", 1, 2, c->head_dim, &n_rot,
                           err)))
        return st;
    if (n_rot % 2)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld is odd", api->path(m),
                              meta_key(k, sizeof k, FLINT_ARCH, "rope.dimension_count"),
                              (long long)n_rot);
    c->n_rot = (int32_t)n_rot;
    float base = 10000.0f;
    if ((st = meta_get_float(api, m, FLINT_ARCH, "rope.freq_base", 1, 0, &base, err)))
        return st;
    meta_key(k, sizeof k, FLINT_ARCH, "rope.scaling.type");
    const char *type = "none";
    if (api->has(m, k) && (st = api->get_str(m, k, &type, err)))
        return st;
    if (strcmp(type, "none"))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: \"%s\": Flint's RoPE is not scaled (none served)",
                              api->path(m), k, type);
    c->rope = (struct splash_rope_args){.size = sizeof c->rope,
                                        .n_dims = c->n_rot,
                                        .freq_base = base,
                                        .freq_scale = 1.0f,
                                        .attn_factor = 1.0f,
                                        .n_ctx_orig = (int32_t)c->n_ctx_train};
    return SPLASH_OK;
}

/* Flint's stop tokens (models.md "Chat formats"); the first is its end of text. */
static const char *const flint_stops[] = {"<|end_of_text|>", "<|user|>", "<|observation|>",
                                          "<|developer|>"};
#define N_FLINT_STOPS (sizeof flint_stops / sizeof flint_stops[0])
#define TOKEN_CONTROL 3

/* eos_token_id: tokenizer.ggml.eog_token_ids where the header has it (unsloth's), else the
 * IDs of Flint's stop tokens in the vocabulary, each a control token; the header's
 * eos_token_id must be one of them. A header with no vocabulary at all (the model writer's
 * plan, before it adds the tokenizer) states none; a model is not built without one. */
static enum splash_status read_eos(const struct splash_meta_api *api, const struct splash_meta *m,
                                   struct flint_config *c, struct splash_err *err)
{
    const char *path = api->path(m);
    enum splash_status st;
    size_t n_tok = 0, n_types = 0;
    c->n_eos = 0;
    if (!api->has(m, "tokenizer.ggml.tokens"))
        return SPLASH_OK;
    if ((st = api->arr_len(m, "tokenizer.ggml.tokens", &n_tok, err)))
        return st;
    if (n_tok != (size_t)c->n_vocab)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: tokenizer.ggml.tokens: %zu tokens, token_embd.weight has %lld "
                              "rows", path, n_tok, (long long)c->n_vocab);
    int has_types = api->has(m, "tokenizer.ggml.token_type") &&
                    !api->arr_len(m, "tokenizer.ggml.token_type", &n_types, NULL) &&
                    n_types == n_tok;
    if (api->has(m, "tokenizer.ggml.eog_token_ids")) {
        size_t n = 0;
        if ((st = api->arr_len(m, "tokenizer.ggml.eog_token_ids", &n, err)))
            return st;
        if (n < 1 || n > FLINT_MAX_EOS)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: tokenizer.ggml.eog_token_ids: %zu ids (1 to %d served)",
                                  path, n, FLINT_MAX_EOS);
        for (size_t i = 0; i < n; i++) {
            int64_t id;
            if ((st = api->arr_i64(m, "tokenizer.ggml.eog_token_ids", i, &id, err)))
                return st;
            if (id < 0 || id >= c->n_vocab)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: tokenizer.ggml.eog_token_ids[%zu]: %lld is not in the "
                                      "vocabulary of %lld", path, i, (long long)id,
                                      (long long)c->n_vocab);
            c->eos[c->n_eos++] = (int32_t)id;
        }
    } else {
        /* special tokens sit at the end of the vocabulary */
        for (size_t s = 0; s < N_FLINT_STOPS; s++) {
            int32_t found = -1;
            for (size_t i = n_tok; i-- > 0 && found < 0;) {
                const char *t;
                if (!api->arr_str(m, "tokenizer.ggml.tokens", i, &t, NULL) &&
                    !strcmp(t, flint_stops[s]))
                    found = (int32_t)i;
            }
            if (found < 0)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: the vocabulary has no %s, one of Flint's stop tokens "
                                      "(and no tokenizer.ggml.eog_token_ids)", path,
                                      flint_stops[s]);
            int64_t type = TOKEN_CONTROL;
            if (has_types && (st = api->arr_i64(m, "tokenizer.ggml.token_type", (size_t)found,
                                                &type, err)))
                return st;
            if (type != TOKEN_CONTROL)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: tokenizer.ggml.token_type[%d]: %s is of type %lld, "
                                      "Flint's stop tokens are control tokens (3)", path, found,
                                      flint_stops[s], (long long)type);
            c->eos[c->n_eos++] = found;
        }
    }
    int64_t eos;
    if ((st = api->get_i64(m, "tokenizer.ggml.eos_token_id", &eos, err)))
        return st;
    for (int32_t i = 0; i < c->n_eos; i++)
        if (c->eos[i] == eos)
            return SPLASH_OK;
    return splash_err_set(err, SPLASH_ERR_INVALID,
                          "%s: tokenizer.ggml.eos_token_id: %lld is none of Flint's stop tokens",
                          path, (long long)eos);
}

enum splash_status flint_config_read(const struct splash_host *host, const struct splash_meta *m,
                                     struct flint_config *c, struct splash_err *err)
{
    const struct splash_meta_api *api = host->meta;
    const char *path = api->path(m);
    memset(c, 0, sizeof *c);
    if (api->source(m) != SPLASH_META_GGUF)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: Flint loads from a GGUF only (no MLX layout is served)", path);
    static const struct meta_int_key keys[] = {
        {"context_length", 1, INT32_MAX},
        {"embedding_length", 1, 1 << 20},
        {"block_count", 1, FLINT_MAX_LAYERS},
        {"attention.head_count", 1, 1024},
        {"attention.head_count_kv", 1, 1024},
        {"attention.key_length", 2, 1024},
        {"attention.value_length", 2, 1024},
        {"attention.sliding_window", 1, INT32_MAX},
        {"leading_dense_block_count", 0, FLINT_MAX_LAYERS},
        {"expert_count", 1, FLINT_MAX_EXPERTS},
        {"expert_used_count", 1, FLINT_MAX_USED},
        {"expert_feed_forward_length", 1, 1 << 20},
        {"expert_shared_feed_forward_length", 1, 1 << 20},
    };
    int64_t v[sizeof keys / sizeof keys[0]];
    enum splash_status st;
    if ((st = meta_get_ints(api, m, FLINT_ARCH, keys, sizeof keys / sizeof keys[0], v, err)))
        return st;
    c->n_ctx_train = v[0];
    c->n_embd = v[1];
    c->n_layers = v[2];
    c->n_head = (int32_t)v[3];
    c->n_head_kv = (int32_t)v[4];
    c->head_dim = (int32_t)v[5];
    c->window = (int32_t)v[7];
    c->n_dense = (int32_t)v[8];
    c->n_expert = (int32_t)v[9];
    c->n_used = (int32_t)v[10];
    c->n_ff_exp = v[11];
    c->n_ff_shexp = v[12];
    char k[128];
    if ((st = meta_check_shapes(path, FLINT_ARCH, v[5], v[6], c->n_head, c->n_head_kv, c->n_expert,
                                c->n_used, err)))
        return st;
    if (c->n_dense > c->n_layers)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %d of %lld layers", path,
                              meta_key(k, sizeof k, FLINT_ARCH, "leading_dense_block_count"),
                              c->n_dense, (long long)c->n_layers);
    /* the dense layers' width: only a model with dense layers states it */
    if (c->n_dense > 0 && (st = meta_get_int(api, m, FLINT_ARCH, "feed_forward_length", 0, 1,
                                             1 << 20, &c->n_ff, err)))
        return st;
    if ((st = meta_get_float(api, m, FLINT_ARCH, "attention.layer_norm_rms_epsilon", 0, 0,
                             &c->rms_eps, err)) ||
        (st = read_layer_pattern(api, m, "attention.sliding_window_pattern", c->n_layers, c->is_swa,
                                 err)) ||
        (st =
             read_layer_pattern(api, m, "attention.rope_pattern", c->n_layers, c->has_rope, err)) ||
        (st = read_rope(api, m, c, err)) || (st = read_router(api, m, c, err)))
        return st;
    c->n_swa = 0;
    for (int64_t il = 0; il < c->n_layers; il++)
        c->n_swa += c->is_swa[il];
    /* a selection bias (DeepSeek's exp_probs_b) is no part of Flint's router */
    for (int64_t il = c->n_dense; il < c->n_layers; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%lld.exp_probs_b.bias", (long long)il);
        if (api->tensor_find(m, name))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s: a router selection bias is not Flint's (not served)",
                                  path, name);
    }
    const struct splash_tensor_info *te = api->tensor_find(m, "token_embd.weight");
    if (!te)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: token_embd.weight is missing", path);
    c->n_vocab = te->ne[1];
    c->tied = api->tensor_find(m, "output.weight") == NULL;
    return read_eos(api, m, c, err);
}

void flint_config_summary(const struct flint_config *c, char *buf, size_t size)
{
    int32_t no_rope = 0;
    for (int64_t il = 0; il < c->n_layers; il++)
        no_rope += !c->has_rope[il];
    snprintf(buf, size,
             "hidden %lld, %lld layers (%d sliding of %d, %d without RoPE), %d dense, %d experts "
             "(%d used) of ff %lld + shared %lld, vocab %lld",
             (long long)c->n_embd, (long long)c->n_layers, c->n_swa, c->window, no_rope,
             c->n_dense, c->n_expert, c->n_used, (long long)c->n_ff_exp,
             (long long)c->n_ff_shexp, (long long)c->n_vocab);
}

/* ---- the flat configuration ------------------------------------------------------ */

struct text {
    char *buf;
    size_t size, len;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + (t->len < t->size ? t->len : t->size),
                      t->len < t->size ? t->size - t->len : 0, fmt, ap);
    va_end(ap);
    t->len += n > 0 ? (size_t)n : 0;
}

enum splash_status flint_text_config(const struct flint_config *c, char *buf, size_t size,
                                     struct splash_err *err)
{
    struct text t = {.buf = buf, .size = size};
    put(&t, "{\"model_type\":\"flint\",\"hidden_size\":%lld,\"num_hidden_layers\":%lld,",
        (long long)c->n_embd, (long long)c->n_layers);
    if (c->n_dense > 0)
        put(&t, "\"intermediate_size\":%lld,", (long long)c->n_ff);
    put(&t,
        "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,"
        "\"vocab_size\":%lld,\"max_position_embeddings\":%lld,\"rms_norm_eps\":%g,"
        "\"rope_theta\":%g,\"num_experts\":%d,\"num_experts_per_tok\":%d,"
        "\"moe_intermediate_size\":%lld,\"shared_expert_intermediate_size\":%lld,"
        "\"router_score_function\":\"%s\",\"norm_topk_prob\":%s,",
        c->n_head, c->n_head_kv, c->head_dim, (long long)c->n_vocab, (long long)c->n_ctx_train,
        (double)c->rms_eps, (double)c->rope.freq_base, c->n_expert, c->n_used,
        (long long)c->n_ff_exp, (long long)c->n_ff_shexp,
        c->gating == FLINT_GATING_SIGMOID ? "sigmoid" : "softmax",
        c->norm_topk ? "true" : "false");
    if (c->has_routed_scale)
        put(&t, "\"routed_scaling_factor\":%g,", (double)c->routed_scale);
    put(&t, "\"mlp_only_layers\":[");
    for (int32_t il = 0; il < c->n_dense; il++)
        put(&t, "%s%d", il ? "," : "", il);
    put(&t, "],\"sliding_window\":%d,\"layer_types\":[", c->window);
    for (int64_t il = 0; il < c->n_layers; il++)
        put(&t, "%s\"%s\"", il ? "," : "", c->is_swa[il] ? "sliding_attention" : "full_attention");
    put(&t, "],\"no_rope_layer_indices\":[");
    int first = 1;
    for (int64_t il = 0; il < c->n_layers; il++)
        if (!c->has_rope[il]) {
            put(&t, "%s%lld", first ? "" : ",", (long long)il);
            first = 0;
        }
    put(&t, "],\"eos_token_id\":[");
    for (int32_t i = 0; i < c->n_eos; i++)
        put(&t, "%s%d", i ? "," : "", c->eos[i]);
    put(&t, "],\"tie_word_embeddings\":%s}", c->tied ? "true" : "false");
    if (t.len >= size)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "flint_text_config: %zu bytes, %zu to hold it", t.len + 1, size);
    return SPLASH_OK;
}
