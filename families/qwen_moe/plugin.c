/* The Qwen MoE hybrid family (GGUF qwen35moe; config model_type qwen3_5_moe and
 * qwen3_5_moe_text): the dense family's trunk (Gated DeltaNet layers interleaved
 * with gated full attention, families/common/hybrid*.c) with a mixture-of-experts
 * FFN in every layer (families/qwen_moe/moe*.c). */
#include <stdio.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/hybrid_presets.h"
#include "families/qwen_moe/moe.h"
#include "splash/family.h"
#include "splash/plugin.h"

#define QM_ARCH "qwen35moe"

/* ---- sizes ------------------------------------------------------------------------------ */

/* The sizes the family serves by name, each with the DFlash2 draft trained for it. A
 * GGUF may keep fewer routed experts than its size has and is still that size; any
 * other size of the architecture loads and runs too, unnamed. The vocabulary is not
 * part of a size (generated models shrink it). */
struct qm_size {
    const char *name;
    const char *draft;
    int64_t n_embd, n_layers;
    int32_t n_head, n_head_kv, head_dim;
    int32_t n_k_heads, n_v_heads, d_k, d_v;
    int32_t n_expert, n_used;
    int64_t n_ff_exp, n_ff_shexp;
};

static const struct qm_size qm_sizes[] = {
    /* Qwen3.5-35B-A3B has the same shape; its fine-tunes (Ornith-1.5-35B-A3B) are it */
    {"Qwen3.6-35B-A3B", "incoai/Qwen3.6-35B-A3B-DFlash2", 2048, 40, 16, 2, 256, 16, 32, 128, 128,
     256, 8, 512, 512},
    {"Qwen3.5-122B-A10B", "incoai/Qwen3.5-122B-A10B-DFlash2", 3072, 48, 32, 2, 256, 16, 64, 128,
     128, 256, 8, 1024, 1024},
    {"Qwen3.5-397B-A17B", "incoai/Qwen3.5-397B-A17B-DFlash2", 4096, 60, 32, 2, 256, 16, 64, 128,
     128, 512, 10, 1024, 1024},
};

/* The size whose every dimension c and e have, but for an expert count of at most
 * the size's. */
static const struct qm_size *qm_size_of(const struct hybrid_config *c, const struct moe_config *e)
{
    for (size_t i = 0; i < sizeof qm_sizes / sizeof qm_sizes[0]; i++) {
        const struct qm_size *s = &qm_sizes[i];
        if (s->n_embd == c->n_embd && s->n_layers == c->n_layers && s->n_head == c->n_head &&
            s->n_head_kv == c->n_head_kv && s->head_dim == c->head_dim &&
            s->n_k_heads == c->n_k_heads && s->n_v_heads == c->n_v_heads && s->d_k == c->d_k &&
            s->d_v == c->d_v && s->n_used == e->n_used && s->n_ff_exp == e->n_ff_exp &&
            s->n_ff_shexp == e->n_ff_shexp && e->n_expert <= s->n_expert)
            return s;
    }
    return NULL;
}

/* Ours unless the metadata names another architecture or model type. */
static int qm_claims(const struct splash_host *host, const struct splash_meta *m)
{
    const struct splash_meta_api *api = host->meta;
    const char *s = NULL;
    if (api->source(m) == SPLASH_META_GGUF)
        return api->get_str(m, "general.architecture", &s, NULL) == SPLASH_OK &&
               !strcmp(s, QM_ARCH);
    if (api->has(m, "text_config.model_type") &&
        api->get_str(m, "text_config.model_type", &s, NULL) == SPLASH_OK)
        return !strcmp(s, "qwen3_5_moe_text");
    return api->get_str(m, "model_type", &s, NULL) == SPLASH_OK &&
           (!strcmp(s, "qwen3_5_moe") || !strcmp(s, "qwen3_5_moe_text"));
}

