/* The gpt-oss family (GGUF gpt-oss, llama.cpp's openai-moe): every layer attends, with
 * q/k/v/o biases, per-head attention sinks and YaRN RoPE; sliding-window layers
 * alternate with full ones; the FFN is a mixture of experts with a biased router
 * (top-k, softmax over the chosen logits) and SwiGLU-OAI experts with biases. Names
 * are prefixed gptoss_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_GPT_OSS_H
#define SPLASH_FAMILIES_GPT_OSS_H

#include <stddef.h>
#include <stdint.h>

#include "families/common/step_buffer.h"
#include "splash/family.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define GPTOSS_ARCH "gpt-oss"
#define GPTOSS_MAX_LAYERS 256
#define GPTOSS_MAX_EXPERTS 1024
#define GPTOSS_MAX_USED 32
#define GPTOSS_PAGE_TOKENS 64
/* a sliding layer stores and attends a long lane's rows this many at a time, so its
 * ring holds the window plus these rows */
#define GPTOSS_SWA_ROWS 64

/* Sizes and layer layout, from the GGUF header. */
struct gptoss_config {
    int64_t n_embd, n_layers, n_vocab, n_ctx_train;
    int32_t n_head, n_head_kv, head_dim, n_rot;
    float rms_eps;
    int32_t window;   /* sliding window in tokens */
    int32_t n_swa;    /* sliding layers */
    uint8_t is_swa[GPTOSS_MAX_LAYERS];
    int32_t n_expert, n_used;
    int64_t n_ff_exp;
    int32_t tied;                 /* no output.weight: the head is token_embd */
    struct splash_rope_args rope; /* YaRN as the header states it */
    double yarn_factor;           /* rope.scaling.factor (1: none) */
};

/* Reads and checks the header; errors name the key at fault. */
enum splash_status gptoss_config_read(const struct splash_host *host, const struct splash_meta *m,
                                      struct gptoss_config *c, struct splash_err *err);
/* "hidden 2880, 24 layers (12 sliding of 128), 32 experts (4 used) of ff 2880, vocab ..." */
void gptoss_config_summary(const struct gptoss_config *c, char *buf, size_t size);
/* The declaration list (splash_declare_fn): every tensor the forward pass reads; with a
 * model (its cfg read, its layers allocated), each entry's dst in it. */
enum splash_status gptoss_declare(const struct splash_host *host, const struct splash_meta *m,
                                  void *model, splash_decl_emit_fn emit, void *ctx,
                                  struct splash_err *err);

struct gptoss_layer {
    float *attn_norm, *post_norm; /* n_embd */
    struct splash_weight *wq, *wk, *wv, *wo;
    float *bq, *bk, *bv, *bo;
    float *sinks; /* n_head logits */
    /* mixture of experts */
    struct splash_weight *router, *gate, *up, *down;
    float *b_router;       /* n_expert */
    float *b_gate, *b_up;  /* n_expert x n_ff_exp */
    float *b_down;         /* n_expert x n_embd */
    int32_t slot;          /* index among layers of its kind (full or sliding) */
};

struct gptoss_model {
    const struct splash_host *host;
    const struct splash_kernels *k;
    const struct splash_meta *meta;
    struct gptoss_config cfg;
    struct splash_model_opts opts;
    struct splash_tensor_ref tok_embd; /* with token_embd.scale, 1 without one */
    struct splash_weight *output;
    float *output_norm;
    struct gptoss_layer *layers;
    int32_t n_full;          /* full-attention layers */
    int64_t max_context;
    int32_t ring_pages;      /* pages a sliding layer's ring holds */
    size_t kv_page_bytes;    /* one page of one layer */
    uint64_t weight_bytes;
    int bound;               /* bind_tensors filled the layers (unbind on destroy) */
    uint64_t cache_bytes;    /* every sequence's pages and tables (cache.c) */
    struct step_buffer step_arena, moe_arena, logits;
    /* diagnostics for tests: attend on every layer as if none slid (the window ignored);
     * after routing, each row's top-k margin in layer il (the last chosen expert's logit
     * minus the best unchosen one's; +inf when every expert is chosen) */
    int32_t ignore_window;
    void (*route_observer)(void *ctx, int32_t il, int64_t row, float margin);
    void *route_observer_ctx;
};

/* A sequence's caches: per full layer a table of pages shared copy-on-write; per sliding
 * layer a ring of ring_pages pages, the pages of positions past its window reused. The
 * kernels index pages by position: a sliding layer's view holds, at page p, ring page
 * p % ring_pages (valid for the window's pages only). */
struct gptoss_seq {
    int64_t n_tokens;
    int64_t n_pages, cap_pages;
    void **pages; /* n_full x cap_pages: layer a's page p at [a * cap + p] */
    void **ring;  /* n_swa x ring_pages */
    void **view;  /* n_swa x cap_pages */
};

enum splash_status gptoss_model_create(const struct splash_host *host, const struct splash_meta *m,
                                       const struct splash_model_opts *opts,
                                       struct gptoss_model **out, struct splash_err *err);
