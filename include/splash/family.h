/* Family plugins: claims, config checks, tensor declarations and the forward
 * pass, written as calls into the host's kernels.
 *
 * Tensors are declared once, in one list function (splash_declare_fn, host.h):
 *
 *   static enum splash_status my_declare(const struct splash_host *host,
 *           const struct splash_meta *m, void *model, splash_decl_emit_fn emit, void *ctx,
 *           struct splash_err *err)
 *   {
 *       struct my_model *mm = model;   // NULL when the file is only being checked
 *       struct splash_tensor_decl d = {.name = "blk.0.attn_q.weight", .layer = 0,
 *           .n_dims = 2, .ne = {n_embd, n_q}, .accept = SPLASH_ACCEPT_LINEAR,
 *           .bind = SPLASH_BIND_WEIGHT, .dst = mm ? &mm->layers[0].wq : NULL};
 *       emit(ctx, &d);                 // ... one entry per tensor, in a fixed order
 *   }
 *
 * declare_tensors calls it with model NULL (model-check); model_create allocates its
 * structs, then host->bind_tensors(host, m, my_declare, mm, &bytes, err) checks and binds
 * every entry; model_destroy calls host->unbind_tensors before freeing them. */
#ifndef SPLASH_FAMILY_H
#define SPLASH_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/plugin.h"
#include "splash/status.h"

/* What a declared tensor may be stored as: the accept mask, an OR of these bits (models.md
 * "GGUF targets"). QUANT is every format whose plugin flags it SPLASH_FORMAT_LINEAR (the
 * format decides, the core names none); the others are the plain GGUF element types by
 * their type id (enum splash_dtype). A tensor of a type the mask lacks is refused by
 * model-check, naming it. */
#define SPLASH_ACCEPT_QUANT (1u << 0) /* a quantized linear format (SPLASH_FORMAT_LINEAR) */
#define SPLASH_ACCEPT_F32 (1u << 1)   /* GGUF type 0 */
#define SPLASH_ACCEPT_F16 (1u << 2)   /* GGUF type 1 */
#define SPLASH_ACCEPT_BF16 (1u << 3)  /* GGUF type 30 */
#define SPLASH_ACCEPT_Q8_0 (1u << 4)  /* GGUF type 8, even where QUANT is not accepted */
/* the usual masks: weight matrices (projections, experts, the token table), and the
 * small float vectors (norms) */
#define SPLASH_ACCEPT_LINEAR (SPLASH_ACCEPT_QUANT | SPLASH_ACCEPT_BF16 | SPLASH_ACCEPT_F16)
#define SPLASH_ACCEPT_FLOAT (SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16 | SPLASH_ACCEPT_F16)

#define SPLASH_DECL_OPTIONAL (1u << 0) /* absent is fine */
/* (ABI 1.3) the tensor an earlier declaration of the list named, bound a second time (a head
 * tied to the token table): checked, counted and written by the model writer once */
#define SPLASH_DECL_AGAIN (1u << 1)

/* (ABI 1.3) What a declaration's dst receives when the core binds the list into a model
 * (host->bind_tensors); host->unbind_tensors frees it again. */
enum splash_bind {
    SPLASH_BIND_NONE = 0,   /* checked only */
    SPLASH_BIND_WEIGHT = 1, /* dst: struct splash_weight **, the kernels' matmul weight
                               (NAME.scale beside it applied) */
    SPLASH_BIND_FLOATS = 2, /* dst: float **, every value as F32 (norms, conv, biases),
                               allocated by the core */
    SPLASH_BIND_TENSOR = 3, /* dst: struct splash_tensor_ref *, the mapped tensor itself (a
                               token table the kernels gather rows from) */
    /* (ABI 1.4) dst: struct splash_weight **, an expert stack whose rows stay in the file
     * (kernels' expert_weight_create, NAME.scale applied); not counted in the bytes bound */
    SPLASH_BIND_EXPERTS = 4,
};

/* A tensor read as it is stored, with its per-tensor scale (NAME.scale; 1 when none). */
struct splash_tensor_ref {
    const struct splash_tensor_info *t;
    float scale;
};

/* One entry of a family's declaration list: what model-check holds a file to and, for the
 * model being built, where the tensor goes. Names are GGUF names (a safetensors target's
 * names are mapped to them before the list sees them). */
