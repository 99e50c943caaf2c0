/* The hybrid trunk shared by the Qwen hybrid families: Gated DeltaNet layers
 * interleaved with gated full attention, their per-sequence caches, and the
 * forward pass over lanes. Compiled into every family plugin; the dense family
 * (qwen_hybrid) uses it whole, a MoE family supplies its own FFN through
 * struct hybrid_ffn_ops and reuses the rest. Names are prefixed hybrid_ because
 * the static plugin archive links every plugin together. The trunk knows no
 * experts: a MoE family's FFN lives in its own folder (families/qwen_moe). */
#ifndef SPLASH_FAMILIES_HYBRID_H
#define SPLASH_FAMILIES_HYBRID_H

#include <stddef.h>
#include <stdint.h>

#include "families/common/step_buffer.h"
#include "splash/family.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define HYBRID_MAX_LAYERS 256
/* Qwen validates these models with YaRN up to 1,010,000 tokens (server.md); a native
 * window beyond it would be its own ceiling. Reported as model_info's n_ctx_max. */
#define HYBRID_QWEN_CONTEXT_MAX 1010000
#define HYBRID_MAX_ROPE_PAIRS 512

/* Sizes and layer layout, from GGUF metadata or config.json. */
struct hybrid_config {
    char arch[32];  /* GGUF key prefix: "qwen35" */
    int32_t source; /* enum splash_meta_source */
    int64_t n_embd, n_layers, n_ff, n_vocab, n_ctx_train;
    int32_t n_nextn; /* MTP (nextn) blocks after the trunk's n_layers, not run by the trunk */
    int32_t n_head, n_head_kv, head_dim; /* attention (key_length == value_length) */
    int32_t n_rot;                       /* rotary dims (leading dims of each head) */
    int32_t rope_sections[4];            /* IMROPE sections (t, h, w, e); all 0: plain NeoX */
    double rope_base;
    float rms_eps;
    int32_t conv_kernel;                    /* GDN causal conv width */
    int32_t n_k_heads, n_v_heads, d_k, d_v; /* GDN heads and head dims */
    int64_t conv_dim;                       /* 2 * n_k_heads * d_k + n_v_heads * d_v */
    int32_t gdn_grouped;   /* value heads in HF's grouped order (not GGUF's tiled) */
    int32_t norm_plus_one; /* zero-centred norms stored as w (HF): use 1 + w */
    int32_t tied;          /* no output.weight: the head is token_embd */
    int32_t n_attn;        /* attention layers */
    uint8_t is_attn[HYBRID_MAX_LAYERS];
};

struct hybrid_ffn_ops;

/* Reads and checks the trunk's sizes. `arch` is the GGUF architecture (key prefix). The
 * dense FFN's width (feed_forward_length, intermediate_size) is read only when ffn is the
 * trunk's own (hybrid_ffn_dense): a family with its own FFN reads its own widths, and its
 * headers may lack that key (n_ff is then 0). Errors name the key at fault. */
enum splash_status hybrid_config_read(const struct splash_host *host, const struct splash_meta *m,
                                      const char *arch, const struct hybrid_ffn_ops *ffn,
                                      struct hybrid_config *cfg, struct splash_err *err);
/* "hidden 1024, 24 layers (6 attention), vocab 248320" */
void hybrid_config_summary(const struct hybrid_config *cfg, char *buf, size_t size);

struct hybrid_model;

/* Element-wise gates, vectorised where the CPU allows (families/common/hybrid_act*.c). */
struct hybrid_act {
    const char *isa;
    /* out[i] = x[i] * silu(g[i]); out may equal x or g */
    void (*silu_mul)(int64_t n, const float *x, const float *g, float *out);
    /* out[i] = x[i] * sigmoid(g[i]); out may equal x or g */
    void (*sigmoid_mul)(int64_t n, const float *x, const float *g, float *out);
};

extern const struct hybrid_act hybrid_act_ref;
#if defined(__x86_64__)
extern const struct hybrid_act hybrid_act_avx2;
extern const struct hybrid_act hybrid_act_avx512;
#endif
/* The first row the CPU (host->cpu_features()) supports. */
const struct hybrid_act *hybrid_act_pick(uint64_t cpu_features);

/* One walk of a hybrid family's declaration list (hybrid_declare): the trunk's sizes, the
 * model being built (NULL when a file is only checked) and where the entries go. */