void gptoss_model_destroy(struct gptoss_model *model);
void gptoss_model_info(const struct gptoss_model *model, struct splash_model_info *info);
/* At least `bytes` of b (64-byte aligned, contents undefined), or NULL when out of memory. */
void *gptoss_buffer_get(const struct gptoss_model *model, struct step_buffer *b, size_t bytes);
void gptoss_parallel(const struct gptoss_model *model, int64_t n, int64_t grain,
                     splash_range_fn fn, void *ctx);

/* cache.c */
enum splash_status gptoss_seq_create(struct gptoss_model *model, struct gptoss_seq **out,
                                     struct splash_err *err);
void gptoss_seq_destroy(struct gptoss_model *model, struct gptoss_seq *seq);
enum splash_status gptoss_seq_truncate(struct gptoss_model *model, struct gptoss_seq *seq,
                                       int32_t n_keep, struct splash_err *err);
enum splash_status gptoss_seq_fork(struct gptoss_model *model, const struct gptoss_seq *src,
                                   int32_t n_tokens, struct gptoss_seq **out,
                                   struct splash_err *err);
/* A new sequence of n_tokens sharing src's full-layer pages that hold them (src's pages
 * reserved for a step count: a restore point made before the step writes its rows); its
 * rings are left for gptoss_seq_copy_ring, layer by layer. */
enum splash_status gptoss_seq_share(struct gptoss_model *model, const struct gptoss_seq *src,
                                    int64_t n_tokens, struct gptoss_seq **out,
                                    struct splash_err *err);
/* dst's ring of sliding layer `slot` = src's, page for page. */
void gptoss_seq_copy_ring(const struct gptoss_model *model, const struct gptoss_seq *src,
                          int32_t slot, struct gptoss_seq *dst);
/* Pages for the sequence to hold n_tokens (full layers' own up to there, the sliding
 * layers' views), the page it appends into its own. */
enum splash_status gptoss_seq_reserve(struct gptoss_model *model, struct gptoss_seq *seq,
                                      int64_t n_tokens, struct splash_err *err);

/* moe.c: out (n, n_embd) = the experts' mix for x (n, n_embd), the normed rows. */
enum splash_status gptoss_moe_forward(struct gptoss_model *model, const struct gptoss_layer *L,
                                      int32_t il, const float *x, int64_t n, float *out,
                                      struct splash_err *err);
/* Router of one row: the k largest logits (ties to the lower index) and their softmax. */
void gptoss_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t *ids, float *w);
/* SwiGLU-OAI of n values: min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1). */
void gptoss_swiglu_oai(int64_t n, const float *g, const float *u, float *h);

/* forward.c: lanes, each optionally as runs (forward_runs: restore points at run ends). */
enum splash_status gptoss_forward(struct gptoss_model *model, const struct splash_lane *lanes,
                                  const struct splash_lane_runs *runs, int32_t n_lanes,
                                  struct splash_err *err);

/* saved.c: a sequence as bytes (seq_save / seq_load, the prefix cache's SSD tier). */
struct saved_layout; /* families/common/saved_header.h */
uint64_t gptoss_seq_saved_bytes(const struct gptoss_model *model, int64_t n_tokens);
enum splash_status gptoss_seq_save(const struct gptoss_model *model, const struct gptoss_seq *seq,
                                   int (*write)(void *ctx, const void *bytes, size_t n),
                                   void *ctx, struct splash_err *err);
enum splash_status gptoss_seq_load(struct gptoss_model *model, const void *buf, uint64_t size,
                                   struct gptoss_seq **out, struct splash_err *err);
/* The layout a saved sequence states: pages, KV format, layer counts, the sliding window
 * and the ring, under magic "SPLGOSS1". */
void gptoss_saved_layout(const struct gptoss_model *model, struct saved_layout *l);
/* The logical pages a sliding layer keeps for a sequence of n tokens: [*first, *last]
 * (none when n is 0: *last < *first), the window before n. */
void gptoss_window_pages(const struct gptoss_model *model, int64_t n, int64_t *first,
                         int64_t *last);
/* The ring page of sliding layer `slot` that holds logical page p. */
void *gptoss_ring_page(const struct gptoss_model *model, const struct gptoss_seq *seq,
                       int32_t slot, int64_t p);

/* parts.c: a sequence in parts (ABI 1.6): pages of the full layers, whole, and a rest
 * (the full layers' partial page, every sliding ring's window) */
enum splash_status gptoss_seq_save_page(const struct gptoss_model *model,
                                        const struct gptoss_seq *seq, int64_t page,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err);
uint64_t gptoss_seq_rest_bytes(const struct gptoss_model *model, int64_t n_tokens);
enum splash_status gptoss_seq_save_rest(const struct gptoss_model *model,
                                        const struct gptoss_seq *seq,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err);
enum splash_status gptoss_seq_load_parts(struct gptoss_model *model, const void *const *pages,
                                         int64_t n_pages, const void *rest, uint64_t rest_size,
                                         struct gptoss_seq **out, struct splash_err *err);

/* presets.c: make-model's gpt-oss shapes (ABI 1.4) */
extern const struct splash_family_preset gptoss_presets[];

#endif