struct splash_tensor_decl {
    char name[96];   /* exact GGUF name: "blk.3.attn_qkv.weight" */
    int32_t layer;   /* block index, -1 for global tensors (for grouped messages) */
    int32_t n_dims;
    int64_t ne[4];   /* expected shape, GGUF order; unused dims 1 */
    /* SPLASH_ACCEPT_* (ABI 1.3; a plugin built before emits a role here, which the core
     * maps to its mask) */
    uint32_t accept;
    uint32_t flags;  /* SPLASH_DECL_* */
    /* ---- ABI 1.3 ---- */
    uint32_t bind;   /* enum splash_bind */
    void *dst;       /* where in the model the tensor goes; NULL when there is no model */
};

/* (ABI 1.4) One use of a streamed experts' store (prefill or decode steps). */
struct splash_expert_use {
    uint64_t loads;      /* layer rounds */
    uint64_t routed;     /* distinct experts the rounds routed */
    uint64_t read;       /* of them, those read from the files */
    uint64_t read_ahead; /* experts read ahead (the next layer's router on this one's input) */
    uint64_t read_ahead_used; /* of them, those the next load routed */
    uint64_t bytes_read;
    double read_seconds; /* the forward's waits for reads */
};

/* (ABI 1.4) A streamed experts' store, for /status (server.md "Streamed experts"). */
struct splash_expert_stats {
    uint64_t cap_bytes, floor_bytes;   /* slots, staging and tables, at its cap and floor */
    uint64_t arena_bytes, staging_bytes;
    int32_t chunks, cap_chunks, slots, experts, resident;
    int32_t readers;                   /* reader threads */
    int32_t direct;                    /* 1: reads go around the page cache (O_DIRECT) */
    uint64_t shrinks, regrows;         /* chunks given back and taken back */
    struct splash_expert_use prefill, decode;
    char failure[256];                 /* what stopped the store, or "" */
};

/* check_config's answer. score 0: not this family. */
struct splash_family_verdict {
    int32_t score;          /* higher wins ties between plugins claiming one architecture */
    char architecture[64];  /* "Qwen hybrid (qwen35)" */
    char size_name[96];     /* "Qwen3.5-0.8B", or "" for a size the table does not list */
    char draft_repo[128];   /* the DFlash2 draft the family names for the size, or "" */
    char summary[160];      /* one line: "hidden 1024, 24 layers (6 attention), vocab 248320" */
    /* ---- ABI 1.3 ---- */
    char chat_format[16];   /* the chat format the family's models speak: "qwen", "flint"
                               (models.md "Chat formats"); an older plugin leaves it "" and
                               the core reads qwen */
    /* ---- ABI 1.4 ---- */
    /* The configuration the header derives, as the keys of the model's config.json (JSON
     * text, flat or nested as that file is: Flint's gguf.flint_text_config), which
     * model-check prints; "" when the family derives none (the core zeroes the verdict
     * before check_config, so an older plugin leaves it ""). */
    char text_config[8192];
};

/* ABI 1.3 adds F16 and F32 (for exact comparisons with references that keep such a cache,
 * `splash logits --kv-format`); a family built before refuses them by its own check. */
enum splash_kv_format { SPLASH_KV_INT8 = 0, SPLASH_KV_BF16 = 1, SPLASH_KV_F16 = 2, SPLASH_KV_F32 = 3 };
enum splash_state_format { SPLASH_STATE_F32 = 0, SPLASH_STATE_BF16 = 1 };

struct splash_model_opts {
    struct splash_pool *pool;  /* worker pool for the forward pass */
    int32_t kv_format;         /* enum splash_kv_format */
    int32_t state_format;      /* enum splash_state_format */
    int64_t max_context;       /* tokens a sequence may hold; 0 = the model's native window */
    double rope_yarn_factor;   /* 0 or 1: none; > 1: YaRN past the native window */
    /* ---- ABI 1.4 ---- */
    /* A MoE model's routed experts: 0 loads them all; else they stay in their files and
     * stream through a store of at most this many bytes (SPLASH_EXPERTS_SMALLEST: the
     * smallest store the model allows). A family without routed experts ignores it. */
    uint64_t expert_memory;
    /* ---- ABI 1.5 ---- */
    /* 1: the store is elastic (--expert-memory auto): its slots above the floor (85%)
     * lie in chunks it starts without, which the engine has it take and give back
     * (expert_resize); 0: a store of exactly expert_memory bytes. */
    int32_t expert_elastic;
};

#define SPLASH_EXPERTS_SMALLEST UINT64_MAX