struct hybrid_decls {
    const struct hybrid_config *cfg;
    struct hybrid_model *model;
    const void *ffn_config; /* what the family's FFN sizes itself by (the MoE sizes), or NULL */
    const struct splash_host *host;
    const struct splash_meta *m;
    splash_decl_emit_fn emit;
    void *ctx;
};

/* A declaration's dst: the address of a member of the model, or NULL when there is none
 * (the member expression is not evaluated then). */
#define HYBRID_DST(h, member) ((h)->model ? (void *)&(member) : NULL)

/* Emits one entry of the list: `name` under layer il ("blk.<il>.<name>"), or a global
 * tensor (il < 0), with its shape, accept mask, SPLASH_DECL_* flags and binding. */
void hybrid_decl(const struct hybrid_decls *h, int32_t il, const char *name, uint32_t accept,
                 uint32_t flags, int32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
                 uint32_t bind, void *dst);

/* The FFN of each layer: the dense SwiGLU by default; a MoE family replaces it. */
struct hybrid_ffn_ops {
    /* Emits layer il's FFN tensors (hybrid_decl), bound into layer_ffn (NULL when checking). */
    void (*declare)(const struct hybrid_decls *h, int32_t il, void *layer_ffn);
    /* Allocates layer il's FFN state (stored in *layer_ffn) before its weights are bound;
     * model->host etc. are set. */
    enum splash_status (*create)(struct hybrid_model *model, int32_t il, void **layer_ffn,
                                 struct splash_err *err);
    /* Frees the state create made (the bound weights are unbound before). */
    void (*destroy)(struct hybrid_model *model, void *layer_ffn);
    /* out (n, n_embd) = FFN(x) for x (n, n_embd), the post-attention-normed rows. */
    void (*forward)(struct hybrid_model *model, void *layer_ffn, const float *x, int64_t n,
                    float *out, float *scratch);
    /* floats of scratch forward needs per row */
    int64_t (*scratch_per_row)(const struct hybrid_config *cfg);
    /* Optional, for state of the whole model's FFN (model->ffn_model): before the layers'
     * create (model->cfg and opts are set), after every weight is bound, at destroy, and
     * what it adds to model_info. */
    enum splash_status (*model_prepare)(struct hybrid_model *model, struct splash_err *err);
    enum splash_status (*model_ready)(struct hybrid_model *model, struct splash_err *err);
    void (*model_free)(struct hybrid_model *model);
    void (*model_info)(const struct hybrid_model *model, struct splash_model_info *info);
};

/* The dense SwiGLU FFN's weights and its list (families/common/hybrid_config.c). */
struct hybrid_dense_ffn {
    struct splash_weight *gate, *up, *down;
};
void hybrid_ffn_dense_declare(const struct hybrid_decls *h, int32_t il, void *layer_ffn);

extern const struct hybrid_ffn_ops hybrid_ffn_dense;

/* The family's declaration list (a splash_declare_fn's body): every tensor the trunk reads
 * and, through ffn, each layer's FFN tensors. model NULL: the sizes are read from m (the
 * file is being checked); else model's own, each entry bound into it. */
enum splash_status hybrid_declare(const struct splash_host *host, const struct splash_meta *m,
                                  const char *arch, const struct hybrid_ffn_ops *ffn,
                                  const void *ffn_config, struct hybrid_model *model,
                                  splash_decl_emit_fn emit, void *ctx, struct splash_err *err);

struct hybrid_layer {
    int32_t is_attn;
    int32_t slot;                 /* index among layers of its kind (cache slot) */
    float *attn_norm, *post_norm; /* n_embd */
    /* Gated DeltaNet */
    struct splash_weight *qkv, *z, *alpha, *beta, *ssm_out;
    float *conv_w;          /* conv_dim x conv_kernel */
    float *dt_bias, *ssm_a; /* n_v_heads; ssm_a = -exp(A_log) */
    float *ssm_norm;        /* d_v */
    /* gated attention */
    struct splash_weight *wq, *wk, *wv, *wo;
    float *q_norm, *k_norm; /* head_dim */
    void *ffn;              /* the FFN ops' per-layer state */
};