static enum splash_status qm_check_config(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          struct splash_family_verdict *v, struct splash_err *err)
{
    memset(v, 0, sizeof *v);
    if (!qm_claims(host, m))
        return SPLASH_OK;
    struct hybrid_config cfg;
    struct moe_config moe;
    enum splash_status st;
    if ((st = hybrid_config_read(host, m, QM_ARCH, &moe_ffn_ops, &cfg, err)) ||
        (st = moe_config_read(host, m, QM_ARCH, &moe, err)))
        return st;
    const struct qm_size *size = qm_size_of(&cfg, &moe);
    /* an MLX target loads every expert its family has: fewer is a pruned checkpoint
     * no MLX loader here plans for */
    if (size && moe.n_expert < size->n_expert && cfg.source == SPLASH_META_CONFIG)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %snum_experts: %d, %s has %d (an MLX target's expert count "
                              "must be its family's)",
                              host->meta->path(m),
                              host->meta->has(m, "text_config") ? "text_config." : "", moe.n_expert,
                              size->name, size->n_expert);
    v->score = 100;
    snprintf(v->architecture, sizeof v->architecture, "Qwen MoE hybrid (%s)", QM_ARCH);
    if (size) {
        snprintf(v->size_name, sizeof v->size_name, "%s", size->name);
        snprintf(v->draft_repo, sizeof v->draft_repo, "%s", size->draft);
    }
    hybrid_config_summary(&cfg, v->summary, sizeof v->summary);
    moe_config_summary(&moe, v->summary, sizeof v->summary);
    snprintf(v->chat_format, sizeof v->chat_format, "qwen");
    if (size && moe.n_expert < size->n_expert) {
        size_t used = strlen(v->summary);
        snprintf(v->summary + used, sizeof v->summary - used, "; the family has %d experts",
                 size->n_expert);
    }
    return SPLASH_OK;
}

/* The family's one declaration list: checked by model-check, bound by model_create. */
static enum splash_status qm_declare(const struct splash_host *host, const struct splash_meta *m,
                                     void *model, splash_decl_emit_fn emit, void *ctx,
                                     struct splash_err *err)
{
    return moe_declare(host, m, QM_ARCH, model, emit, ctx, err);
}

static enum splash_status qm_declare_tensors(const struct splash_host *host,
                                             const struct splash_meta *m, splash_decl_emit_fn emit,
                                             void *ctx, struct splash_err *err)
{
    return qm_declare(host, m, NULL, emit, ctx, err);
}

/* ---- the model ---------------------------------------------------------------------------- */

static enum splash_status qm_model_create(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          const struct splash_model_opts *opts, void **model,
                                          struct splash_err *err)
{
    struct hybrid_model *hm;
    enum splash_status st =
        hybrid_model_create(host, m, QM_ARCH, &moe_ffn_ops, qm_declare, opts, &hm, err);
    if (st)
        return st;
    *model = hm;
    return SPLASH_OK;
}

static int qm_expert_stats(const void *model, struct splash_expert_stats *out)
{
    return moe_expert_stats(model, out);
}

static uint64_t qm_expert_resize(void *model, int32_t grow, uint64_t max_bytes)
{
    return moe_expert_resize(model, grow, max_bytes);
}

static const char *const qm_gguf_architectures[] = {QM_ARCH, NULL};
static const char *const qm_model_types[] = {"qwen3_5_moe", "qwen3_5_moe_text", NULL};

/* make-model's sizes: the hybrid trunk (HYBRID_PRESET_TRUNK's order), then experts, experts
 * used, an expert's FFN width, the shared expert's */
#define QM_PRESET_EXPERTS(n, used, ff_exp, ff_shexp)                                        \
    HYBRID_PRESET_U32("expert_count", n), HYBRID_PRESET_U32("expert_used_count", used),      \
        HYBRID_PRESET_U32("expert_feed_forward_length", ff_exp),                           \
        HYBRID_PRESET_U32("expert_shared_feed_forward_length", ff_shexp)

