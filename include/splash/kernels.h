/* Shared compute the core offers families: the generic table (host->kernels: matrix
 * products, embeddings, norms, rotary, KV pages and attention) and the state-space table
 * (host->ssm: Gated DeltaNet's convolution and delta rule).
 *
 * Families write their forward pass as calls into these tables; the kernels dispatch
 * matrix products over the weight format's kernel rows and split the work over the
 * worker pool. Append-only, like every vtable, and every append bumps SPLASH_ABI_MINOR:
 * the loader refuses a plugin built against a newer minor than the core's, so every
 * member a plugin's headers declare is present and non-NULL in the tables it is handed
 * (no call site tests for one). Shapes are given in trailing comments as (rows, cols),
 * row-major. */
#ifndef SPLASH_KERNELS_H
#define SPLASH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/status.h"

struct splash_pool;

/* A weight prepared for the kernels (possibly repacked); opaque to families. */
struct splash_weight;

/* Hybrid trunk arguments, defined below struct splash_kernels. */
struct splash_kv_pages;
struct splash_gdn_args;
struct splash_conv_lane;
struct splash_attn_lane;
struct splash_attn_args;
struct splash_attn_lanes_args;
struct splash_rope_args;

struct splash_kernels {
    uint32_t size; /* sizeof(struct splash_kernels) as the core knows it */

    /* Prepares a 2-D weight (ne[0] inputs, ne[1] outputs) or a 3-D expert stack
     * (ne[2] experts) for matmul. The tensor's data must outlive the weight. */
    enum splash_status (*weight_create)(const struct splash_tensor_info *t,
                                        struct splash_weight **out, struct splash_err *err);
    void (*weight_destroy)(struct splash_weight *w);

    /* y = x W^T: x (n, ne0) floats, y (n, ne1). Activations are quantized to the
     * weight format's act_type once per row; each weight row is read once for all n. */
    void (*matmul)(struct splash_pool *pool, const struct splash_weight *w, const float *x,
                   int64_t n, float *y);
    /* For an expert stack: y[r] = x[r] W[expert[r]]^T for each of n rows, rows
     * grouped by expert so each expert's weights are read once. expert[r] < 0 skips
     * the row (y[r] untouched). */
    void (*matmul_experts)(struct splash_pool *pool, const struct splash_weight *w,
                           const float *x, const int32_t *expert, int64_t n, float *y);
    /* out (n, ne0) = rows ids[0..n) of a 2-D table of any format. */
    void (*embed_rows)(const struct splash_tensor_info *t, const int32_t *ids, int64_t n,
                       float *out);
    /* A tensor of any format as floats (norm weights, biases): n = all elements. */
    void (*to_float)(const struct splash_tensor_info *t, float *out);

    /* ---- Every member below splits its work over the pool and must not be called from
     * inside a pool task. ---- */

    /* RMSNorm of n rows of d floats: y = x / sqrt(mean(x^2) + eps) * (w ? w : 1). Row r
     * at x + r * x_stride and y + r * y_stride (floats); y may equal x. */
    void (*rmsnorm)(struct splash_pool *pool, const float *x, int64_t x_stride, const float *w,
                    float *y, int64_t y_stride, int64_t n, int64_t d, float eps);
    /* L2 normalisation in place: x = x * scale / max(|x|, eps) for n rows of d floats, row r
     * at x + r * stride. */
    void (*l2norm)(struct splash_pool *pool, float *x, int64_t stride, int64_t n, int64_t d,
                   float eps, float scale);
    /* NeoX-style rotary embedding in place on the leading 2 * n_pairs dims of n_heads heads
     * of n rows: (x[i], x[i + n_pairs]) rotated by the angle whose cosine and sine are
     * cs[(r * n_pairs + i) * 2 + 0] and [.. + 1]. Head h of row r at
     * x + r * row_stride + h * head_stride. */
    void (*rope)(struct splash_pool *pool, float *x, int64_t row_stride, int64_t head_stride,
                 int64_t n, int32_t n_heads, int32_t n_pairs, const float *cs);