struct hybrid_model {
    const struct splash_host *host;
    const struct splash_kernels *k;
    const struct splash_ssm_kernels *ssm;
    const struct splash_meta *meta;
    struct hybrid_config cfg;
    struct splash_model_opts opts;
    const struct hybrid_ffn_ops *ffn;
    splash_declare_fn declare;        /* the family's list its weights were bound from */
    struct splash_tensor_ref tok_embd; /* with token_embd.scale (NVFP4), 1 without one */
    struct splash_weight *output; /* the LM head (token_embd when tied) */
    float *output_norm;
    struct hybrid_layer *layers;
    int32_t n_gdn;
    int64_t max_context;
    int32_t page_tokens;
    size_t kv_page_bytes;
    size_t gdn_state_bytes;                 /* one GDN layer's delta-rule state */
    size_t conv_state_bytes;                /* one GDN layer's conv state (float32) */
    float rope_freq[HYBRID_MAX_ROPE_PAIRS]; /* base^(-2i / n_rot) */
    uint8_t rope_on[HYBRID_MAX_ROPE_PAIRS]; /* 0: the pair's section reads position 0 */
    uint64_t weight_bytes;
    const struct hybrid_act *act; /* element-wise gates for this CPU */
    /* YaRN past the native window: factor = context / native window (1: off) and the
     * attention scale it brings, applied to the rotary cos/sin */
    double yarn_factor;
    float yarn_mscale;
    /* Buffers of a forward step, kept between steps: a prefill chunk's are tens of MB,
     * and fresh ones would be faulted in page by page every step (or every layer). */
    struct step_buffer step_arena, ffn_arena, logits;
    uint64_t cache_bytes; /* every sequence's pages, states and page tables (hybrid_cache.c) */
    void *ffn_model;      /* the FFN ops' model-wide state (model_prepare), or NULL */
    /* An FFN that could not run its layer (a streamed expert's read failed) sets these;
     * the step stops after that layer and returns them. */
    enum splash_status ffn_status;
    struct splash_err ffn_err;
    /* Rows a forward step runs layer by layer (0: HYBRID_UBATCH); longer inputs go in
     * pieces of this many. An FFN whose weights stream from the SSD raises it, so that a
     * prefill group reads each layer's weights once for all its rows. */
    int32_t ubatch;
};

/* A sequence's caches. KV: per attention layer, a table of pages
 * (struct splash_kv_pages); GDN: one contiguous block per layer for the
 * delta-rule state and one for the conv state, so a snapshot is a copy. */
struct hybrid_seq {
    int64_t n_tokens;
    int64_t n_pages, cap_pages;
    void **pages;      /* n_attn x cap_pages: layer a's page p at [a * cap + p] */
    void *gdn_state;   /* n_gdn x gdn_state_bytes */
    float *conv_state; /* n_gdn x conv_state_bytes */
    struct hybrid_rewind *rewind; /* seq_keep_rows' save (hybrid_rewind.c), NULL until armed */
};

/* What a verify forward saves so that seq_truncate can drop its rejected rows exactly:
 * each GDN layer's conv and delta-rule state as the forward found them, and the rows the
 * forward fed them (the conv's inputs; the delta rule's normalised q, k, v, decay and
 * beta). A truncation takes the saved states back (the delta-rule block by a pointer swap)
 * and runs the conv and the recurrence again over the rows kept: the same kernel on the
 * same inputs, so the same bits. One parallel state copy on the way in, one recurrence
 * pass on a partial acceptance, instead of a state snapshot per row. */
struct hybrid_rewind {
    int32_t cap_rows;  /* rows the buffers hold */
    int32_t armed;     /* rows the next forward may feed and save (0: off) */
    int32_t n_saved;   /* rows the last forward saved (0: nothing to rewind) */
    int64_t pos0;      /* that forward's first position */
    void *gdn_pre;     /* n_gdn x gdn_state_bytes */
    float *conv_pre;   /* n_gdn x conv_state_bytes */
    float *rows;       /* n_gdn x rewind_layer_floats(cap_rows) */
};

/* family.h seq_keep_rows (hybrid_rewind.c). */
enum splash_status hybrid_seq_keep_rows(struct hybrid_model *model, struct hybrid_seq *seq,
                                        int32_t n_rows, struct splash_err *err);
/* The verify forward's saves: every GDN layer's delta-rule state as the forward finds
 * them, in one parallel copy before its first layer (hybrid_rewind_save_states); then
 * layer by layer (gdn_layer) the conv's input rows and state before the conv, and the
 * delta rule's inputs. */
void hybrid_rewind_save_states(struct hybrid_model *model, struct hybrid_seq *seq);
void hybrid_rewind_save_conv(struct hybrid_model *model, struct hybrid_seq *seq, int32_t slot,
                             const float *x, int64_t n);
