/* Pre-download checks of a target checkpoint (models.md: MLX, Model Optimizer and
 * compressed-tensors targets, Splash packages, gguf.require_quantized).
 *
 * They read config.json alone, plus the tensor names when they are known (a
 * model.safetensors.index.json's weight_map, or shard headers), and refuse with
 * one message naming the file and the module, layer or group at fault. They
 * apply to targets, not to drafts (which load BF16 and are quantized at load). */
#ifndef SPLASH_CORE_CHECKPOINT_RULES_H
#define SPLASH_CORE_CHECKPOINT_RULES_H

#include <stddef.h>

#include <jansson.h>

#include "splash/status.h"

struct splash_meta;

/* Which modules a checkpoint must store quantized. Each list is NULL-terminated
 * fnmatch(3) globs over a module's full dotted name ('*' also crosses dots). A module
 * must be quantized when it matches `must` and neither `may_skip` nor `ignore`;
 * `ignore` modules (vision towers, MTP heads) are not this check's business at all. */
struct splash_module_roles {
    const char *const *must;     /* projections, experts, the head */
    const char *const *may_skip; /* router, shared-expert gate, GDN alpha/beta, token table */
    const char *const *ignore;
};

/* transformers' and mlx-lm's conventions: *_proj, in_proj_* (GDN; alpha and beta exempt),
 * experts, switch_mlp, lm_head; vision towers and MTP modules ignored. */
const struct splash_module_roles *splash_module_roles_default(void);
int splash_module_must_quantize(const struct splash_module_roles *roles, const char *module);
/* 1 when the text model never reads the module or tensor (a vision tower, MTP layers). */
int splash_module_ignored(const struct splash_module_roles *roles, const char *name);

enum splash_checkpoint_kind {
    SPLASH_CHECKPOINT_MLX = 1,
    SPLASH_CHECKPOINT_MODELOPT = 2,
    SPLASH_CHECKPOINT_COMPRESSED_TENSORS = 3,
};

/* What a check reads. tensors/names_file may be NULL/0 (config alone); roles NULL
 * takes the default. config_name and names_file name the files in messages. */
struct splash_checkpoint_input {
    const json_t *config;
    const char *config_name;        /* "config.json" */
    const char *const *tensors;     /* every tensor name, or NULL */
    size_t n_tensors;
    const char *names_file;         /* where the names came from */
    const struct splash_module_roles *roles;
};

/* Picks the rule set from quantization / quantization_config and applies it; *kind
 * (optional) tells which. An unquantized checkpoint or another quant_method is refused. */
enum splash_status splash_checkpoint_check(const struct splash_checkpoint_input *in, int *kind,
                                           struct splash_err *err);

/* The rule sets on their own. `q` is the quantization object (MLX) or quantization_config. */
enum splash_status splash_checkpoint_check_mlx(const struct splash_checkpoint_input *in,
                                               const json_t *q, struct splash_err *err);
enum splash_status splash_checkpoint_check_modelopt(const struct splash_checkpoint_input *in,
                                                    const json_t *q, struct splash_err *err);
enum splash_status
splash_checkpoint_check_compressed_tensors(const struct splash_checkpoint_input *in,
                                           const json_t *q, struct splash_err *err);

/* A legacy Splash package (a manifest.json naming the package format) in dir: returns 1
 * and copies the MLX model to serve instead into mlx_model; 0 otherwise. */
int splash_checkpoint_is_package(const char *dir, char *mlx_model, size_t size);

/* The whole pre-download check of a safetensors target: a directory (Splash package
 * refused; config.json; tensor names from model.safetensors.index.json or the shards'
 * headers when present; hf_quant_config.json for older Model Optimizer exports), or a
 * config.json file read alone. */
enum splash_status splash_check_checkpoint(const char *dir_or_config, int *kind,
                                           struct splash_err *err);

/* gguf.require_quantized: refuses a GGUF whose BF16, F16 and F32 tensors hold more values
 * than its quantized ones, with one message asking for a quantized variant. */
enum splash_status splash_gguf_require_quantized(const struct splash_meta *m,
                                                 struct splash_err *err);

#endif
