/* The Flint family (GGUF flint, models.md "GGUF targets"): every layer attends, with
 * per-head attention sinks; sliding-window layers and layers without RoPE follow the
 * header's patterns; ffn_norm before the FFN; the first leading_dense_block_count layers
 * have a dense SwiGLU FFN and the rest a mixture of experts (softmax or sigmoid router,
 * optionally renormalised over the chosen experts) plus a shared expert with no gate.
 * Names are prefixed flint_ because the static plugin archive links every plugin
 * together. */
#ifndef SPLASH_FAMILIES_FLINT_H
#define SPLASH_FAMILIES_FLINT_H

#include <stddef.h>
#include <stdint.h>

#include "families/common/step_buffer.h"
#include "families/common/step_rows.h"
#include "splash/family.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define FLINT_ARCH "flint"
#define FLINT_MAX_LAYERS 128 /* its flat configuration fits the verdict's text_config */
#define FLINT_MAX_EXPERTS 1024
#define FLINT_MAX_USED 32
#define FLINT_MAX_EOS 8
#define FLINT_PAGE_TOKENS 64
#define FLINT_UBATCH 512 /* rows per step; longer inputs are split per lane */
/* rows behind a sliding layer's window its pages still hold: a truncation into a verify
 * step (at most 15 rows) finds the window before any kept row */
#define FLINT_SWA_SLACK 16

/* llama.cpp's expert_gating_func values Flint's router takes */
enum flint_gating { FLINT_GATING_SOFTMAX = 1, FLINT_GATING_SIGMOID = 2 };

/* Sizes and layer layout, from the GGUF header. */
struct flint_config {
    int64_t n_embd, n_layers, n_vocab, n_ctx_train;
    int64_t n_ff;                 /* the dense layers' FFN width */
    int32_t n_head, n_head_kv, head_dim, n_rot;
    float rms_eps;
    int32_t window;               /* sliding window in tokens */
    int32_t n_swa;                /* sliding layers */
    uint8_t is_swa[FLINT_MAX_LAYERS];
    uint8_t has_rope[FLINT_MAX_LAYERS];
    int32_t n_dense;              /* leading_dense_block_count */
    int32_t n_expert, n_used;
    int64_t n_ff_exp, n_ff_shexp;
    int32_t gating;               /* enum flint_gating */
    int32_t norm_topk;            /* expert_weights_norm: renormalise the chosen weights */
    float routed_scale;           /* expert_weights_scale (1 when the header has none) */
    int32_t has_routed_scale;
    int32_t tied;                 /* no output.weight: the head is token_embd */
    int32_t n_eos;
    int32_t eos[FLINT_MAX_EOS];   /* eog_token_ids, or Flint's stop tokens found */
    struct splash_rope_args rope;
};

/* Reads and checks the header; errors name the key at fault. */
enum splash_status flint_config_read(const struct splash_host *host, const struct splash_meta *m,
                                     struct flint_config *c, struct splash_err *err);
/* "hidden 2048, 24 layers (18 sliding of 4096, 6 without RoPE), 1 dense, 64 experts ..." */
void flint_config_summary(const struct flint_config *c, char *buf, size_t size);
/* The flat configuration the header derives (gguf.flint_text_config): config.json's keys
 * as JSON text. SPLASH_ERR_INVALID when size cannot hold it. */
enum splash_status flint_text_config(const struct flint_config *c, char *buf, size_t size,
                                     struct splash_err *err);

struct flint_layer {
    float *attn_norm, *ffn_norm;  /* n_embd */
    struct splash_weight *wq, *wk, *wv, *wo;
    float *sinks;                 /* n_head logits */
    /* dense layers */
    struct splash_weight *gate, *up, *down;
    /* MoE layers: router, experts and the ungated shared expert */
    struct splash_weight *router, *gate_exps, *up_exps, *down_exps;
    struct splash_weight *gate_shexp, *up_shexp, *down_shexp;
};

struct flint_model {
    const struct splash_host *host;
    const struct splash_kernels *k;
    const struct splash_meta *meta;
    struct flint_config cfg;
    struct splash_model_opts opts;
    struct splash_tensor_ref tok_embd;
    struct splash_weight *output;
    float *output_norm;
    struct flint_layer *layers;
    int bound;                    /* bind_tensors succeeded: unbind on destroy */
    int64_t max_context;
    size_t kv_page_bytes;         /* one page of one layer */
    uint64_t weight_bytes;
    uint64_t cache_bytes;         /* every sequence's pages and tables (cache.c) */
    struct step_rows_head head;   /* final norm and head, for step_rows_logits */
    struct step_buffer step_arena, moe_arena;
};

/* A sequence's caches: per layer a table of KV pages counted by reference and shared
 * copy-on-write with forks. A sliding layer lets go of the pages its window (and
 * FLINT_SWA_SLACK rows) has passed: they are NULL below swa_first. */
struct flint_seq {
    int64_t n_tokens;
    int64_t n_pages, cap_pages;
    int64_t swa_first; /* the sliding layers' first page still held */
    void **pages;      /* n_layers x cap_pages: layer il's page p at [il * cap + p] */
};

/* The declaration list (a splash_declare_fn): model NULL to check a file. */
enum splash_status flint_declare(const struct splash_host *host, const struct splash_meta *m,
                                 void *model, splash_decl_emit_fn emit, void *ctx,
                                 struct splash_err *err);