void hybrid_rewind_save_rule(struct hybrid_model *model, struct hybrid_seq *seq, int32_t slot,
                             const float *qkv, const float *g, const float *beta, int64_t n);
/* After a forward: the armed save of a lane that fed pos0.. is complete (ok) or void. */
void hybrid_rewind_done(struct hybrid_seq *seq, int64_t pos0, int32_t n_tokens, int ok);
/* Truncation inside the saved forward: states restored and recomputed over the kept rows.
 * SPLASH_ERR_UNSUPPORTED when n_keep is not inside it. */
enum splash_status hybrid_rewind_to(struct hybrid_model *model, struct hybrid_seq *seq,
                                    int32_t n_keep, struct splash_err *err);
void hybrid_rewind_free(struct hybrid_model *model, struct hybrid_seq *seq);

/* y[i] = x W[i]^T for n_w weights of one input: one parallel section where the core's
 * kernels have matmul_many. */
void hybrid_matmuls(const struct hybrid_model *model, const struct splash_weight *const *w, int n_w,
                    const float *x, int64_t n, float *const *y);

/* At least `bytes` of b (64-byte aligned, contents undefined), or NULL when out of memory. */
void *hybrid_buffer_get(const struct hybrid_model *model, struct step_buffer *b, size_t bytes);
/* Builds the model: the trunk's state and each layer's FFN state, then every weight bound
 * from the family's list `declare` (host->bind_tensors). */
enum splash_status hybrid_model_create(const struct splash_host *host, const struct splash_meta *m,
                                       const char *arch, const struct hybrid_ffn_ops *ffn,
                                       splash_declare_fn declare,
                                       const struct splash_model_opts *opts,
                                       struct hybrid_model **out, struct splash_err *err);
void hybrid_model_destroy(struct hybrid_model *model);
void hybrid_model_info(const struct hybrid_model *model, struct splash_model_info *info);

enum splash_status hybrid_seq_create(struct hybrid_model *model, struct hybrid_seq **out,
                                     struct splash_err *err);
void hybrid_seq_destroy(struct hybrid_model *model, struct hybrid_seq *seq);
enum splash_status hybrid_seq_truncate(struct hybrid_model *model, struct hybrid_seq *seq,
                                       int32_t n_keep, struct splash_err *err);

/* Prefix caching (hybrid_cache.c): KV pages counted by reference, shared copy-on-write. */
void *hybrid_page_alloc(struct hybrid_model *model);  /* one reference; NULL when out of memory */
void hybrid_page_unref(struct hybrid_model *model, void *page);
/* Makes page p of every attention layer the sequence's own (copies a shared one). */
enum splash_status hybrid_page_own(struct hybrid_model *model, struct hybrid_seq *seq, int64_t p,
                                   struct splash_err *err);
/* A fresh page p in every attention layer; on failure none. */
enum splash_status hybrid_page_add(struct hybrid_model *model, struct hybrid_seq *seq, int64_t p,
                                   struct splash_err *err);
/* Room for `need` pages per layer in the sequence's page table. */
enum splash_status hybrid_seq_pages_grow(struct hybrid_model *model, struct hybrid_seq *seq,
                                         int64_t need, struct splash_err *err);
/* family.h seq_fork: forks only at src's length where there is GDN state. */
enum splash_status hybrid_seq_fork(struct hybrid_model *model, const struct hybrid_seq *src,
                                   int32_t n_tokens, struct hybrid_seq **out,
                                   struct splash_err *err);
/* A fork of src's first n_tokens tokens whose pages src holds (they may be written
 * later in the same step): pages shared, the states copied as src has them now, so a
 * forward step fills them at that length itself. */
enum splash_status hybrid_seq_fork_pages(struct hybrid_model *model, const struct hybrid_seq *src,
                                         int64_t n_tokens, struct hybrid_seq **out,
                                         struct splash_err *err);
uint64_t hybrid_cache_bytes(const struct hybrid_model *model);

enum splash_status hybrid_forward(struct hybrid_model *model, const struct splash_lane *lanes,
                                  int32_t n_lanes, struct splash_err *err);
/* hybrid_forward, writing the draft's taps (family.h struct splash_taps) of every row. */
enum splash_status hybrid_forward_taps(struct hybrid_model *model, const struct splash_lane *lanes,
                                       int32_t n_lanes, const struct splash_taps *taps,
                                       struct splash_err *err);
