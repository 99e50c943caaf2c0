/* make-model's library side: random-weight GGUF models of a family's shape, for
 * tests and benchmarks.
 *
 * The writer knows no family: it writes a shape's metadata (a family's size preset,
 * model_shape.h), asks the family claiming the architecture to declare its tensors,
 * initialises each by role (README §2 of the test data: norms 1 + 0.1 N, linears
 * N(0, 1/fan_in), token table N(0, 0.05^2), ssm_a -U(1, 16), dt bias 0.5 N, conv 0.3 N),
 * and quantizes them
 * with the registered formats' from_float, choosing types by the reference
 * quantizer's mix rules (Q4_K_M promotes the token table and some layers to
 * Q6_K ...). A built-in byte-level tokenizer and ChatML template come along. */
#ifndef SPLASH_MODELGEN_MODEL_WRITER_H
#define SPLASH_MODELGEN_MODEL_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "cli/modelgen/model_shape.h"
#include "splash/status.h"

struct splash_registry;
struct splash_pool;

/* One tensor of a plan: what the file will hold. */
struct splash_model_plan_tensor {
    char name[96];
    int32_t layer;                 /* -1 for global tensors */
    int32_t n_dims;
    int64_t ne[4];
    uint32_t accept;               /* the declaration's SPLASH_ACCEPT_* mask */
    int32_t gguf_type;             /* the type chosen by the mix */
    const char *type_name;         /* "Q4_K", "F32" ... (static) */
};

struct splash_model_plan {
    char family[64];               /* the plugin that declared the tensors */
    struct splash_model_plan_tensor *tensors;
    size_t n_tensors;
    uint64_t n_params, n_bytes;
};

/* Mix names: the reference quantizer's ftypes (Q2_K, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S,
 * Q5_K_M, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4_MOE, BF16, F16,
 * F32) with its per-tensor rules, or any other registered format name with a
 * quantizer, applied to every weight matrix ("MXFP4", "Q5_K", "NVFP4"). */
int splash_model_mix_known(const struct splash_registry *r, const char *mix);

/* Declares the shape's tensors through the family claiming shape->arch (which checks
 * the shape's values first, naming the key at fault) and picks each one's type. Free
 * with splash_model_plan_free. */
enum splash_status splash_model_plan_create(const struct splash_registry *r,
                                            const struct splash_model_shape *shape,
                                            const char *mix, struct splash_model_plan **out,
                                            struct splash_err *err);
void splash_model_plan_free(struct splash_model_plan *plan);

struct splash_model_write_opts {
    const char *mix;               /* NULL: "Q4_K_M" */
    uint64_t seed;                 /* same seed, shape and mix: the same bytes */
    struct splash_pool *pool;      /* NULL: a pool of n_threads is made for the write */
    int n_threads;                 /* 0: physical cores */
    const char *general_name;      /* NULL: "splash-random-<shape>" */
    /* 0: every value of every tensor is drawn and quantized. N > 0: a tensor of more
     * than N values quantizes a sample of about N and fills the rest with blocks
     * drawn at random from it (same distribution, same bytes per token, a fraction
     * of the time: for benchmark models with hundreds of experts). */
    int64_t max_sample;
    /* NULL: the built-in ChatML template; else tokenizer.chat_template (Jinja text). The
     * vocabulary holds the special tokens of the shape's chat format either way. */
    const char *chat_template;
};

struct splash_model_write_stats {
    size_t n_tensors;
    uint64_t n_params;
    uint64_t file_bytes;
    double seconds;
};

/* Writes the model to path atomically (a temporary name in the same directory,
 * then rename). stats may be NULL. */
enum splash_status splash_model_write(const struct splash_registry *r,
                                      const struct splash_model_shape *shape,
                                      const struct splash_model_write_opts *opts,
                                      const char *path, struct splash_model_write_stats *stats,
                                      struct splash_err *err);

/* splash_model_write of the preset called name (splash_model_shape_find). */
enum splash_status splash_model_write_preset(const struct splash_registry *r, const char *name,
                                             const struct splash_model_write_opts *opts,
                                             const char *path,
                                             struct splash_model_write_stats *stats,
                                             struct splash_err *err);

#endif