enum splash_status flint_model_create(const struct splash_host *host, const struct splash_meta *m,
                                      const struct splash_model_opts *opts,
                                      struct flint_model **out, struct splash_err *err);
void flint_model_destroy(struct flint_model *model);
void flint_model_info(const struct flint_model *model, struct splash_model_info *info);
/* At least `bytes` of b (64-byte aligned, contents undefined), or NULL when out of memory. */
void *flint_buffer_get(const struct flint_model *model, struct step_buffer *b, size_t bytes);
void flint_parallel(const struct flint_model *model, int64_t n, int64_t grain, splash_range_fn fn,
                    void *ctx);

/* cache.c */
enum splash_status flint_seq_create(struct flint_model *model, struct flint_seq **out,
                                    struct splash_err *err);
void flint_seq_destroy(struct flint_model *model, struct flint_seq *seq);
enum splash_status flint_seq_truncate(struct flint_model *model, struct flint_seq *seq,
                                      int32_t n_keep, struct splash_err *err);
enum splash_status flint_seq_fork(struct flint_model *model, const struct flint_seq *src,
                                  int32_t n_tokens, struct flint_seq **out, struct splash_err *err);
/* A new sequence of n_tokens sharing src's pages that hold them, src's reserved pages
 * included (a restore point taken at a step's start: the step writes their rows). */
enum splash_status flint_seq_share(struct flint_model *model, const struct flint_seq *src,
                                   int64_t n_tokens, struct flint_seq **out, struct splash_err *err);
/* A sequence of n_tokens whose pages are allocated, their rows unwritten: every page of a
 * full layer, a sliding layer's from page swa_first on (seq_load fills them). */
enum splash_status flint_seq_blank(struct flint_model *model, int64_t n_tokens, int64_t swa_first,
                                   struct flint_seq **out, struct splash_err *err);
/* Pages for the sequence to hold n_tokens, the page it appends into its own. */
enum splash_status flint_seq_reserve(struct flint_model *model, struct flint_seq *seq,
                                     int64_t n_tokens, struct splash_err *err);
/* After a step: the sliding layers let go of the pages their window has passed. */
void flint_seq_release_swa(struct flint_model *model, struct flint_seq *seq);
/* The most pages a sliding layer of one sequence holds (the window, the slack and a step's
 * rows). */
int64_t flint_swa_pages(const struct flint_model *model);

/* saved.c: a sequence as bytes (seq_save / seq_load) for the prefix cache's SSD tier */
struct saved_layout; /* families/common/saved_header.h */
uint64_t flint_seq_saved_bytes(const struct flint_model *model, int64_t n_tokens);
enum splash_status flint_seq_save(const struct flint_model *model, const struct flint_seq *seq,
                                  int (*write)(void *ctx, const void *bytes, size_t n), void *ctx,
                                  struct splash_err *err);
enum splash_status flint_seq_load(struct flint_model *model, const void *buf, uint64_t size,
                                  struct flint_seq **out, struct splash_err *err);
/* The layout a saved sequence states: pages, KV format, layers, the window and which
 * layers slide (one bit a layer: FLINT_MAX_LAYERS is 128), under magic "SPLFLNT1". */
void flint_saved_layout(const struct flint_model *model, struct saved_layout *l);
/* The pages a sliding layer keeps for a sequence of n tokens: [*first, *last] (none when n
 * is 0: *last < *first), the window before n. */
void flint_window_pages(const struct flint_model *model, int64_t n, int64_t *first,
                        int64_t *last);

/* parts.c: a sequence in parts (ABI 1.6): pages of the full layers, whole, and a rest
 * (the full layers' partial page, every sliding layer's window) */
enum splash_status flint_seq_save_page(const struct flint_model *model,
                                       const struct flint_seq *seq, int64_t page,
                                       int (*write)(void *ctx, const void *bytes, size_t n),
                                       void *ctx, struct splash_err *err);
uint64_t flint_seq_rest_bytes(const struct flint_model *model, int64_t n_tokens);
enum splash_status flint_seq_save_rest(const struct flint_model *model,
                                       const struct flint_seq *seq,
                                       int (*write)(void *ctx, const void *bytes, size_t n),
                                       void *ctx, struct splash_err *err);
enum splash_status flint_seq_load_parts(struct flint_model *model, const void *const *pages,
                                        int64_t n_pages, const void *rest, uint64_t rest_size,
                                        struct flint_seq **out, struct splash_err *err);

/* ffn.c: out (n, n_embd) = layer il's FFN of x (n, n_embd), the ffn_norm'ed rows. */
enum splash_status flint_ffn_forward(struct flint_model *model, int32_t il, const float *x,
                                     int64_t n, float *out, struct splash_err *err);
/* Router of one row: scores (softmax or sigmoid of the logits), the k best (ties to the lower
 * index), their weights renormalised when norm_topk and times scale. */
void flint_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t gating,
                     int32_t norm_topk, float scale, float *scores, int32_t *ids, float *w);

/* presets.c: make-model's Flint shapes (ABI 1.4) */
extern const struct splash_family_preset flint_presets[];

/* forward.c */
/* runs: NULL, or per lane its runs (forward_runs): each run attends as a call of its own
 * would, and restore points are taken at the run ends asked for. taps: NULL, or the
 * draft's taps of every row (forward_taps). */
enum splash_status flint_forward(struct flint_model *model, const struct splash_lane *lanes,
                                 const struct splash_lane_runs *runs, int32_t n_lanes,
                                 const struct splash_taps *taps, struct splash_err *err);

#endif