    /* Bytes of one KV page (struct splash_kv_pages); the layout inside is the kernels'. */
    size_t (*kv_page_bytes)(int32_t format, int32_t page_tokens, int32_t n_kv_heads,
                            int32_t head_dim);
    /* Writes n tokens' K and V rows (each n_kv_heads * head_dim floats, rows at k + i *
     * k_stride, v + i * v_stride) at positions pos0.. into kv's pages, which must exist;
     * INT8 rows are quantized with one scale per row and head. kv->n_tokens is not changed. */
    void (*kv_store)(struct splash_pool *pool, const struct splash_kv_pages *kv, int64_t pos0,
                     int64_t n, const float *k, int64_t k_stride, const float *v,
                     int64_t v_stride);
    /* Causal grouped-query attention: query row i (n_head heads of head_dim at
     * q + i * q_stride) at position pos0 + i attends to kv tokens 0 .. pos0 + i with
     * softmax(scale * q.k); query head h reads kv head h / (n_head / n_kv_heads).
     * out + i * out_stride receives n_head * head_dim floats. */
    void (*attention)(struct splash_pool *pool, const struct splash_kv_pages *kv,
                      const float *q, int64_t q_stride, int64_t n_q, int32_t n_head,
                      int64_t pos0, float scale, float *out, int64_t out_stride);

    /* ABI 1.0 spelling of host->ssm's members (the same functions). */
    /* Causal depthwise convolution + SiLU over n tokens of `channels` (rows at x + i *
     * x_stride): out[i][c] = silu(sum_j w[c][j] * x'[i + j - (kw - 1)][c]) where x' is the
     * kw - 1 rows of state (oldest first, (kw - 1) x channels) followed by x. The state
     * is advanced to the last kw - 1 rows. out is (n, channels), dense. */
    void (*gdn_conv)(struct splash_pool *pool, const float *x, int64_t x_stride, int64_t n,
                     int64_t channels, const float *w, int32_t kw, float *state, float *out);
    /* The gated delta rule, token by token (see struct splash_gdn_args). */
    void (*gdn_recurrent)(struct splash_pool *pool, const struct splash_gdn_args *a);
    /* The same recurrence in its chunked (WY / UT-transform) form over chunks of
     * a->chunk tokens: matrix products instead of n rank-1 updates; equal to
     * gdn_recurrent up to float rounding. */
    void (*gdn_chunked)(struct splash_pool *pool, const struct splash_gdn_args *a);

    /* ---- Appended within ABI 1.1 (a core of ABI 1.2 or later has them all). ---- */

    /* y[i] = x W[i]^T for n_w weights of the same input width: one parallel section for
     * all of them and, where their activation formats agree, one activation
     * quantization (a layer's projections of the same input). Same results as n_w
     * matmul calls. */
    void (*matmul_many)(struct splash_pool *pool, const struct splash_weight *const *w, int n_w,
                        const float *x, int64_t n, float *const *y);
    /* gdn_conv over the rows of n_lanes sequences of one layer (each its own rows, state
     * and output) in one parallel section: a batched decode step's lanes. */
    void (*gdn_conv_lanes)(struct splash_pool *pool, const struct splash_conv_lane *lanes,
                           int32_t n_lanes, int64_t x_stride, int64_t channels, const float *w,
                           int32_t kw);
    /* gdn_recurrent over n_lanes sequences of one layer (a[0..n_lanes), same head counts
     * and dims) in one parallel section. */
    void (*gdn_recurrent_lanes)(struct splash_pool *pool, const struct splash_gdn_args *a,
                                int32_t n_lanes);
    /* kv_store, then attention, for n_lanes sequences of one layer (each its own KV pages,
     * rows and output; n_head query heads, one scale): every lane's rows are stored in one
     * parallel section, then the (query row, KV head) items of every lane of fewer than 16
     * rows (a batched decode step's lanes) in one more; longer lanes run as attention does.
     * The lanes' pages must be distinct. Same results as kv_store and attention per lane. */
    void (*attention_lanes)(struct splash_pool *pool, const struct splash_attn_lane *lanes,
                            int32_t n_lanes, int32_t n_head, float scale);
    /* Multiplies w's products by scales[e] for expert e (n = the weight's experts) or by
     * scales[0] (n = 1): a SPLASH_FORMAT_TENSOR_SCALE format's per-tensor scale. Refuses
     * another count or a value that is not finite. */
    enum splash_status (*weight_set_scale)(struct splash_weight *w, const float *scales,
                                           int64_t n, struct splash_err *err);

    /* ---- ABI 1.2 ---- */

    /* Causal grouped-query attention (see struct splash_attn_args): attention's results
     * when a->window is 0 and a->sinks NULL; a sliding window and per-head sinks otherwise. */
    void (*attend)(struct splash_pool *pool, const struct splash_attn_args *a);
    /* kv_store, then attend, for a batched step's lanes as attention_lanes runs them, with
     * a's window and sinks; lane l at (const char *)a->lanes + l * a->lane_size, so callers
     * may keep lanes in larger structs and the lane struct may grow. */
    void (*attend_lanes)(struct splash_pool *pool, const struct splash_attn_lanes_args *a);

    /* ---- ABI 1.3 ---- */

