/* Shared compute the core offers families through host->kernels.
 *
 * Families write their forward pass as calls into this table; the kernels
 * dispatch matrix products over the weight format's kernel rows and split the
 * work over the worker pool. Append-only, like every vtable. Shapes are given
 * in trailing comments as (rows, cols), row-major. */
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

    /* ---- Hybrid trunk kernels (kernels/hybrid_*.c). Every member below splits its
     * work over the pool and must not be called from inside a pool task. ---- */

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

    /* ---- Appended members: check `size` (offsetof + sizeof; SPLASH_KERNELS_HAS below)
     * before calling them. ---- */

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
};

/* Whether the kernel table k has member `m` (tables from older cores are shorter). */
#define SPLASH_KERNELS_HAS(k, m)                                                                   \
    ((k)->size >= offsetof(struct splash_kernels, m) + sizeof((k)->m) && (k)->m != NULL)

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
