/* DFlash2: a block-diffusion draft over the target's hidden states (z-lab's DFlash with
 * grouped dynamic convolutions and a candidate selector). One block: the anchor's token
 * row and block - 1 mask rows attend, non-causally, to each other and to the context
 * (the target's taps of committed rows, fused by fc + hidden_norm); the head is the
 * target's, softcapped; a selector walk over each row's top candidates picks the
 * proposals. Names are prefixed dflash2_ (the static plugin archive links every plugin
 * together). */
#ifndef SPLASH_DRAFTS_DFLASH2_H
#define SPLASH_DRAFTS_DFLASH2_H

#include <stddef.h>
#include <stdint.h>

#include "splash/draft.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define DFLASH2_MAX_LAYERS 64
#define DFLASH2_MAX_KERNEL 8
#define DFLASH2_HEADS 32
#define DFLASH2_KV_HEADS 8
#define DFLASH2_HEAD_DIM 128
#define DFLASH2_RANK 256
#define DFLASH2_TOP_K 16
#define DFLASH2_WINDOW 2048
#define DFLASH2_MIN_BLOCK 8
#define DFLASH2_CONV_GROUP 16
/* Flint's vocabulary keeps no mask token: its draft takes one of Flint's reserved special
 * tokens (models.md "Drafts": 150019 to 150143) */
#define DFLASH2_FLINT_FIRST_MASK 150019
#define DFLASH2_FLINT_LAST_MASK 150143
#define DFLASH2_GROUP (DFLASH2_HEADS / DFLASH2_KV_HEADS) /* query heads per KV head */

/* The block attention's inner loops, per CPU (dflash2_block.c, dflash2_attn_avx2.c). */
struct dflash2_attn_ops {
    const char *isa;
    /* out[i] = q_i . k for n queries (n x head dim, dense) */
    void (*dots)(const float *q, int n, const float *k, float *out);
    /* acc[i] += p[i] v for n accumulators (n x head dim, dense) */
    void (*axpy)(const float *p, int n, const float *v, float *acc);
};
extern const struct dflash2_attn_ops dflash2_attn_ref;
#if defined(__x86_64__)
extern const struct dflash2_attn_ops dflash2_attn_avx2;
#endif
/* The first the CPU (host->cpu_features()) runs. */
const struct dflash2_attn_ops *dflash2_attn_pick(uint64_t cpu_features);

/* The draft's configuration, held to the target's metadata. */
struct dflash2_config {
    int64_t n_embd, n_vocab, n_ff;
    int32_t n_layers;
    int32_t n_taps, taps[SPLASH_DRAFT_MAX_TAPS];
    int32_t mask_token, block;
    int32_t conv_kernel, conv_groups; /* groups = n_embd / 16 */
    int32_t window;
    float rms_eps;
    double rope_base;
    float softcap;       /* 0: none */
    float out_mult;      /* output_multiplier */
    int64_t target_layers;
    char target_embd[96]; /* the target's token table, by tensor name */
    char target_head[96]; /* the target's LM head (its token table when tied) */
};

/* Reads the draft's config.json and holds it (and its tensors, where the meta has them)
 * to the architecture and the target. Errors name the key or tensor. */
enum splash_status dflash2_config_read(const struct splash_host *host,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       struct dflash2_config *cfg, struct splash_err *err);
/* "1 layer, hidden 256, block 8, taps 1,3,5,6, window 2048" */
void dflash2_config_summary(const struct dflash2_config *cfg, char *buf, size_t size);

/* A weight the draft owns the bytes of (F32 or af4g64 at load). */
struct dflash2_weight {
    struct splash_tensor_info info;
    void *data;
    struct splash_weight *w;
    int own_region; /* data is the host's weight_rows_alloc region, handed over */
};

/* A grouped dynamic causal convolution: base [2][K][H], kernel projection to
 * (2 stages x K offsets x G groups). */
struct dflash2_conv {
    float *base;
    struct dflash2_weight proj;
};

struct dflash2_layer {
    float *in_norm, *post_norm, *q_norm, *k_norm;
    struct dflash2_weight wq, wk, wv, wo, gate, up, down;
    struct dflash2_conv attn_conv, mlp_conv;
};

struct dflash2_model {
    const struct splash_host *host;
    const struct splash_kernels *k;
    struct splash_pool *pool;
    struct dflash2_config cfg;
    const struct splash_tensor_info *tok_embd; /* the target's */
    struct splash_weight *head;                /* over the target's head tensor */
    struct dflash2_weight fc, sel_proj;
    float *hidden_norm, *norm;
    float *mask_row;           /* n_embd */
    float *pred_book, *succ_book; /* n_vocab x rank */
    struct dflash2_layer *layers;
    int32_t ring;              /* context rows a sequence keeps (window + slack) */
    const struct dflash2_attn_ops *attn;
    float rope_freq[DFLASH2_HEAD_DIM / 2];
    uint64_t weight_bytes;
};

/* A sequence's context: per layer the keys (normed, rotated) and values of the last
 * `ring` context rows; row at position p in slot p % ring. */
struct dflash2_ctx {
    int32_t n;      /* rows appended (positions 0 .. n - 1) */
    int32_t oldest; /* first position still held */
    float *k, *v;   /* n_layers x ring x (KV heads x head dim) */
};

/* Loading (dflash2_load.c). */
enum splash_status dflash2_model_create(const struct splash_host *host,
                                        const struct splash_meta *draft,
                                        const struct splash_meta *target,
                                        const struct splash_draft_opts *opts,
                                        struct dflash2_model **out, struct splash_err *err);
void dflash2_model_destroy(struct dflash2_model *m);

/* The context (dflash2_context.c). */
enum splash_status dflash2_ctx_create(struct dflash2_model *m, struct dflash2_ctx **out,
                                      struct splash_err *err);
void dflash2_ctx_destroy(struct dflash2_model *m, struct dflash2_ctx *c);
/* A copy of c: the rows it holds (oldest .. n - 1) in every layer's ring. */
enum splash_status dflash2_ctx_fork(struct dflash2_model *m, const struct dflash2_ctx *c,
                                    struct dflash2_ctx **out, struct splash_err *err);
enum splash_status dflash2_append(struct dflash2_model *m, struct dflash2_ctx *c,
                                  const float *taps, int64_t stride, int32_t pos0, int32_t n,
                                  struct splash_err *err);
enum splash_status dflash2_rollback(struct dflash2_model *m, struct dflash2_ctx *c,
                                    int32_t n_keep, struct splash_err *err);

/* One block (dflash2_block.c) and the selector walk (dflash2_selector.c). */
enum splash_status dflash2_propose(struct dflash2_model *m, struct dflash2_ctx *c,
                                   const struct splash_draft_block *b, struct splash_err *err);
/* Rows' logits (n x n_vocab, softcapped) -> proposals by the selector walk. hn: the rows'
 * final-normed hidden states (n x n_embd). */
enum splash_status dflash2_select(struct dflash2_model *m, const float *logits, const float *hn,
                                  int32_t n, const struct splash_draft_block *b,
                                  struct splash_err *err);

/* Shared helpers (dflash2_load.c). */
float *dflash2_alloc(const struct dflash2_model *m, size_t n_floats);
void dflash2_free(const struct dflash2_model *m, void *p);
/* Cos/sin pairs for n rows at positions pos0.. (n x head_dim / 2 x 2). */
void dflash2_rope_cs(const struct dflash2_model *m, int64_t pos0, int64_t n, float *cs);

#endif
