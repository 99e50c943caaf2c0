/* The dense Qwen hybrid family (GGUF qwen35; config model_type qwen3_5 and
 * qwen3_5_text): Gated DeltaNet layers interleaved with gated full attention,
 * a SwiGLU FFN in every layer. The trunk, its declaration list and model are
 * families/common/hybrid*.c; this file holds the claims and the sizes it names. */
#include <stdio.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/hybrid_presets.h"
#include "splash/family.h"
#include "splash/plugin.h"

#define QH_ARCH "qwen35"

/* The sizes the family serves by name, each with the DFlash2 draft trained for it.
 * Any other size of the architecture loads and runs too; model-check reports it
 * unnamed. The vocabulary is not part of a size (generated models shrink it). */
struct qh_size {
    const char *name;
    const char *draft;
    int64_t n_embd, n_layers, n_ff;
    int32_t n_head, n_head_kv, head_dim;
    int32_t n_k_heads, n_v_heads, d_k, d_v;
};

static const struct qh_size qh_sizes[] = {
    {"Qwen3.5-0.8B", "incoai/Qwen3.5-0.8B-DFlash2", 1024, 24, 3584, 8, 2, 256, 16, 16, 128, 128},
    {"Qwen3.5-2B", "incoai/Qwen3.5-2B-DFlash2", 2048, 24, 6144, 8, 2, 256, 16, 16, 128, 128},
    {"Qwen3.5-4B", "incoai/Qwen3.5-4B-DFlash2", 2560, 32, 9216, 16, 4, 256, 16, 32, 128, 128},
    {"Qwen3.5-9B", "incoai/Qwen3.5-9B-DFlash2", 4096, 32, 12288, 16, 4, 256, 16, 32, 128, 128},
    /* Qwen3.8-27B (spec) shares the shape of Qwen3.5-27B; its fine-tunes are it */
    {"Qwen3.8-27B", "incoai/Qwen3.8-27B-DFlash2", 5120, 64, 17408, 24, 4, 256, 16, 48, 128, 128},
};

static const struct qh_size *qh_size_of(const struct hybrid_config *c)
{
    for (size_t i = 0; i < sizeof qh_sizes / sizeof qh_sizes[0]; i++) {
        const struct qh_size *s = &qh_sizes[i];
        if (s->n_embd == c->n_embd && s->n_layers == c->n_layers && s->n_ff == c->n_ff &&
            s->n_head == c->n_head && s->n_head_kv == c->n_head_kv && s->head_dim == c->head_dim &&
            s->n_k_heads == c->n_k_heads && s->n_v_heads == c->n_v_heads && s->d_k == c->d_k &&
            s->d_v == c->d_v)
            return s;
    }
    return NULL;
}

/* Ours unless the metadata names another architecture or model type. */
static int qh_claims(const struct splash_host *host, const struct splash_meta *m)
{
    const struct splash_meta_api *api = host->meta;
    const char *s = NULL;
    if (api->source(m) == SPLASH_META_GGUF)
        return api->get_str(m, "general.architecture", &s, NULL) == SPLASH_OK &&
               !strcmp(s, QH_ARCH);
    if (api->has(m, "text_config.model_type") &&
        api->get_str(m, "text_config.model_type", &s, NULL) == SPLASH_OK)
        return !strcmp(s, "qwen3_5_text");
    return api->get_str(m, "model_type", &s, NULL) == SPLASH_OK &&
           (!strcmp(s, "qwen3_5") || !strcmp(s, "qwen3_5_text"));
}