struct splash_model_info {
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layers;
    int64_t n_ctx_train;               /* native context window */
    uint64_t weight_bytes;             /* bytes of weights the forward pass reads */
    uint64_t kv_bytes_per_token;       /* all attention layers, at the chosen kv format */
    uint64_t state_bytes_per_seq;      /* recurrent (GDN) state + conv state per sequence */
    /* ---- ABI 1.2 (0 from an older plugin: the core then counts kv_bytes_per_token) ---- */
    int32_t kv_page_tokens;            /* tokens per KV page */
    uint64_t kv_page_bytes;            /* one page of every attention layer */
    /* ---- ABI 1.3 ---- */
    /* The most context a sequence may hold (past n_ctx_train: as far as the family's
     * scaling is validated; n_ctx_train where it cannot stretch). The core's memory plan
     * refuses a longer --max-context. 0 from an older plugin: four times n_ctx_train. */
    int64_t n_ctx_max;
    /* ---- ABI 1.4 (0 from an older plugin or a model without routed experts) ---- */
    uint64_t routed_expert_bytes;   /* every routed expert's bytes, loaded or not */
    uint64_t expert_store_bytes;    /* the streamed experts' store (in weight_bytes); 0: none */
    uint64_t expert_store_min_bytes; /* the smallest store the model allows (a layer's experts) */
};

/* One lane of a batched forward step: n_tokens new tokens of one sequence,
 * appended at position pos0 (the sequence's current length). */
struct splash_lane {
    void *seq;
    const int32_t *tokens;
    int32_t n_tokens;
    int32_t pos0;
    float *logits;        /* NULL: none; else n_logits rows of n_vocab floats */
    int32_t logits_all;   /* 1: a row per token; 0: the last token's row only */
};

/* The draft's taps (ABI 1.3): for each row a lane runs, the residual stream after each of
 * n_layers decoder layers (after the layer's FFN, before the final norm), concatenated in
 * the order of `layers` (ascending). rows[l] is lane l's output, n_tokens rows of
 * n_layers * n_embd floats (NULL: none for that lane). */
struct splash_taps {
    uint32_t size; /* sizeof(struct splash_taps) as the caller knows it */
    int32_t n_layers;
    const int32_t *layers;
    float *const *rows;
};

/* ABI 1.3: a lane's tokens as runs, for forward_runs. A prompt resumed from a cached
 * state computes the same bits as a cold one only where the recurrence's chunks start in
 * the same places; the runs say where (each run's chunks count from its own start). */
struct splash_lane_runs {
    int32_t n;           /* runs; 0: the whole lane is one run */
    const int32_t *ends; /* each run's end, an offset into the lane: increasing, the last
                            n_tokens */
    const uint8_t *fork; /* NULL, or n flags: a restore point wanted at that run's end */
    void **forks;        /* with fork: n slots, each set to a new sequence holding the lane's
                            sequence up to that run's end (as seq_fork would have made it
                            then), or NULL where none was asked or memory refused it */
};

/* ---- ABI 1.4: size presets, the shapes `splash make-model` writes random models of ---- */

/* A preset value's type: GGUF's scalar types, or an array of one of them. */
enum splash_preset_kind {
    SPLASH_PRESET_U32 = 1,
    SPLASH_PRESET_I32 = 2,
    SPLASH_PRESET_F32 = 3,
    SPLASH_PRESET_BOOL = 4,
    SPLASH_PRESET_STR = 5,
    SPLASH_PRESET_U32S = 6,  /* arrays: n elements of nums */
    SPLASH_PRESET_I32S = 7,
    SPLASH_PRESET_F32S = 8,
    SPLASH_PRESET_BOOLS = 9,
};

#define SPLASH_PRESET_MAX_ARRAY 256 /* the longest array value a preset may hold */

/* One metadata value of a preset, written as "<architecture>.<key>". */
struct splash_preset_value {
    const char *key;      /* "embedding_length", "rope.dimension_sections"; NULL ends a list */
    int32_t kind;         /* enum splash_preset_kind */
    uint32_t n;           /* arrays: the element count */
    double num;           /* scalars (bool: 0 or 1) */
    const double *nums;   /* arrays: n elements */
    const char *str;      /* SPLASH_PRESET_STR */
};

/* A named size of the family: the metadata a file of that shape carries (the writer adds
 * general.* and the tokenizer), in the order it is written. The family then declares the
 * tensors from that metadata, as it does for any file. */