static const struct splash_preset_value qm_35b_4l[] = {
    HYBRID_PRESET_TRUNK(262144, 2048, 4, 512, 16, 2, 256, 64, 11, 11, 10, 0, 16, 32, 128, 128, 4),
    QM_PRESET_EXPERTS(256, 8, 512, 512), {0}};
static const struct splash_preset_value qm_64e_4l[] = {
    HYBRID_PRESET_TRUNK(262144, 2048, 4, 512, 16, 2, 256, 64, 11, 11, 10, 0, 16, 32, 128, 128, 4),
    QM_PRESET_EXPERTS(64, 8, 512, 512), {0}};
static const struct splash_preset_value qm_tiny[] = {
    HYBRID_PRESET_TRUNK(4096, 256, 4, 512, 4, 2, 64, 16, 4, 2, 2, 0, 2, 4, 64, 64, 4),
    QM_PRESET_EXPERTS(8, 2, 256, 256), {0}};
/* qwen35moe-tiny with an MTP block after its 4 layers (llama.cpp's blk.4.nextn.* layout) */
static const struct splash_preset_value qm_tiny_mtp[] = {
    HYBRID_PRESET_TRUNK(4096, 256, 5, 512, 4, 2, 64, 16, 4, 2, 2, 0, 2, 4, 64, 64, 4),
    QM_PRESET_EXPERTS(8, 2, 256, 256), HYBRID_PRESET_U32("nextn_predict_layers", 1), {0}};

static const struct splash_family_preset qm_presets[] = {
    {"qwen35moe-35b-a3b-4l", QM_ARCH,
     "Qwen3.5-35B-A3B's layers, four of them (layer 3 full attention)", 151936, 0, qm_35b_4l,
     "qwen"},
    {"qwen35moe-64e-4l", QM_ARCH, "the same layers with fewer experts than the family has",
     151936, 0, qm_64e_4l, "qwen"},
    {"qwen35moe-tiny", QM_ARCH, "the test data's tiny MoE model (README section 2)", 2048, 1,
     qm_tiny, "qwen"},
    {"qwen35moe-tiny-mtp", QM_ARCH, "qwen35moe-tiny with an MTP (nextn) block after its 4 layers",
     2048, 1, qm_tiny_mtp, "qwen"},
    {0}};

static const struct splash_family_plugin qm_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "qwen_moe", "0.1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = qm_gguf_architectures,
    .model_types = qm_model_types,
    .check_config = qm_check_config,
    .declare_tensors = qm_declare_tensors,
    .model_create = qm_model_create,
    .model_destroy = hybrid_family_model_destroy,
    .model_info = hybrid_family_model_info,
    .seq_create = hybrid_family_seq_create,
    .seq_destroy = hybrid_family_seq_destroy,
    .seq_truncate = hybrid_family_seq_truncate,
    .forward = hybrid_family_forward,
    .seq_fork = hybrid_family_seq_fork,
    .cache_bytes = hybrid_family_cache_bytes,
    .forward_taps = hybrid_family_forward_taps,
    .seq_keep_rows = hybrid_family_seq_keep_rows,
    .forward_runs = hybrid_family_forward_runs,
    .seq_saved_bytes = hybrid_family_seq_saved_bytes,
    .seq_save = hybrid_family_seq_save,
    .seq_load = hybrid_family_seq_load,
    .seq_save_page = hybrid_family_seq_save_page,
    .seq_rest_bytes = hybrid_family_seq_rest_bytes,
    .seq_save_rest = hybrid_family_seq_save_rest,
    .seq_load_parts = hybrid_family_seq_load_parts,
    .presets = qm_presets,
    .expert_stats = qm_expert_stats,
    .expert_resize = qm_expert_resize,
};

static const struct splash_plugin_header *qm_entry(const struct splash_host *host)
{
    return &qm_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_qwen_moe, qm_entry)