/* family.h forward_runs (ABI 1.3). */
enum splash_status hybrid_forward_runs(struct hybrid_model *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       const struct splash_taps *taps, struct splash_err *err);

/* The vtable members both families share, as struct splash_family_plugin declares them
 * (hybrid_family.c). A family whose FFN is the dense SwiGLU takes the declaration list and
 * model_create too (the architecture read from the file); a family with another FFN wraps
 * hybrid_declare and hybrid_model_create with its ops. */
enum splash_status hybrid_family_declare(const struct splash_host *host,
                                         const struct splash_meta *m, void *model,
                                         splash_decl_emit_fn emit, void *ctx,
                                         struct splash_err *err);
enum splash_status hybrid_family_declare_tensors(const struct splash_host *host,
                                                 const struct splash_meta *m,
                                                 splash_decl_emit_fn emit, void *ctx,
                                                 struct splash_err *err);
enum splash_status hybrid_family_model_create(const struct splash_host *host,
                                              const struct splash_meta *m,
                                              const struct splash_model_opts *opts, void **model,
                                              struct splash_err *err);
void hybrid_family_model_destroy(void *model);
void hybrid_family_model_info(const void *model, struct splash_model_info *info);
enum splash_status hybrid_family_seq_create(void *model, void **seq, struct splash_err *err);
void hybrid_family_seq_destroy(void *model, void *seq);
enum splash_status hybrid_family_seq_truncate(void *model, void *seq, int32_t n_keep,
                                              struct splash_err *err);
enum splash_status hybrid_family_forward(void *model, const struct splash_lane *lanes,
                                         int32_t n_lanes, struct splash_err *err);
enum splash_status hybrid_family_forward_runs(void *model, const struct splash_lane *lanes,
                                              const struct splash_lane_runs *runs, int32_t n_lanes,
                                              const struct splash_taps *taps,
                                              struct splash_err *err);
enum splash_status hybrid_family_seq_fork(void *model, const void *src, int32_t n_tokens,
                                          void **dst, struct splash_err *err);
uint64_t hybrid_family_cache_bytes(const void *model);
enum splash_status hybrid_family_forward_taps(void *model, const struct splash_lane *lanes,
                                              int32_t n_lanes, const struct splash_taps *taps,
                                              struct splash_err *err);
enum splash_status hybrid_family_seq_keep_rows(void *model, void *seq, int32_t n_rows,
                                               struct splash_err *err);
/* seq_saved_bytes, seq_save and seq_load (hybrid_saved.c). */
uint64_t hybrid_family_seq_saved_bytes(const void *model, int32_t n_tokens);
enum splash_status hybrid_family_seq_save(void *model, const void *seq,
                                          int (*write)(void *ctx, const void *bytes, size_t n),
                                          void *ctx, struct splash_err *err);
enum splash_status hybrid_family_seq_load(void *model, const void *buf, uint64_t size,
                                          void **seq, struct splash_err *err);
/* A sequence of n_tokens whose pages (every attention layer's, the partial last one
 * included) are allocated, their bytes undefined, and whose states are zero: a loader
 * fills them (hybrid_saved.c). */
enum splash_status hybrid_seq_blank(struct hybrid_model *model, int64_t n_tokens,
                                    struct hybrid_seq **out, struct splash_err *err);
/* seq_save_page, seq_rest_bytes, seq_save_rest and seq_load_parts (ABI 1.6,
 * hybrid_parts.c). */
enum splash_status hybrid_family_seq_save_page(void *model, const void *seq, int64_t page,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err);
uint64_t hybrid_family_seq_rest_bytes(const void *model, int32_t n_tokens);
enum splash_status hybrid_family_seq_save_rest(void *model, const void *seq,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err);
enum splash_status hybrid_family_seq_load_parts(void *model, const void *const *pages,
                                                int64_t n_pages, const void *rest,
                                                uint64_t rest_size, void **seq,
                                                struct splash_err *err);

/* Values an element-wise section's piece takes at least: below it the work (a few
 * microseconds) costs less than handing it to the pool, so a verify pass's 8 rows run on
 * the calling thread. */
#define HYBRID_SECTION_MIN_VALUES 65536

/* Element-wise helpers split over the pool. */
void hybrid_parallel(struct hybrid_model *model, int64_t n, int64_t grain, splash_range_fn fn,
                     void *ctx);

#endif