struct splash_family_preset {
    const char *name;          /* "qwen35-tiny": unique among all families; NULL ends a table */
    const char *architecture;  /* general.architecture, one of the family's claims */
    const char *about;         /* one line for `make-model --list` */
    int64_t n_vocab;           /* the vocabulary the writer's tokenizer fills */
    int32_t tied;              /* 1: no output.weight (the head is the token table) */
    const struct splash_preset_value *values;
    /* the chat format such a model speaks (as the verdict's chat_format): the writer's
     * vocabulary holds its special tokens ("harmony", "flint"; NULL or "qwen": ChatML's) */
    const char *chat_format;
};

struct splash_family_plugin {
    struct splash_plugin_header header; /* kind = SPLASH_PLUGIN_FAMILY */

    /* Claims as data, NULL-terminated: GGUF general.architecture values and
     * config.json model_type values this family serves. */
    const char *const *gguf_architectures;
    const char *const *model_types;

    /* Holds the metadata to the family's rules. SPLASH_OK with v->score > 0 claims
     * it; SPLASH_OK with score 0 declines; an error names the key at fault
     * (an architecture this family serves with values it cannot run). */
    enum splash_status (*check_config)(const struct splash_host *host, const struct splash_meta *m,
                                       struct splash_family_verdict *v, struct splash_err *err);
    /* Emits every tensor the forward pass reads, with shape and accept mask: the family's
     * declaration list (a splash_declare_fn, see host.h) called with model NULL. The same
     * list, called with the model model_create builds, binds the weights through
     * host->bind_tensors, so names and shapes are written once. */
    enum splash_status (*declare_tensors)(const struct splash_host *host,
                                          const struct splash_meta *m, splash_decl_emit_fn emit,
                                          void *ctx, struct splash_err *err);

    /* Builds a runnable model over mapped tensors (m stays valid until destroy). */
    enum splash_status (*model_create)(const struct splash_host *host, const struct splash_meta *m,
                                       const struct splash_model_opts *opts, void **model,
                                       struct splash_err *err);
    void (*model_destroy)(void *model);
    void (*model_info)(const void *model, struct splash_model_info *info);

    /* Per-sequence caches (KV, GDN state). Not thread-safe per sequence. */
    enum splash_status (*seq_create)(void *model, void **seq, struct splash_err *err);
    void (*seq_destroy)(void *model, void *seq);
    /* Drops every token at position >= n_keep (0: empty). A recurrent family may
     * refuse a partial truncation it cannot undo with SPLASH_ERR_UNSUPPORTED. */
    enum splash_status (*seq_truncate)(void *model, void *seq, int32_t n_keep,
                                       struct splash_err *err);

    /* One batched step over n_lanes lanes: every weight is read once for all rows. */
    enum splash_status (*forward)(void *model, const struct splash_lane *lanes, int32_t n_lanes,
                                  struct splash_err *err);

    /* ---- ABI 1.2: prefix caching. NULL in an older plugin; the core reaches them through
     * core/family.c, which gives the defaults (no fork, bytes unknown). ---- */

    /* A new sequence holding src's first n_tokens tokens: its KV pages shared with src
     * copy-on-write (whichever sequence appends into a shared page copies it first), and
     * its recurrent state a copy of src's. A family with recurrent state can only fork at
     * src's current length (a restore point is a fork taken when a sequence reaches it)
     * and refuses any other n_tokens with SPLASH_ERR_UNSUPPORTED. src is not changed. */
    enum splash_status (*seq_fork)(void *model, const void *src, int32_t n_tokens, void **dst,
                                   struct splash_err *err);
    /* Bytes every live sequence's caches hold now (pages shared by several counted once,
     * recurrent states, page tables), so the core keeps them within its memory plan. */
    uint64_t (*cache_bytes)(const void *model);

    /* ---- ABI 1.3: drafts. NULL in an older plugin (core/family.c refuses taps then). ---- */

    /* forward, and the taps of every row it runs (taps NULL: forward alone). Same
     * logits and caches as forward. */
    enum splash_status (*forward_taps)(void *model, const struct splash_lane *lanes,
                                       int32_t n_lanes, const struct splash_taps *taps,
                                       struct splash_err *err);

    /* ---- ABI 1.3: speculative decoding. NULL in an older plugin; core/family.c's default
     * refuses it, and the engine then decodes that family without speculation. ---- */

    /* Arms seq so that its next forward (of at most n_rows tokens, n_rows <= 15) keeps
     * what a seq_truncate needs to drop any of that forward's tokens exactly: a verify
     * pass that keeps only the rows the target accepted. After that forward, a truncation
     * to any n_keep from its first position to its end gives the recurrent state, bit for
     * bit, that a sequence fed only the first n_keep tokens holds. One forward only: the
     * next forward (or truncation) ends it. n_rows 0 disarms. */
    enum splash_status (*seq_keep_rows)(void *model, void *seq, int32_t n_rows,
                                        struct splash_err *err);