    /* Adds a bias to n rows of d floats (row r at y + r * y_stride): b to every row when
     * idx is NULL, else b + idx[r] * b_stride to row r (each routed row its expert's
     * bias), a row whose idx[r] < 0 untouched. */
    void (*add_bias)(struct splash_pool *pool, float *y, int64_t y_stride, int64_t n, int64_t d,
                     const float *b, const int32_t *idx, int64_t b_stride);
    /* The cosines and sines rope takes for positions pos0 .. pos0 + n - 1 (n rows of
     * a->n_dims / 2 pairs) as ggml computes them, YaRN included (see struct
     * splash_rope_args). Runs on the calling thread. */
    void (*rope_table)(const struct splash_rope_args *a, int64_t pos0, int64_t n, float *cs);

    /* ---- ABI 1.4: streamed experts ---- */

    /* An expert stack (ne[2] experts) whose rows stay in their file: weight_create's
     * weight without its image; t->data is never read. Its products run through
     * matmul_experts_at on experts copied in by expert_pack. */
    enum splash_status (*expert_weight_create)(const struct splash_tensor_info *t,
                                               struct splash_weight **out,
                                               struct splash_err *err);
    /* One expert's rows as the file stores them (t->n_bytes / ne[2] bytes at src) written to
     * dst in the layout the kernels read (the repacked image's where the weight has one):
     * the same bytes weight_create's image holds for that expert. src and dst differ. */
    void (*expert_pack)(const struct splash_weight *w, const void *src, void *dst);
    /* matmul_experts reading expert e's rows at at[e] (expert_pack's layout); a row whose
     * at[expert] is NULL is skipped (y untouched) like a negative expert. Each row's result
     * is the one matmul_experts gives it, whatever the other rows. */
    void (*matmul_experts_at)(struct splash_pool *pool, const struct splash_weight *w,
                              const void *const *at, const float *x, const int32_t *expert,
                              int64_t n, float *y);
};

/* Whether the kernel table k has member `m`: always true for the members of the headers a
 * plugin was built with (see above); kept for plugins that test for one. */
#define SPLASH_KERNELS_HAS(k, m)                                                                   \
    ((k)->size >= offsetof(struct splash_kernels, m) + sizeof((k)->m) && (k)->m != NULL)

/* The state-space kernels (host->ssm, ABI 1.2): Gated DeltaNet's causal convolution and
 * delta rule, over one sequence or a batched step's lanes. The same functions as the
 * generic table's ABI 1.0 members of the same names. */
struct splash_ssm_kernels {
    uint32_t size; /* sizeof(struct splash_ssm_kernels) as the core knows it */
    /* See struct splash_kernels' gdn_conv. */
    void (*conv)(struct splash_pool *pool, const float *x, int64_t x_stride, int64_t n,
                 int64_t channels, const float *w, int32_t kw, float *state, float *out);
    /* The gated delta rule, token by token (see struct splash_gdn_args). */
    void (*recurrent)(struct splash_pool *pool, const struct splash_gdn_args *a);
    /* Its chunked (WY / UT-transform) form: equal to recurrent up to float rounding. */
    void (*chunked)(struct splash_pool *pool, const struct splash_gdn_args *a);
    /* conv over n_lanes sequences of one layer in one parallel section. */
    void (*conv_lanes)(struct splash_pool *pool, const struct splash_conv_lane *lanes,
                       int32_t n_lanes, int64_t x_stride, int64_t channels, const float *w,
                       int32_t kw);
    /* recurrent over n_lanes sequences of one layer in one parallel section. */
    void (*recurrent_lanes)(struct splash_pool *pool, const struct splash_gdn_args *a,
                            int32_t n_lanes);
};

/* A sequence's KV cache for one attention layer, in pages of page_tokens tokens:
 * pages[p] holds positions [p * page_tokens, (p + 1) * page_tokens). Pages are
 * independent blocks of kv_page_bytes, so they can be shared, snapshotted and
 * swapped one by one. */
struct splash_kv_pages {
    int32_t format;       /* enum splash_kv_format (splash/family.h): 0 INT8, 1 BF16 */
    int32_t page_tokens;
    int32_t n_kv_heads;
    int32_t head_dim;
    void *const *pages;
    int64_t n_pages;
};

/* One sequence's rows for gdn_conv_lanes: n rows at x + i * x_stride, its state
 * ((kw - 1) x channels) and its output ((n, channels), dense). */
struct splash_conv_lane {
    const float *x;
    int64_t n;
    float *state;
    float *out;
};

/* One sequence's rows for attention_lanes: n_q rows at positions pos0 .. pos0 + n_q - 1.
 * Row i's keys and values (n_kv_heads * head_dim floats each, at k + i * k_stride and
 * v + i * v_stride; k NULL: none, the pages hold them already) are stored into kv; its
 * query (n_head * head_dim at q + i * q_stride) attends to kv tokens 0 .. pos0 + i and
 * out + i * out_stride receives n_head * head_dim floats, as attention gives them. */
