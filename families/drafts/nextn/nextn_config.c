/* The NextN block's sizes from the target's GGUF header, and its tensors held to them. */
#include <stdio.h>
#include <string.h>

#include "families/drafts/nextn/nextn.h"

struct reader {
    const struct splash_meta_api *api;
    const struct splash_meta *m;
    const char *path, *arch;
};

static enum splash_status get_i64(const struct reader *r, const char *key, int64_t *out,
                                  struct splash_err *err)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", r->arch, key);
    if (r->api->get_i64(r->m, k, out, err) != SPLASH_OK)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s is missing or not a number",
                              r->path, k);
    return SPLASH_OK;
}

static enum splash_status get_i32(const struct reader *r, const char *key, int32_t *out,
                                  struct splash_err *err)
{
    int64_t v = 0;
    enum splash_status st = get_i64(r, key, &v, err);
    if (!st && (v < 0 || v > INT32_MAX))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s.%s: %lld is out of range",
                              r->path, r->arch, key, (long long)v);
    *out = (int32_t)v;
    return st;
}

/* Block tensor NAME of layer il (or a global one, il < 0) of shape ne0 x ne1 (x ne2);
 * optional ones may be absent (0 returned in *found). */
static enum splash_status want3(const struct reader *r, int32_t il, const char *name,
                                int64_t ne0, int64_t ne1, int64_t ne2, int optional, int *found,
                                struct splash_err *err)
{
    char n[128];
    if (il >= 0)
        snprintf(n, sizeof n, "blk.%d.%s", il, name);
    else
        snprintf(n, sizeof n, "%s", name);
    const struct splash_tensor_info *t = r->api->tensor_find(r->m, n);
    if (found)
        *found = t != NULL;
    if (!t)
        return optional ? SPLASH_OK
                        : splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                         "%s: the MTP block's %s is missing", r->path, n);
    int64_t e1 = t->n_dims > 1 ? t->ne[1] : 1, e2 = t->n_dims > 2 ? t->ne[2] : 1;
    if (t->ne[0] != ne0 || e1 != ne1 || e2 != ne2 || t->n_dims > 3)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s is %lld x %lld x %lld, the MTP block needs %lld x %lld x "
                              "%lld",
                              r->path, n, (long long)t->ne[0], (long long)e1, (long long)e2,
                              (long long)ne0, (long long)ne1, (long long)ne2);
    if (!t->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s is of a type (%s) no format "
                              "plugin reads", r->path, n, t->type_name ? t->type_name : "?");
    return SPLASH_OK;
}

static enum splash_status want(const struct reader *r, int32_t il, const char *name, int64_t ne0,
                               int64_t ne1, int optional, int *found, struct splash_err *err)
{
    return want3(r, il, name, ne0, ne1, 1, optional, found, err);
}

/* The MoE block's sizes ({arch}.expert_count, expert_used_count; the widths from its
 * tensors) and its tensors held to them. */
static enum splash_status read_moe(const struct reader *r, struct nextn_config *cfg, int32_t il,
                                   struct splash_err *err)
{
    enum splash_status st;
    char n[96];
    if ((st = get_i32(r, "expert_count", &cfg->n_expert, err)) ||
        (st = get_i32(r, "expert_used_count", &cfg->n_used, err)))
        return st;
    if (cfg->n_used < 1 || cfg->n_used > NEXTN_MAX_USED || cfg->n_used > cfg->n_expert)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s.expert_used_count: %d of %d experts (1 to %d served)",
                              r->path, r->arch, cfg->n_used, cfg->n_expert, NEXTN_MAX_USED);
    snprintf(n, sizeof n, "blk.%d.ffn_gate_up_exps.weight", il);
    if (r->api->tensor_find(r->m, n))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: the MTP block's experts fuse gate and up (%s), which the MTP "
                              "proposer does not run",
                              r->path, n);
    snprintf(n, sizeof n, "blk.%d.ffn_gate_exps.weight", il);
    const struct splash_tensor_info *g = r->api->tensor_find(r->m, n);
    if (!g)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: the MTP block's %s is missing",
                              r->path, n);
    cfg->n_ff_exp = g->n_dims > 1 ? g->ne[1] : 1;
    snprintf(n, sizeof n, "blk.%d.ffn_gate_shexp.weight", il);
    const struct splash_tensor_info *sg = r->api->tensor_find(r->m, n);
    cfg->n_ff_shexp = sg && sg->n_dims > 1 ? sg->ne[1] : 0;
    const int64_t e = cfg->n_embd, x = cfg->n_expert, ff = cfg->n_ff_exp, sh = cfg->n_ff_shexp;
    if ((st = want(r, il, "ffn_gate_inp.weight", e, x, 0, NULL, err)) ||
        (st = want3(r, il, "ffn_gate_exps.weight", e, ff, x, 0, NULL, err)) ||
        (st = want3(r, il, "ffn_up_exps.weight", e, ff, x, 0, NULL, err)) ||
        (st = want3(r, il, "ffn_down_exps.weight", ff, e, x, 0, NULL, err)))
        return st;
    if (sh > 0 &&
        ((st = want(r, il, "ffn_gate_inp_shexp.weight", e, 1, 0, NULL, err)) ||
         (st = want(r, il, "ffn_gate_shexp.weight", e, sh, 0, NULL, err)) ||
         (st = want(r, il, "ffn_up_shexp.weight", e, sh, 0, NULL, err)) ||
         (st = want(r, il, "ffn_down_shexp.weight", sh, e, 0, NULL, err))))
        return st;
    cfg->moe = 1;
    return SPLASH_OK;
}