    /* ---- ABI 1.3: a prompt chunk of several runs in one step. NULL in an older plugin:
     * the core then calls forward once per run. ---- */

    /* forward where lane i's tokens are runs[i]: bit for bit what calling forward once per
     * run in turn would give (the logits of the lane's last token, or of every token),
     * with every weight read once for all rows, and restore points taken at the run ends
     * asked for. A fork memory refuses is left out (NULL), never an error. taps: as
     * forward_taps (NULL: none), so a prompt chunk feeds a draft's context too. */
    enum splash_status (*forward_runs)(void *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       const struct splash_taps *taps, struct splash_err *err);

    /* ---- ABI 1.3: sequences as bytes, for the prefix cache's SSD tier. ---- */

    /* Bytes seq_save writes for a sequence of n_tokens tokens. */
    uint64_t (*seq_saved_bytes)(const void *model, int32_t n_tokens);
    /* seq's caches (its tokens' KV in every attention layer, its recurrent state), in the
     * family's own layout with a header that names it: seq_saved_bytes bytes in all,
     * handed to write in order, a piece at a time (a page, a state), so no copy of the
     * whole is made. write returns 0, or nonzero to stop (SPLASH_ERR_IO). */
    enum splash_status (*seq_save)(void *model, const void *seq,
                                   int (*write)(void *ctx, const void *bytes, size_t n),
                                   void *ctx, struct splash_err *err);
    /* A new sequence from what seq_save wrote, as it was then; bytes of another layout
     * or size are refused (SPLASH_ERR_INVALID), never read past. */
    enum splash_status (*seq_load)(void *model, const void *buf, uint64_t size, void **seq,
                                   struct splash_err *err);

    /* ---- ABI 1.4: the family's sizes (NULL in an older plugin: make-model writes none). ---- */

    const struct splash_family_preset *presets; /* a table ended by a NULL name */

    /* ---- ABI 1.4: streamed experts. NULL in an older plugin (no store to report). ---- */

    /* The streamed experts' store of model (struct splash_expert_stats): 1, or 0 when its
     * experts load whole (out untouched). */
    int (*expert_stats)(const void *model, struct splash_expert_stats *out);

    /* ---- ABI 1.5: elastic expert chunks. NULL in an older plugin (a fixed store). ---- */

    /* Between commands: grow = 1 takes back one chunk the elastic store lacks, of at most
     * max_bytes; grow = 0 gives back its last chunk above the floor. Returns the chunk's
     * bytes, 0 when there is none (or the experts load whole). */
    uint64_t (*expert_resize)(void *model, int32_t grow, uint64_t max_bytes);

    /* ---- ABI 1.6: sequences in parts, so the SSD tier keeps a prefix's pages once for
     * every restore point along it (server.md "SSD cache": one file of KV pages, one of
     * states, each point a chain of pages and a state). NULL in an older plugin, or one
     * whose pages do not rest on their tokens alone: the tier keeps whole seq_save
     * blobs. ---- */

    /* Whole page `page` of seq (page < n_tokens / model_info.kv_page_tokens) in every
     * attention layer: model_info.kv_page_bytes bytes, handed to write in order. Its bytes
     * rest only on the tokens up to the page's end, so one copy serves every sequence that
     * begins with them. */
    enum splash_status (*seq_save_page)(void *model, const void *seq, int64_t page,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err);
    /* Bytes seq_save_rest writes for a sequence of n_tokens tokens. */
    uint64_t (*seq_rest_bytes)(const void *model, int32_t n_tokens);
    /* All of seq its whole pages do not hold: a header naming the layout and the token
     * count, the partial last page of each attention layer, the recurrent states. */
    enum splash_status (*seq_save_rest)(void *model, const void *seq,
                                        int (*write)(void *ctx, const void *bytes, size_t n),
                                        void *ctx, struct splash_err *err);
    /* A new sequence from its n_pages whole pages (pages[i]: kv_page_bytes each, as
     * seq_save_page wrote them) and its rest (as seq_save_rest wrote it); a rest of another
     * layout or size, or a page count other than its tokens fill, is refused
     * (SPLASH_ERR_INVALID), never read past. */
    enum splash_status (*seq_load_parts)(void *model, const void *const *pages, int64_t n_pages,
                                         const void *rest, uint64_t rest_size, void **seq,
                                         struct splash_err *err);
};

#endif