static enum splash_status qh_check_config(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          struct splash_family_verdict *v, struct splash_err *err)
{
    memset(v, 0, sizeof *v);
    if (!qh_claims(host, m))
        return SPLASH_OK;
    struct hybrid_config cfg;
    enum splash_status st = hybrid_config_read(host, m, QH_ARCH, &hybrid_ffn_dense, &cfg, err);
    if (st)
        return st;
    v->score = 100;
    snprintf(v->architecture, sizeof v->architecture, "Qwen hybrid (%s)", QH_ARCH);
    const struct qh_size *size = qh_size_of(&cfg);
    if (size) {
        snprintf(v->size_name, sizeof v->size_name, "%s", size->name);
        snprintf(v->draft_repo, sizeof v->draft_repo, "%s", size->draft);
    }
    hybrid_config_summary(&cfg, v->summary, sizeof v->summary);
    snprintf(v->chat_format, sizeof v->chat_format, "qwen");
    return SPLASH_OK;
}

/* make-model's sizes (HYBRID_PRESET_TRUNK's order: ctx, hidden, layers, ff, heads, KV heads,
 * head dim, rotary dims, 4 sections, GDN key heads, value heads, key dim, value dim,
 * full-attention interval) */
static const struct splash_preset_value qh_08b[] = {
    HYBRID_PRESET_TRUNK(262144, 1024, 24, 3584, 8, 2, 256, 64, 11, 11, 10, 0, 16, 16, 128, 128, 4),
    {0}};
static const struct splash_preset_value qh_27b_4l[] = {
    HYBRID_PRESET_TRUNK(262144, 5120, 4, 17408, 24, 4, 256, 64, 11, 11, 10, 0, 16, 48, 128, 128, 4),
    {0}};
static const struct splash_preset_value qh_tiny[] = {
    HYBRID_PRESET_TRUNK(4096, 256, 8, 512, 4, 2, 64, 16, 4, 2, 2, 0, 2, 4, 64, 64, 4), {0}};
/* qwen35-tiny with an MTP block after its 8 layers (llama.cpp's blk.8.nextn.* layout) */
static const struct splash_preset_value qh_tiny_mtp[] = {
    HYBRID_PRESET_TRUNK(4096, 256, 9, 512, 4, 2, 64, 16, 4, 2, 2, 0, 2, 4, 64, 64, 4),
    HYBRID_PRESET_U32("nextn_predict_layers", 1), {0}};
static const struct splash_preset_value qh_demo[] = {
    HYBRID_PRESET_TRUNK(32768, 256, 4, 768, 4, 2, 64, 16, 4, 2, 2, 0, 2, 4, 64, 64, 4), {0}};

static const struct splash_family_preset qh_presets[] = {
    {"qwen35-0.8b", QH_ARCH, "Qwen3.5-0.8B: tied head, IMROPE over a quarter of each head",
     151936, 1, qh_08b, "qwen"},
    {"qwen35-27b-4l", QH_ARCH, "Qwen3.5-27B's layers, four of them (layer 3 full attention)",
     151936, 0, qh_27b_4l, "qwen"},
    {"qwen35-tiny", QH_ARCH, "the test data's tiny dense model (README section 2)", 2048, 1,
     qh_tiny, "qwen"},
    {"qwen35-tiny-mtp", QH_ARCH, "qwen35-tiny with an MTP (nextn) block after its 8 layers",
     2048, 1, qh_tiny_mtp, "qwen"},
    {"qwen35-demo", QH_ARCH, "a small shape that builds in well under a second (tests)", 2304, 1,
     qh_demo, "qwen"},
    {0}};

static const char *const qh_gguf_architectures[] = {QH_ARCH, NULL};
static const char *const qh_model_types[] = {"qwen3_5", "qwen3_5_text", NULL};

static const struct splash_family_plugin qh_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "qwen_hybrid", "0.1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = qh_gguf_architectures,
    .model_types = qh_model_types,
    .check_config = qh_check_config,
    .declare_tensors = hybrid_family_declare_tensors,
    .model_create = hybrid_family_model_create,
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
    .presets = qh_presets,
};

static const struct splash_plugin_header *qh_entry(const struct splash_host *host)
{
    return &qh_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_qwen_hybrid, qh_entry)
