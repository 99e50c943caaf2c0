/* Draft plugins (ABI 1.3): a speculative-decoding draft architecture (DFlash2) that
 * proposes a block of tokens from the target's hidden states.
 *
 * A draft checkpoint is a directory (config.json, safetensors weights, extra files the
 * architecture names) that the core opens as a splash_meta; a draft plugin claims it by
 * the config's "architectures" values, holds it to the target's metadata (check), and
 * builds a runnable draft over both (create): the draft reads the target's token table
 * and LM head from the target's meta by tensor name, so the target's meta must outlive
 * the draft.
 *
 * Per sequence the draft keeps a context (ctx_create): the target's taps of committed
 * rows (struct splash_taps in splash/family.h: the residual stream after each of the
 * layers info.tap_layers names, concatenated in that order), appended in position order
 * and cut back with rollback. propose drafts one block: the anchor (the last committed
 * token, at position pos, whose taps are not yet in the context) and up to
 * info.block_size - 1 proposals for positions pos + 1 ... */
#ifndef SPLASH_DRAFT_H
#define SPLASH_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/plugin.h"
#include "splash/status.h"

#define SPLASH_DRAFT_MAX_TAPS 8

/* check's answer. score 0: not this plugin's architecture. */
struct splash_draft_verdict {
    int32_t score;
    char architecture[64]; /* "DFlash2" */
    char summary[160];     /* "1 layer, block 8, taps 1,3,5,6, window 2048" */
};

struct splash_draft_info {
    int32_t block_size;                       /* rows a block holds: the anchor + proposals */
    int32_t n_taps;                           /* target layers the context reads */
    int32_t tap_layers[SPLASH_DRAFT_MAX_TAPS]; /* ascending target decoder layer indices */
    int64_t n_embd;                           /* the target's hidden size (one tap's width) */
    int64_t n_vocab;
    int32_t window;                           /* context rows a block attends (the last ones) */
    int32_t top_k;                            /* selector candidates per proposal */
    uint64_t weight_bytes;                    /* the draft's own weights as loaded */
    uint64_t ctx_bytes;                       /* one sequence's context cache */
};

struct splash_draft_opts {
    struct splash_pool *pool; /* worker pool for the draft's forward */
    int32_t keep_stored;      /* 0: projections quantized at load (the architecture's rule);
                                 1: every tensor as stored (bf16, exact reference path) */
};

/* One block to propose (propose's arguments and results). */
struct splash_draft_block {
    uint32_t size;          /* sizeof(struct splash_draft_block) as the caller knows it */
    int32_t anchor;         /* the last committed token */
    int32_t pos;            /* its position: the context must hold exactly rows 0 .. pos - 1 */
    int32_t n_rows;         /* proposals wanted, 1 .. info.block_size - 1 */
    const float *uniforms;  /* NULL: each proposal is its row's best candidate (greedy);
                               else n_rows numbers in [0, 1): row i draws its candidate from
                               the selector distribution with uniforms[i] (inverse CDF) */
    int32_t *tokens;        /* out: n_rows proposals, for positions pos + 1 .. pos + n_rows */
    int32_t *cand_tokens;   /* out or NULL: n_rows x info.top_k candidates, best first */
    float *cand_probs;      /* out or NULL: their selector probabilities (softmax of the
                               scores at temperature 1): the proposal distribution q of a
                               row given the proposals before it (0 off the candidates) */
    float *confidence;      /* out or NULL: n_rows, the largest candidate probability */
    /* ABI 1.5 (read only where size covers it): the sequence's tokens at positions
     * 0 .. pos (history[pos] is the anchor), for a draft whose rows read the tokens beside
     * the taps (the model's own MTP block, which draws row p from the token at p and the
     * taps of p - 1) */
    const int32_t *history;
};

struct splash_draft_plugin {
    struct splash_plugin_header header; /* kind = SPLASH_PLUGIN_DRAFT */

    /* Claims as data, NULL-terminated: config.json "architectures" values. */
    const char *const *architectures;

    /* Holds the draft's config (and its tensors, where the meta has them) to the
     * architecture's rules and to the target's metadata (hidden size, vocabulary, layers,
     * mask token ...). SPLASH_OK with v->score > 0 accepts; an error names the key. */
    enum splash_status (*check)(const struct splash_host *host, const struct splash_meta *draft,
                                const struct splash_meta *target, struct splash_draft_verdict *v,
                                struct splash_err *err);
    /* Builds a runnable draft (both metas stay valid until destroy). */
    enum splash_status (*create)(const struct splash_host *host, const struct splash_meta *draft,
                                 const struct splash_meta *target,
                                 const struct splash_draft_opts *opts, void **model,
                                 struct splash_err *err);
    void (*destroy)(void *model);
    void (*info)(const void *model, struct splash_draft_info *info);

    /* Per-sequence context. Not thread-safe per context. */
    enum splash_status (*ctx_create)(void *model, void **ctx, struct splash_err *err);
    void (*ctx_destroy)(void *model, void *ctx);
    /* Appends n rows of taps (row i at taps + i * stride floats, n_taps * n_embd each) for
     * positions pos0 .. pos0 + n - 1; pos0 must be the context's length. */
    enum splash_status (*append_context)(void *model, void *ctx, const float *taps,
                                         int64_t stride, int32_t pos0, int32_t n,
                                         struct splash_err *err);
    /* Keeps the rows at positions < n_keep. A context that no longer holds the window
     * before n_keep (it keeps only the last rows) refuses with SPLASH_ERR_UNSUPPORTED;
     * n_keep 0 always empties it. */
    enum splash_status (*rollback)(void *model, void *ctx, int32_t n_keep,
                                   struct splash_err *err);
    /* Drafts one block over the context (see struct splash_draft_block). */
    enum splash_status (*propose)(void *model, void *ctx, const struct splash_draft_block *b,
                                  struct splash_err *err);

    /* ABI 1.4 (NULL in older plugins): a new context holding what ctx holds, which goes on
     * apart from it (the engine keeps one beside each prefix-cache restore point, so that a
     * request resumed there drafts as one that prefilled the whole prompt). */
    enum splash_status (*ctx_fork)(void *model, const void *ctx, void **out,
                                   struct splash_err *err);
};

#endif
