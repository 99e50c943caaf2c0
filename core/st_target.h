/* A safetensors target (MLX, Model Optimizer, compressed-tensors) presented as the GGUF
 * its weights would make: config.json as `{arch}.*` keys, the chat template as
 * tokenizer.chat_template, and every tensor under its GGUF name, in GGUF's layout (value
 * heads tiled, zero-centred norms with their +1, ssm_a = -exp(A_log), conv1d [C, K]),
 * quantized modules imported into their format plugin's blocks. The family then checks
 * and binds it through its one declaration list, as a GGUF.
 *
 * The arch prefix is the GGUF architecture of the family claiming the config's
 * model_type (data the family gives). The name and key rules (st_names.c) are the
 * transformers / mlx-lm conventions, which name no family. */
#ifndef SPLASH_CORE_ST_TARGET_H
#define SPLASH_CORE_ST_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "splash/host.h"
#include "splash/status.h"

struct splash_meta;
struct splash_registry;
struct splash_gguf_writer;

/* Shapes and formats only: no tensor data is read or converted (model-check). */
#define SPLASH_ST_HEADERS_ONLY 1u
/* Every quantized weight decoded to F32: a reference load (tests hold the mapping to
 * llama.cpp's F32 logits without the kernels' activation quantization). Model-check
 * refuses F32 projections, so only model_create takes such a meta. */
#define SPLASH_ST_DECODE_F32 2u

/* dir: a directory holding config.json and safetensors weights. The meta's path is dir
 * (the tokenizer and the template are read from it). Errors name the file (config.json,
 * the shard, the index) and the tensor. */
enum splash_status splash_st_target_open(const struct splash_registry *r, const char *dir,
                                         unsigned flags, struct splash_meta **out,
                                         struct splash_err *err);

/* The chat template of a checkpoint directory: chat_template.jinja, else
 * tokenizer_config.json's chat_template (a string, or the list's "default" entry).
 * *out (malloc'ed) is NULL when the directory has none. */
enum splash_status splash_st_chat_template(const char *dir, char **out, struct splash_err *err);

/* Stacked experts imported from planes (MLX switch_mlp) are not imported at open: each is
 * imported when it is bound as a weight (splash_meta_tensor_realize, tensor_bind), and one
 * bound as streamed experts never is, its experts read alone from the planes. Until then
 * its info.data is NULL. A load (model_load, splash logits) opens with it; without it every
 * tensor's data is there after the open. */
#define SPLASH_ST_DEFER_EXPERTS 4u

/* name's planes (struct splash_expert_planes, splash/host.h) in a meta
 * splash_st_target_open made with its data (not HEADERS_ONLY); NOT_FOUND for a tensor not
 * imported (or not of a safetensors target), UNSUPPORTED, naming the tensor, for one whose
 * experts cannot be read alone (imported one module each, or not mapped). host->expert_planes. */
enum splash_status splash_st_expert_planes(const struct splash_meta *m, const char *name,
                                           struct splash_expert_planes *out,
                                           struct splash_err *err);

/* st_expert_read.c: one expert's planes (planes[i] of p->expert_bytes[i] bytes) imported
 * into its blocks at dst; host->expert_import. */
enum splash_status splash_st_expert_import(const struct splash_expert_planes *p,
                                           const void *const *planes, void *dst,
                                           struct splash_err *err);
/* Expert e of p read from its files (pread) and imported into its blocks at dst (the bytes
 * the whole import gave it). Errors name the file. */
enum splash_status splash_st_expert_read(const struct splash_expert_planes *p, int64_t e, void *dst,
                                         struct splash_err *err);

/* ---- st_names.c: the conventions ---- */

enum st_kind {
    ST_LINEAR = 1, /* a Linear / Embedding module: quantized planes or a float matrix */
    ST_NORM,       /* an RMS norm weight, F32 */
    ST_NORM_ZC,    /* a zero-centred RMS norm: GGUF keeps 1 + w */
    ST_F32,        /* a small parameter kept as F32 (dt_bias) */
    ST_A_LOG,      /* A_log -> ssm_a = -exp(A_log), F32 */
    ST_CONV,       /* depthwise conv1d [C, 1, K] or MLX's [C, K, 1] -> F32 [C][K] */
    ST_EXPERTS,    /* stacked experts: MLX switch_mlp [E, out, in], or experts.<e>.* */
};

/* Value-head reordering from the checkpoints' grouped order to GGUF's tiled order. */
enum st_perm {
    ST_PERM_NONE = 0,
    ST_PERM_ROWS,   /* every row block is one value head (z, a, b, dt_bias, A_log) */
    ST_PERM_ROWS_V, /* only the V rows after q and k (in_proj_qkv, conv1d) */
    ST_PERM_COLS,   /* column blocks of one value head (out_proj) */
};

struct st_rule {
    const char *hf;   /* module or parameter under the model prefix ("layers.N." for blocks) */
    const char *gguf; /* GGUF tensor name (after "blk.N." for blocks) */
    uint8_t kind;     /* enum st_kind */
    uint8_t perm;     /* enum st_perm */
};

extern const struct st_rule st_global_rules[];
extern const size_t st_n_global_rules;
extern const struct st_rule st_layer_rules[];
extern const size_t st_n_layer_rules;

/* Model prefixes, tried in order: the one holding embed_tokens.weight is the model's. */
extern const char *const st_model_prefixes[];
extern const char *const st_head_names[];

/* config.json's text model (text_config or the root) as `{arch}.*` keys into w; the chat
 * template from chat_template.jinja or tokenizer_config.json in dir, when present. */
enum splash_status st_config_keys(const json_t *text, const char *arch, const char *dir,
                                  struct splash_gguf_writer *w, struct splash_err *err);

#endif
