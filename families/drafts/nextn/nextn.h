/* NextN (MTP): the target's own multi-token-prediction block, as llama.cpp's GGUFs carry
 * it after the trunk (blk.{n_layer}.nextn.*, {arch}.nextn_predict_layers), run as a draft.
 * Row p of the block reads the token at p and the target's hidden state at p - 1 (the
 * residual stream after its last layer, before the final norm: the draft's one tap):
 * x = eh_proj [enorm(embed(t_p)), hnorm(h_{p-1})], then a full-attention decoder block
 * of the trunk's shape (gated attention with q/k norms and IMROPE, the SwiGLU FFN or, in a
 * qwen35moe file, the trunk's mixture of experts with its shared expert), then
 * shared_head_norm and the head predict t_{p+1}. A block chains: each proposal's row reads
 * the proposal and the previous row's normed output. The block's attention keeps its own
 * keys and values of the last `window` positions in BF16 pages. Names are prefixed nextn_
 * (the static plugin archive links every plugin together). */
#ifndef SPLASH_DRAFTS_NEXTN_H
#define SPLASH_DRAFTS_NEXTN_H

#include <stddef.h>
#include <stdint.h>

#include "splash/draft.h"
#include "splash/host.h"
#include "splash/kernels.h"

#define NEXTN_BLOCK 8        /* the anchor and up to 7 proposals, as the engine verifies */
#define NEXTN_TOP_K 16       /* candidates a sampled row draws from */
#define NEXTN_WINDOW 2048    /* positions the block attends (the last ones) */
#define NEXTN_PAGE_TOKENS 64 /* KV page size of the block's own cache */
#define NEXTN_MAX_PAIRS 512
#define NEXTN_MAX_USED 64 /* experts a token takes */

/* The target's sizes the block runs at, read from its GGUF header. */
struct nextn_config {
    char arch[32];
    int64_t n_embd, n_vocab, n_ff;
    /* a MoE block (qwen35moe): routed experts (softmax, top-k renormalised) and a shared
     * expert scaled by the sigmoid of its scalar gate; n_ff is then 0 */
    int32_t moe, n_expert, n_used;
    int64_t n_ff_exp, n_ff_shexp; /* n_ff_shexp 0: no shared expert */
    int32_t n_layers; /* the trunk's (block_count - nextn_predict_layers) */
    int32_t n_nextn;
    int32_t n_head, n_head_kv, head_dim, n_rot;
    int32_t rope_sections[4];
    double rope_base;
    float rms_eps;
    /* tensors by name: the block's own where the file has them, else the target's */
    char embd[96], head[96], head_norm[96];
};

/* Reads the target's header and holds the first nextn block's tensors to it. Errors name
 * the file and the key or tensor. */
enum splash_status nextn_config_read(const struct splash_host *host, const struct splash_meta *m,
                                     struct nextn_config *cfg, struct splash_err *err);
void nextn_config_summary(const struct nextn_config *cfg, char *buf, size_t size);

struct nextn_model {
    const struct splash_host *host;
    const struct splash_kernels *k;
    struct splash_pool *pool;
    struct nextn_config cfg;
    const struct splash_tensor_info *embd;
    struct splash_weight *eh_proj, *wq, *wk, *wv, *wo, *gate, *up, *down, *head;
    struct splash_weight *router, *gate_exps, *up_exps, *down_exps, *sh_gate, *sh_up, *sh_down;
    float *sh_inp; /* the shared expert's scalar gate (n_embd), or NULL */
    float *enorm, *hnorm, *attn_norm, *post_norm, *q_norm, *k_norm, *head_norm;
    float rope_freq[NEXTN_MAX_PAIRS];
    uint8_t rope_on[NEXTN_MAX_PAIRS]; /* 0: an IMROPE pair that reads position 0 (text) */
    int32_t cap;                      /* positions a context holds (whole pages) */
    size_t page_bytes;
    uint64_t weight_bytes;
};

/* A sequence's context: the taps (h) and the block's keys and values of positions
 * base .. base + cap - 1; h rows 0 .. n_h - 1 appended, KV rows 0 .. n_kv - 1 computed
 * (lazily, at propose, since a row needs its token). */
struct nextn_ctx {
    int32_t n_h, base;
    int32_t kv_lo, n_kv; /* KV rows kv_lo .. n_kv - 1 hold what the taps and tokens give */
    float *h;     /* cap x n_embd: position p at (p - base) */
    void **pages; /* cap / NEXTN_PAGE_TOKENS BF16 pages: position p at (p - base) */
};

enum splash_status nextn_model_create(const struct splash_host *host,
                                      const struct splash_meta *target,
                                      const struct splash_draft_opts *opts,
                                      struct nextn_model **out, struct splash_err *err);
void nextn_model_destroy(struct nextn_model *m);
uint64_t nextn_ctx_bytes(const struct nextn_model *m);

enum splash_status nextn_ctx_create(struct nextn_model *m, struct nextn_ctx **out,
                                    struct splash_err *err);
void nextn_ctx_destroy(struct nextn_model *m, struct nextn_ctx *c);
enum splash_status nextn_ctx_fork(struct nextn_model *m, const struct nextn_ctx *c,
                                  struct nextn_ctx **out, struct splash_err *err);
enum splash_status nextn_append(struct nextn_model *m, struct nextn_ctx *c, const float *taps,
                                int64_t stride, int32_t pos0, int32_t n, struct splash_err *err);
enum splash_status nextn_rollback(struct nextn_model *m, struct nextn_ctx *c, int32_t n_keep,
                                  struct splash_err *err);
/* Makes room for positions up to end - 1, dropping whole pages the window no longer needs. */
void nextn_ctx_reserve(struct nextn_model *m, struct nextn_ctx *c, int32_t end);

/* One block (nextn_forward.c). */
enum splash_status nextn_propose(struct nextn_model *m, struct nextn_ctx *c,
                                 const struct splash_draft_block *b, struct splash_err *err);

#endif