struct splash_attn_lane {
    struct splash_kv_pages kv;
    int64_t pos0, n_q;
    const float *q;
    int64_t q_stride;
    float *out;
    int64_t out_stride;
    const float *k, *v;
    int64_t k_stride, v_stride;
};

/* Causal grouped-query attention for attend (ABI 1.2). Query row i (n_head heads of
 * head_dim at q + i * q_stride) at position pos0 + i attends to the kv tokens from
 * max(0, pos0 + i - window + 1) (window 0: from 0) to pos0 + i with softmax(scale * q.k);
 * query head h reads kv head h / (n_head / n_kv_heads). With sinks, head h's softmax also
 * holds the logit sinks[h] (unscaled), which takes weight but adds no value (gpt-oss's
 * attention sinks). out + i * out_stride receives n_head * head_dim floats. The kernel
 * reads size bytes: members past a caller's size read as 0. */
struct splash_attn_args {
    uint32_t size; /* sizeof(struct splash_attn_args) as the caller knows it */
    int32_t n_head;
    const struct splash_kv_pages *kv;
    const float *q;
    int64_t q_stride, n_q, pos0;
    float scale;
    int32_t window;      /* > 0: keys of the last `window` positions only; 0: all */
    float *out;
    int64_t out_stride;
    const float *sinks;  /* NULL, or n_head logits */
};

/* A batched step's lanes for attend_lanes (ABI 1.2): n_lanes lanes (struct
 * splash_attn_lane) of lane_size bytes each, n_head query heads, one scale, window and
 * sinks for all. */
struct splash_attn_lanes_args {
    uint32_t size; /* sizeof(struct splash_attn_lanes_args) as the caller knows it */
    int32_t n_lanes;
    const void *lanes;
    size_t lane_size; /* >= sizeof(struct splash_attn_lane) */
    int32_t n_head;
    float scale;
    int32_t window;
    const float *sinks;
};

/* Rotary frequencies for rope_table (ABI 1.3), as llama.cpp's ggml_rope_ext takes them:
 * pair i of position p turns by p * freq_base^(-2i / n_dims) (computed as ggml does, by
 * repeated float multiplication). freq_scale < 1 interpolates (YaRN: 1 / factor); with
 * ext_factor != 0 the pairs between YaRN's correction dims (from n_ctx_orig, beta_fast,
 * beta_slow) ramp from interpolated to the original frequency and the magnitude grows
 * by 1 + 0.1 ln(1 / freq_scale). Every cosine and sine is multiplied by attn_factor.
 * The kernel reads size bytes: members past a caller's size read as 0. */
struct splash_rope_args {
    uint32_t size; /* sizeof(struct splash_rope_args) as the caller knows it */
    int32_t n_dims;     /* rotated dims per head (even) */
    float freq_base;
    float freq_scale;   /* 1: none */
    float ext_factor;   /* 0: plain scaling; 1: YaRN */
    float attn_factor;  /* 0 reads as 1 */
    float beta_fast, beta_slow; /* 0 read as YaRN's 32 and 1 */
    int32_t n_ctx_orig; /* the window the model was trained at */
};

/* One gated-delta-rule step over n_tokens tokens of one sequence, per value head h:
 *   S <- exp(g) S;  u = beta (v - S k);  S <- S + u k^T;  o = S q
 * with S (d_v x d_k) stored row-major (row j = value dim j, d_k contiguous floats).
 * q and k are expected L2-normalised, q already scaled. */
struct splash_gdn_args {
    int32_t n_tokens, n_k_heads, n_v_heads, d_k, d_v;
    int32_t grouped;       /* 0: v head h reads k head h % n_k_heads (GGUF's tiled order);
                              1: h / (n_v_heads / n_k_heads) (HF and MLX grouped order) */
    int32_t chunk;         /* gdn_chunked's chunk length (64 when 0) */
    const float *q, *k;    /* head m of token t at q + t * qk_stride + m * d_k */
    int64_t qk_stride;
    const float *v;        /* head h of token t at v + t * v_stride + h * d_v */
    int64_t v_stride;
    const float *g, *beta; /* (n_tokens, n_v_heads): log decay (<= 0) and beta */
    void *state;           /* n_v_heads blocks of d_v * d_k, updated in place */
    int32_t state_bf16;    /* 0: float32 state, 1: bfloat16 (math stays float32) */
    float *out;            /* head h of token t at out + t * out_stride + h * d_v */
    int64_t out_stride;
};

#endif