enum splash_status nextn_config_read(const struct splash_host *host, const struct splash_meta *m,
                                     struct nextn_config *cfg, struct splash_err *err)
{
    const struct splash_meta_api *api = host->meta;
    /* messages name the file, not the folder it was installed in */
    const char *path = api->path(m), *slash = strrchr(path, '/');
    struct reader r = {.api = api, .m = m, .path = slash ? slash + 1 : path};
    memset(cfg, 0, sizeof *cfg);
    if (api->source(m) != SPLASH_META_GGUF)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: the model's MTP layers are read from GGUF files only", r.path);
    const char *arch = NULL;
    if (api->get_str(m, "general.architecture", &arch, err) != SPLASH_OK || !arch)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: general.architecture is missing",
                              r.path);
    snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);
    r.arch = cfg->arch;
    char key[96];
    snprintf(key, sizeof key, "%s.nextn_predict_layers", arch);
    int64_t nextn = 0;
    if (!api->has(m, key) || api->get_i64(m, key, &nextn, err) != SPLASH_OK || nextn < 1)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s: the model has no MTP (nextn) layers (%s is %s)", r.path, key,
                              api->has(m, key) ? "0" : "absent");
    int64_t blocks = 0;
    enum splash_status st;
    if ((st = get_i64(&r, "block_count", &blocks, err)) ||
        (st = get_i64(&r, "embedding_length", &cfg->n_embd, err)) ||
        (st = get_i32(&r, "attention.head_count", &cfg->n_head, err)) ||
        (st = get_i32(&r, "attention.head_count_kv", &cfg->n_head_kv, err)) ||
        (st = get_i32(&r, "attention.key_length", &cfg->head_dim, err)) ||
        (st = get_i32(&r, "rope.dimension_count", &cfg->n_rot, err)))
        return st;
    if (nextn >= blocks)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s: %lld of %lld blocks leave no layer", r.path, key,
                              (long long)nextn, (long long)blocks);
    cfg->n_nextn = (int32_t)nextn;
    cfg->n_layers = (int32_t)(blocks - nextn);
    double v = 0;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    if (api->get_f64(m, key, &v, err) != SPLASH_OK || !(v > 0))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s is missing or not positive",
                              r.path, key);
    cfg->rope_base = v;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if (api->get_f64(m, key, &v, err) != SPLASH_OK || !(v > 0))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s is missing or not positive",
                              r.path, key);
    cfg->rms_eps = (float)v;
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
    size_t n_sec = 0;
    if (api->has(m, key) && api->arr_len(m, key, &n_sec, err) == SPLASH_OK)
        for (size_t i = 0; i < n_sec && i < 4; i++) {
            int64_t s = 0;
            if (api->arr_i64(m, key, i, &s, err) != SPLASH_OK || s < 0 || s > NEXTN_MAX_PAIRS)
                return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu] is not a section",
                                      r.path, key, i);
            cfg->rope_sections[i] = (int32_t)s;
        }
    if (cfg->n_embd < 1 || cfg->n_head < 1 || cfg->n_head_kv < 1 || cfg->n_head % cfg->n_head_kv ||
        cfg->head_dim < 2 || cfg->head_dim % 2 || cfg->n_rot < 0 || cfg->n_rot > cfg->head_dim ||
        cfg->n_rot % 2 || cfg->n_rot / 2 > NEXTN_MAX_PAIRS)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: hidden %lld, %d query heads over %d KV heads of %d (%d "
                              "rotary): not a shape the MTP block runs",
                              r.path, (long long)cfg->n_embd, cfg->n_head, cfg->n_head_kv,
                              cfg->head_dim, cfg->n_rot);
    const struct splash_tensor_info *te = api->tensor_find(m, "token_embd.weight");
    if (!te)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: token_embd.weight is missing",
                              r.path);
    cfg->n_vocab = te->ne[1];

    /* the first MTP block, right after the trunk: a dense FFN, or a MoE one */
    const int32_t il = cfg->n_layers;
    char n[96];
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", il);
    if (api->tensor_find(m, n)) {
        if ((st = read_moe(&r, cfg, il, err)))
            return st;
    } else {
        snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", il);
        const struct splash_tensor_info *fg = api->tensor_find(m, n);
        if (!fg)
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: the MTP block's %s is missing",
                                  r.path, n);
        cfg->n_ff = fg->n_dims > 1 ? fg->ne[1] : 1;
    }
    const int64_t e = cfg->n_embd, qd = (int64_t)cfg->n_head * cfg->head_dim,
                  kvd = (int64_t)cfg->n_head_kv * cfg->head_dim, ff = cfg->n_ff;
    int has_embd = 0, has_head = 0, has_norm = 0, has_output = 0;
    if ((st = want(&r, il, "nextn.eh_proj.weight", 2 * e, e, 0, NULL, err)) ||
        (st = want(&r, il, "nextn.enorm.weight", e, 1, 0, NULL, err)) ||
        (st = want(&r, il, "nextn.hnorm.weight", e, 1, 0, NULL, err)) ||
        (st = want(&r, il, "attn_norm.weight", e, 1, 0, NULL, err)) ||
        (st = want(&r, il, "post_attention_norm.weight", e, 1, 0, NULL, err)) ||
        (st = want(&r, il, "attn_q.weight", e, 2 * qd, 0, NULL, err)) ||
        (st = want(&r, il, "attn_k.weight", e, kvd, 0, NULL, err)) ||
        (st = want(&r, il, "attn_v.weight", e, kvd, 0, NULL, err)) ||
        (st = want(&r, il, "attn_output.weight", qd, e, 0, NULL, err)) ||
        (st = want(&r, il, "attn_q_norm.weight", cfg->head_dim, 1, 0, NULL, err)) ||
        (st = want(&r, il, "attn_k_norm.weight", cfg->head_dim, 1, 0, NULL, err)) ||
        (!cfg->moe && ((st = want(&r, il, "ffn_gate.weight", e, ff, 0, NULL, err)) ||
                       (st = want(&r, il, "ffn_up.weight", e, ff, 0, NULL, err)) ||
                       (st = want(&r, il, "ffn_down.weight", ff, e, 0, NULL, err)))) ||
        (st = want(&r, il, "nextn.embed_tokens.weight", e, cfg->n_vocab, 1, &has_embd, err)) ||
        (st = want(&r, il, "nextn.shared_head_head.weight", e, cfg->n_vocab, 1, &has_head, err)) ||
        (st = want(&r, il, "nextn.shared_head_norm.weight", e, 1, 1, &has_norm, err)) ||
        (st = want(&r, -1, "token_embd.weight", e, cfg->n_vocab, 0, NULL, err)) ||
        (st = want(&r, -1, "output.weight", e, cfg->n_vocab, 1, &has_output, err)))
        return st;
    if (has_embd)
        snprintf(cfg->embd, sizeof cfg->embd, "blk.%d.nextn.embed_tokens.weight", il);
    else
        snprintf(cfg->embd, sizeof cfg->embd, "token_embd.weight");
    if (has_head)
        snprintf(cfg->head, sizeof cfg->head, "blk.%d.nextn.shared_head_head.weight", il);
    else
        snprintf(cfg->head, sizeof cfg->head, "%s",
                 has_output ? "output.weight" : "token_embd.weight");
    if (has_norm)
        snprintf(cfg->head_norm, sizeof cfg->head_norm, "blk.%d.nextn.shared_head_norm.weight",
                 il);
    else if ((st = want(&r, -1, "output_norm.weight", e, 1, 0, NULL, err)))
        return st;
    else
        snprintf(cfg->head_norm, sizeof cfg->head_norm, "output_norm.weight");
    return SPLASH_OK;
}

void nextn_config_summary(const struct nextn_config *cfg, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s block %d (of %d), hidden %lld, block %d, window %d",
                     cfg->arch, cfg->n_layers, cfg->n_nextn, (long long)cfg->n_embd, NEXTN_BLOCK,
                     NEXTN_WINDOW);
    if (cfg->moe && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ", %d experts (%d used)", cfg->n_expert, cfg->n_used);
}
