/* The MoE FFN of the Qwen MoE hybrids: sizes, tensors and the forward pass
 * (see moe.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/step_rows.h"
#include "families/qwen_moe/expert_store.h"
#include "families/qwen_moe/moe.h"

/* ---- sizes ---------------------------------------------------------------------- */

/* The key as this source spells it: "<arch>.<gguf>", or "text_config.<cfg>" when the
 * config nests its text model, else "<cfg>". */
static const char *key_of(const struct splash_meta_api *api, const struct splash_meta *m,
                          const char *arch, const char *gguf, const char *cfg, char *buf,
                          size_t size)
{
    if (api->source(m) == SPLASH_META_GGUF)
        snprintf(buf, size, "%s.%s", arch, gguf);
    else if (api->has(m, "text_config"))
        snprintf(buf, size, "text_config.%s", cfg);
    else
        snprintf(buf, size, "%s", cfg);
    return buf;
}

static enum splash_status get_count(const struct splash_meta_api *api, const struct splash_meta *m,
                                    const char *key, int64_t lo, int64_t hi, int64_t *out,
                                    struct splash_err *err)
{
    enum splash_status st = api->get_i64(m, key, out, err);
    if (st)
        return st;
    if (*out < lo || *out > hi)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld (%lld to %lld served)",
                              api->path(m), key, (long long)*out, (long long)lo, (long long)hi);
    return SPLASH_OK;
}

enum splash_status moe_config_read(const struct splash_host *host, const struct splash_meta *m,
                                   const char *arch, struct moe_config *cfg, struct splash_err *err)
{
    const struct splash_meta_api *api = host->meta;
    static const struct {
        const char *gguf, *cfg;
        int64_t max;
    } keys[4] = {
        {"expert_count", "num_experts", MOE_MAX_EXPERTS},
        {"expert_used_count", "num_experts_per_tok", MOE_MAX_USED},
        {"expert_feed_forward_length", "moe_intermediate_size", INT32_MAX},
        {"expert_shared_feed_forward_length", "shared_expert_intermediate_size", INT32_MAX},
    };
    char key[128];
    int64_t v[4];
    enum splash_status st;
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < 4; i++) {
        key_of(api, m, arch, keys[i].gguf, keys[i].cfg, key, sizeof key);
        if ((st = get_count(api, m, key, 1, keys[i].max, &v[i], err)))
            return st;
    }
    int64_t n_expert = v[0], n_used = v[1], ff = v[2], sh = v[3];
    /* a token takes n_used distinct experts: the file must hold at least that many */
    if (n_used > n_expert)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: %lld experts, but each token takes %lld", api->path(m),
                              key_of(api, m, arch, "expert_count", "num_experts", key, sizeof key),
                              (long long)n_expert, (long long)n_used);
    {
        /* the router renormalises its top-k (Qwen's norm_topk_prob, GGUF's
         * expert_weights_norm); nothing else is served */
        int norm = 1;
        key_of(api, m, arch, "expert_weights_norm", "norm_topk_prob", key, sizeof key);
        if (api->has(m, key) && (st = api->get_bool(m, key, &norm, err)))
            return st;
        if (!norm)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s: false, the family renormalises the top-k weights",
                                  api->path(m), key);
    }
    cfg->n_expert = (int32_t)n_expert;
    cfg->n_used = (int32_t)n_used;
    cfg->n_ff_exp = ff;
    cfg->n_ff_shexp = sh;
    return SPLASH_OK;
}

void moe_config_summary(const struct moe_config *cfg, char *buf, size_t size)
{
    size_t used = strlen(buf);
    if (used < size)
        snprintf(buf + used, size - used, ", %d experts (%d used) of ff %lld, shared ff %lld",
                 cfg->n_expert, cfg->n_used, (long long)cfg->n_ff_exp, (long long)cfg->n_ff_shexp);
}

/* ---- a layer's weights and their declarations ----------------------------------------- */

struct moe_layer {
    struct moe_config c;
    int32_t il;
    const struct moe_simd *simd;
    struct splash_weight *router;          /* (n_embd) -> n_expert, its stored format */
    struct splash_weight *gate, *up;       /* (n_embd) -> n_ff_exp per expert, or: */
    struct splash_weight *gate_up;         /* (n_embd) -> 2 n_ff_exp per expert, fused */
    struct splash_weight *down;            /* (n_ff_exp) -> n_embd per expert */
    struct splash_weight *sh_gate, *sh_up; /* (n_embd) -> n_ff_shexp */
    struct splash_weight *sh_down;         /* (n_ff_shexp) -> n_embd */
    float *sh_inp;                         /* (n_embd): the shared expert's scalar gate */
    moe_route_observer_fn observe;         /* diagnostics (moe_ffn_set_observer) */
    void *observe_ctx;
};

void moe_ffn_set_observer(void *layer_ffn, moe_route_observer_fn fn, void *ctx)
{
    struct moe_layer *L = layer_ffn;
    L->observe = fn;
    L->observe_ctx = ctx;
}

/* ---- streamed experts ------------------------------------------------------------------ */

/* Steps of at most this many rows count as decode for the store's replacement: a batched
 * decode step's verify rows, not a prompt chunk. */
#define MOE_DECODE_ROWS 32
/* Rows a forward step of a model whose experts stream runs layer by layer (the trunk's
 * pieces are 512 rows otherwise): each piece reads nearly every expert of each layer. */
#define MOE_STREAMED_UBATCH 2048

/* The model-wide state of the MoE FFN (model->ffn_model): the streamed experts' store. */
struct moe_model {
    int stream;                  /* the routed experts stay in their files */
    uint64_t budget;             /* --expert-memory as the model opts carry it */
    uint64_t routed, smallest;   /* every routed expert's bytes; the smallest store */
    struct es_layer_src *src;    /* per layer */
    struct splash_expert_planes *planes; /* per layer and part: an imported stack's planes */
    struct es_store *store;
};

static int layer_fused(const struct splash_host *host, const struct splash_meta *m, int32_t il);

/* Layer il's routed stacks as the file holds them (weights bound later). */
static void layer_src(const struct hybrid_model *model, int32_t il, int32_t n_expert,
                      struct es_layer_src *src)
{
    static const char *const fused[] = {"ffn_gate_up_exps", "ffn_down_exps"};
    static const char *const split[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    int f = layer_fused(model->host, model->meta, il);
    memset(src, 0, sizeof *src);
    src->n_parts = f ? 2 : 3;
    src->n_expert = n_expert;
    for (int32_t p = 0; p < src->n_parts; p++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, f ? fused[p] : split[p]);
        src->t[p] = model->host->meta->tensor_find(model->meta, name);
    }
}

static enum splash_status moe_model_prepare(struct hybrid_model *model, struct splash_err *err)
{
    struct moe_model *mm = calloc(1, sizeof *mm);
    if (!mm)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    model->ffn_model = mm;
    mm->budget = model->opts.expert_memory;
    struct moe_config mc;
    enum splash_status st = moe_config_read(model->host, model->meta, model->cfg.arch, &mc, err);
    if (st)
        return st;
    int32_t n_layers = (int32_t)model->cfg.n_layers;
    mm->src = calloc((size_t)n_layers, sizeof *mm->src);
    if (!mm->src)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    mm->planes = calloc((size_t)n_layers * ES_MAX_PARTS, sizeof *mm->planes);
    if (!mm->planes)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    /* where each stack's experts are read from: its bytes in the file as stored (GGUF), or
     * the planes an import makes it of (an MLX checkpoint's, host ABI 1.6); a stack that is
     * neither loads whole under auto, and a size is refused naming it */
    const struct splash_host *host = model->host;
    const int planes_api =
        host->abi_minor >= 6 &&
        host->size >= offsetof(struct splash_host, expert_import) + sizeof host->expert_import &&
        host->expert_planes && host->expert_import;
    const struct splash_tensor_info *whole = NULL;
    char why[256] = "";
    for (int32_t il = 0; il < n_layers; il++) {
        layer_src(model, il, mc.n_expert, &mm->src[il]);
        for (int32_t p = 0; p < mm->src[il].n_parts; p++) {
            const struct splash_tensor_info *t = mm->src[il].t[p];
            if (!t || t->n_dims < 3)
                return SPLASH_OK; /* binding names what is missing; nothing to stream */
            char path[1024];
            uint64_t off;
            if (t->data && !host->locate_bytes(t->data, t->n_bytes, path, sizeof path, &off))
                continue;
            struct splash_expert_planes *pl = &mm->planes[il * ES_MAX_PARTS + p];
            struct splash_err perr = {{0}};
            enum splash_status pst =
                planes_api ? host->expert_planes(model->meta, t, pl, &perr) : SPLASH_ERR_NOT_FOUND;
            if (!pst) {
                mm->src[il].planes[p] = pl;
                continue;
            }
            if (!whole) {
                whole = t;
                if (pst == SPLASH_ERR_UNSUPPORTED)
                    snprintf(why, sizeof why, "%s", perr.msg);
                else
                    snprintf(why, sizeof why,
                             "%s is imported into memory, not read from its "
                             "file as stored",
                             t->name);
            }
        }
    }
    es_sizes(mm->src, n_layers, &mm->routed, &mm->smallest);
    if (!mm->budget)
        return SPLASH_OK;
    if (whole) {
        if (mm->budget != SPLASH_EXPERTS_SMALLEST)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "--expert-memory: %s: they cannot stream", why);
        host->log(SPLASH_LOG_INFO, "qwen_moe", "%s: the routed experts load whole", why);
        return SPLASH_OK;
    }
    /* a store that holds every expert loads them all, as off does */
    mm->stream = mm->budget == SPLASH_EXPERTS_SMALLEST || mm->budget < mm->routed;
    if (!mm->stream)
        model->host->log(SPLASH_LOG_INFO, "qwen_moe",
                         "--expert-memory %.1f MiB holds every routed expert (%.1f MiB): they "
                         "load whole",
                         (double)mm->budget / 1048576.0, (double)mm->routed / 1048576.0);
    return SPLASH_OK;
}

static enum splash_status moe_model_ready(struct hybrid_model *model, struct splash_err *err)
{
    struct moe_model *mm = model->ffn_model;
    if (!mm->stream)
        return SPLASH_OK;
    int32_t n_layers = (int32_t)model->cfg.n_layers;
    for (int32_t il = 0; il < n_layers; il++) {
        const struct moe_layer *L = model->layers[il].ffn;
        struct es_layer_src *src = &mm->src[il];
        const struct splash_weight *w[3] = {L->gate_up ? L->gate_up : L->gate,
                                            L->gate_up ? L->down : L->up, L->down};
        for (int32_t p = 0; p < src->n_parts; p++)
            src->w[p] = w[p];
    }
    enum splash_status st = es_create(model->host, mm->src, n_layers, mm->budget,
                                      model->opts.expert_elastic, &mm->store, err);
    if (st)
        return st;
    /* a prefill group of four 512-row steps runs layer by layer: each layer's experts are
     * read once for all its rows */
    model->ubatch = MOE_STREAMED_UBATCH;
    struct splash_expert_stats s;
    es_stats_get(mm->store, &s);
    model->host->log(SPLASH_LOG_INFO, "qwen_moe",
                     "Streamed experts · a store of %.1f MiB, its floor %.1f MiB (%d slots of %d "
                     "experts live, %.1f MiB in %d of %d chunks, %d reader%s) for %.1f MiB of "
                     "routed experts; the smallest is %.1f MiB",
                     (double)s.cap_bytes / 1048576.0, (double)s.floor_bytes / 1048576.0, s.slots,
                     s.experts, (double)s.arena_bytes / 1048576.0, s.chunks, s.cap_chunks,
                     s.readers, s.readers == 1 ? "" : "s", (double)mm->routed / 1048576.0, (double)mm->smallest / 1048576.0);
    return SPLASH_OK;
}

static void moe_model_free(struct hybrid_model *model)
{
    struct moe_model *mm = model->ffn_model;
    if (!mm)
        return;
    es_destroy(mm->store);
    free(mm->src);
    free(mm->planes);
    free(mm);
    model->ffn_model = NULL;
}

static void moe_model_info(const struct hybrid_model *model, struct splash_model_info *info)
{
    const struct moe_model *mm = model->ffn_model;
    if (!mm)
        return;
    info->routed_expert_bytes = mm->routed;
    info->expert_store_min_bytes = mm->smallest;
    if (mm->store) {
        info->expert_store_bytes = es_bytes(mm->store);
        info->weight_bytes += info->expert_store_bytes;
    }
}

int moe_expert_stats(const void *hybrid_model, struct splash_expert_stats *out)
{
    const struct hybrid_model *model = hybrid_model;
    const struct moe_model *mm = model->ffn_model;
    if (!mm || !mm->store)
        return 0;
    es_stats_get(mm->store, out);
    return 1;
}

uint64_t moe_expert_resize(void *hybrid_model, int32_t grow, uint64_t max_bytes)
{
    struct hybrid_model *model = hybrid_model;
    struct moe_model *mm = model->ffn_model;
    return mm && mm->store ? es_resize(mm->store, grow, max_bytes) : 0;
}

/* A file fuses gate and up when it holds ffn_gate_up_exps (llama.cpp's
 * create_tensor_gate_up_exps): each expert's gate rows, then its up rows. */
static int layer_fused(const struct splash_host *host, const struct splash_meta *m, int32_t il)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", il);
    return host->meta->tensor_find(m, name) != NULL;
}

/* The router, the routed experts and the shared expert with its gate, all held to the
 * header's expert count (h->ffn_config: the struct moe_config moe_declare reads). */
static void moe_declare_layer(const struct hybrid_decls *h, int32_t il, void *layer_ffn)
{
    const struct moe_config *mc = h->ffn_config;
    struct moe_layer *L = layer_ffn;
    const uint32_t lin = SPLASH_ACCEPT_LINEAR, W = SPLASH_BIND_WEIGHT;
    const struct moe_model *mm = h->model ? h->model->ffn_model : NULL;
    /* streamed experts stay in the file: the kernels get their shape, not their rows */
    const uint32_t X = mm && mm->stream ? SPLASH_BIND_EXPERTS : W;
    int64_t e = h->cfg->n_embd, x = mc->n_expert, ff = mc->n_ff_exp, sh = mc->n_ff_shexp;
    hybrid_decl(h, il, "ffn_gate_inp.weight",
                SPLASH_ACCEPT_QUANT | SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16, 0, 2, e, x, 1, W,
                L ? &L->router : NULL);
    if (layer_fused(h->host, h->m, il)) {
        hybrid_decl(h, il, "ffn_gate_up_exps.weight", lin, 0, 3, e, 2 * ff, x, X,
                    L ? &L->gate_up : NULL);
    } else {
        hybrid_decl(h, il, "ffn_gate_exps.weight", lin, 0, 3, e, ff, x, X, L ? &L->gate : NULL);
        hybrid_decl(h, il, "ffn_up_exps.weight", lin, 0, 3, e, ff, x, X, L ? &L->up : NULL);
    }
    hybrid_decl(h, il, "ffn_down_exps.weight", lin, 0, 3, ff, e, x, X, L ? &L->down : NULL);
    /* the shared expert's gate: the F32 values it holds, whatever its format */
    hybrid_decl(h, il, "ffn_gate_inp_shexp.weight",
                SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16 | SPLASH_ACCEPT_Q8_0, 0, 1, e, 1, 1,
                SPLASH_BIND_FLOATS, L ? &L->sh_inp : NULL);
    hybrid_decl(h, il, "ffn_gate_shexp.weight", lin, 0, 2, e, sh, 1, W, L ? &L->sh_gate : NULL);
    hybrid_decl(h, il, "ffn_up_shexp.weight", lin, 0, 2, e, sh, 1, W, L ? &L->sh_up : NULL);
    hybrid_decl(h, il, "ffn_down_shexp.weight", lin, 0, 2, sh, e, 1, W, L ? &L->sh_down : NULL);
}

enum splash_status moe_declare(const struct splash_host *host, const struct splash_meta *m,
                               const char *arch, struct hybrid_model *model,
                               splash_decl_emit_fn emit, void *ctx, struct splash_err *err)
{
    struct moe_config mc;
    enum splash_status st = moe_config_read(host, m, arch, &mc, err);
    if (st)
        return st;
    return hybrid_declare(host, m, arch, &moe_ffn_ops, &mc, model, emit, ctx, err);
}

/* Row r's top-k margin: the weakest chosen logit over the strongest unchosen one. */
static float route_margin(const float *logits, int32_t n_expert, const int32_t *ids, int32_t k)
{
    float weakest = INFINITY, rival = -INFINITY;
    for (int32_t j = 0; j < k; j++)
        if (logits[ids[j]] < weakest)
            weakest = logits[ids[j]];
    for (int32_t e = 0; e < n_expert; e++) {
        int chosen = 0;
        for (int32_t j = 0; j < k && !chosen; j++)
            chosen = ids[j] == e;
        if (!chosen && logits[e] > rival)
            rival = logits[e];
    }
    return weakest - rival;
}

static void moe_destroy(struct hybrid_model *model, void *layer_ffn)
{
    free(layer_ffn);
}

static enum splash_status moe_create(struct hybrid_model *model, int32_t il, void **layer_ffn,
                                     struct splash_err *err)
{
    struct moe_layer *L = calloc(1, sizeof *L);
    if (!L)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = moe_config_read(model->host, model->meta, model->cfg.arch, &L->c, err);
    if (st) {
        free(L);
        return st;
    }
    L->il = il;
    L->simd = moe_simd_pick(model->host->cpu_features());
    *layer_ffn = L;
    return SPLASH_OK;
}

/* ---- forward ------------------------------------------------------------------------ */

struct route_task {
    const struct moe_layer *L;
    const float *x;      /* (n, n_embd) */
    const float *logits; /* (n, n_expert) */
    int32_t *ids;        /* (n, n_used) */
    float *w;            /* (n, n_used) */
    float *sh_scale;     /* (n): sigmoid of the shared expert's gate */
    float *xk;           /* (n * n_used, n_embd): each row once per expert it takes */
    int64_t n_embd;
};

static void route_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct route_task *t = ctx;
    const struct moe_config *c = &t->L->c;
    int64_t E = t->n_embd;
    for (int64_t r = begin; r < end; r++) {
        const float *x = t->x + r * E;
        moe_route_row(t->logits + r * c->n_expert, c->n_expert, c->n_used, t->ids + r * c->n_used,
                      t->w + r * c->n_used);
        float s = 0.0f;
        for (int64_t i = 0; i < E; i++)
            s += x[i] * t->L->sh_inp[i];
        t->sh_scale[r] = 1.0f / (1.0f + expf(-s));
        for (int32_t j = 0; j < c->n_used; j++)
            memcpy(t->xk + (r * c->n_used + j) * E, x, (size_t)E * sizeof(float));
    }
}

struct swiglu_task {
    moe_swiglu_fn fn;
    const float *g, *u;
    int64_t in_stride;
    float *h;
    int64_t width;
};

static void swiglu_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct swiglu_task *t = ctx;
    t->fn(t->g + begin * t->in_stride, t->u + begin * t->in_stride, t->in_stride,
          t->h + begin * t->width, end - begin, t->width);
}

struct combine_task {
    const struct moe_layer *L;
    float *out;            /* (n, n_embd) */
    const float *sh;       /* (n, n_embd): the shared expert's output */
    const float *sh_scale; /* (n) */
    const float *y;        /* (n * n_used, n_embd): the routed experts' outputs */
    const float *w;        /* (n, n_used) */
    int64_t n_embd;
};

static void combine_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct combine_task *t = ctx;
    int32_t k = t->L->c.n_used;
    int64_t E = t->n_embd;
    for (int64_t r = begin; r < end; r++)
        t->L->simd->combine(t->out + r * E, t->sh + r * E, t->sh_scale[r], t->y + r * k * E,
                            t->w + r * k, k, E);
}

/* The routed experts' gate/up, SwiGLU and down over the rows whose experts `at` holds
 * (part tables: gate_up, down; or gate, up, down); other rows are left as they are. */
static void experts_pass(struct hybrid_model *model, const struct moe_layer *L,
                         const void *const *const *at, const int32_t *ids, int64_t nk, float *xk,
                         float *gu, float *h)
{
    const struct splash_kernels *k = model->k;
    struct splash_pool *pool = model->opts.pool;
    int64_t F = L->c.n_ff_exp;
    struct swiglu_task st = {.fn = L->simd->swiglu, .h = h, .width = F};
    if (L->gate_up) {
        k->matmul_experts_at(pool, L->gate_up, at[0], xk, ids, nk, gu);
        st.g = gu;
        st.u = gu + F;
        st.in_stride = 2 * F;
    } else {
        k->matmul_experts_at(pool, L->gate, at[0], xk, ids, nk, gu);
        k->matmul_experts_at(pool, L->up, at[1], xk, ids, nk, gu + nk * F);
        st.g = gu;
        st.u = gu + nk * F;
        st.in_stride = F;
    }
    /* every row: a row this pass skipped gets its SwiGLU again in its own pass, from the
     * same inputs, so the same bits */
    hybrid_parallel(model, nk, step_rows_grain(F), swiglu_range, &st);
    k->matmul_experts_at(pool, L->down, at[L->gate_up ? 1 : 2], h, ids, nk, xk);
}

static void shared_expert(struct hybrid_model *model, const struct moe_layer *L, const float *x,
                          int64_t n, float *shg, float *shu, float *shy)
{
    int64_t S = L->c.n_ff_shexp;
    const struct splash_weight *shw[2] = {L->sh_gate, L->sh_up};
    float *shout[2] = {shg, shu};
    hybrid_matmuls(model, shw, 2, x, n, shout);
    struct swiglu_task sst = {
        .fn = L->simd->swiglu, .g = shg, .u = shu, .in_stride = S, .h = shg, .width = S};
    hybrid_parallel(model, n, step_rows_grain(S), swiglu_range, &sst);
    model->k->matmul(model->opts.pool, L->sh_down, shg, n, shy);
}

/* The layer with its routed experts streamed: the store claims slots for the experts it
 * lacks and reads them while the resident experts' products and the shared expert run;
 * then the experts read run. Each expert's rows, and so every row's bits, are those of
 * the all-resident pass. A failed load leaves the layer's output zero and stops the step
 * (model->ffn_status). */
/* Decode read-ahead: the next layer's router on this layer's input picks the experts
 * its load will likely route; their reads start now, while this step runs on to it. The
 * buffers (logits, ids, w) are this layer's, free once it has combined. */
static void read_ahead(struct hybrid_model *model, const struct moe_layer *L,
                       struct es_store *store, const float *x, int64_t n, float *logits,
                       int32_t *ids, float *w)
{
    if (L->il + 1 >= model->cfg.n_layers)
        return;
    const struct moe_layer *next = model->layers[L->il + 1].ffn;
    int32_t X = next->c.n_expert, K = next->c.n_used;
    model->k->matmul(model->opts.pool, next->router, x, n, logits);
    for (int64_t r = 0; r < n; r++)
        moe_route_row(logits + r * X, X, K, ids + r * K, w + r * K);
    es_read_ahead(store, L->il + 1, ids, n * K);
}

static void streamed_forward(struct hybrid_model *model, const struct moe_layer *L,
                             struct es_store *store, const float *x, int64_t n, float *out,
                             float *logits, int32_t *ids, float *w, const float *sh_scale,
                             float *xk, float *gu, float *h, float *shg, float *shu, float *shy)
{
    int64_t E = model->cfg.n_embd, nk = n * L->c.n_used;
    const void *const *now[ES_MAX_PARTS], *const *late[ES_MAX_PARTS];
    int n_late = 0;
    int decode = n <= MOE_DECODE_ROWS;
    enum splash_status st = es_load(store, L->il, ids, nk, decode, now, late, &n_late,
                                    &model->ffn_err);
    if (!st) {
        experts_pass(model, L, now, ids, nk, xk, gu, h);
        shared_expert(model, L, x, n, shg, shu, shy);
        st = es_wait(store, &model->ffn_err);
    }
    if (st) {
        model->ffn_status = st;
        memset(out, 0, (size_t)(n * E) * sizeof(float));
        return;
    }
    if (n_late)
        experts_pass(model, L, late, ids, nk, xk, gu, h);
    struct combine_task ct = {
        .L = L, .out = out, .sh = shy, .sh_scale = sh_scale, .y = xk, .w = w, .n_embd = E};
    hybrid_parallel(model, n, step_rows_grain(E * (L->c.n_used + 1)), combine_range, &ct);
    if (decode)
        read_ahead(model, L, store, x, n, logits, ids, w);
}

static void moe_forward(struct hybrid_model *model, void *layer_ffn, const float *x, int64_t n,
                        float *out, float *scratch)
{
    const struct moe_layer *L = layer_ffn;
    const struct splash_kernels *k = model->k;
    struct splash_pool *pool = model->opts.pool;
    int64_t E = model->cfg.n_embd, X = L->c.n_expert, K = L->c.n_used, F = L->c.n_ff_exp,
            S = L->c.n_ff_shexp, nk = n * K;
    /* The trunk sizes its scratch by its own config, which knows no expert counts;
     * the routed rows (n x n_used) need their own. */
    size_t floats = (size_t)(n * X + nk + n + nk * E + nk * 2 * F + nk * F + 2 * n * S + n * E);
    /* the routed expert ids after the floats */
    float *arena = hybrid_buffer_get(model, &model->ffn_arena,
                                     floats * sizeof(float) + (size_t)nk * sizeof(int32_t));
    int32_t *ids = arena ? (int32_t *)(arena + floats) : NULL;
    if (!arena) {
        /* no error path through the ops: an FFN that cannot run adds nothing */
        memset(out, 0, (size_t)(n * E) * sizeof(float));
        model->host->log(SPLASH_LOG_ERROR, "moe", "out of memory for %lld MoE rows", (long long)n);
        return;
    }
    float *logits = arena;      /* (n, X)     router logits */
    float *w = logits + n * X;  /* (n, K)     routing weights */
    float *sh_scale = w + nk;   /* (n)        sigmoid(shared-expert gate) */
    float *xk = sh_scale + n;   /* (n*K, E)   rows per routed expert; later their outputs */
    float *gu = xk + nk * E;    /* (n*K, 2F)  gate and up (fused: gate then up per row) */
    float *h = gu + nk * 2 * F; /* (n*K, F)   SwiGLU */
    float *shg = h + nk * F;    /* (n, S)     shared expert gate, then its SwiGLU */
    float *shu = shg + n * S;   /* (n, S)     shared expert up */
    float *shy = shu + n * S;   /* (n, E)     shared expert output */
    (void)scratch;

    /* router, in its stored format */
    k->matmul(pool, L->router, x, n, logits);
    /* softmax, top-k, renormalise; the shared expert's gate; rows repeated per expert */
    struct route_task rt = {.L = L,
                            .x = x,
                            .logits = logits,
                            .ids = ids,
                            .w = w,
                            .sh_scale = sh_scale,
                            .xk = xk,
                            .n_embd = E};
    hybrid_parallel(model, n, step_rows_grain(E * K), route_range, &rt);
    if (L->observe)
        for (int64_t r = 0; r < n; r++)
            L->observe(L->observe_ctx, L->il, r,
                       route_margin(logits + r * X, (int32_t)X, ids + r * K, (int32_t)K));
    const struct moe_model *mm = model->ffn_model;
    if (mm && mm->store) {
        streamed_forward(model, L, mm->store, x, n, out, logits, ids, w, sh_scale, xk, gu, h,
                         shg, shu, shy);
        return;
    }
    /* routed experts' gate and up, grouped by expert */
    struct swiglu_task st = {.fn = L->simd->swiglu, .h = h, .width = F};
    if (L->gate_up) {
        k->matmul_experts(pool, L->gate_up, xk, ids, nk, gu);
        st.g = gu;
        st.u = gu + F;
        st.in_stride = 2 * F;
    } else {
        k->matmul_experts(pool, L->gate, xk, ids, nk, gu);
        k->matmul_experts(pool, L->up, xk, ids, nk, gu + nk * F);
        st.g = gu;
        st.u = gu + nk * F;
        st.in_stride = F;
    }
    hybrid_parallel(model, nk, step_rows_grain(F), swiglu_range, &st);
    /* routed experts' down projection, into xk's rows */
    k->matmul_experts(pool, L->down, h, ids, nk, xk);
    /* shared expert */
    const struct splash_weight *shw[2] = {L->sh_gate, L->sh_up};
    float *shout[2] = {shg, shu};
    hybrid_matmuls(model, shw, 2, x, n, shout);
    struct swiglu_task sst = {
        .fn = L->simd->swiglu, .g = shg, .u = shu, .in_stride = S, .h = shg, .width = S};
    hybrid_parallel(model, n, step_rows_grain(S), swiglu_range, &sst);
    k->matmul(pool, L->sh_down, shg, n, shy);
    /* sum of the routed outputs by weight, plus the gated shared expert */
    struct combine_task ct = {
        .L = L, .out = out, .sh = shy, .sh_scale = sh_scale, .y = xk, .w = w, .n_embd = E};
    hybrid_parallel(model, n, step_rows_grain(E * (K + 1)), combine_range, &ct);
}

static int64_t moe_scratch(const struct hybrid_config *cfg)
{
    return 0; /* moe_forward sizes its own (see there) */
}

const struct hybrid_ffn_ops moe_ffn_ops = {
    .declare = moe_declare_layer,
    .create = moe_create,
    .destroy = moe_destroy,
    .forward = moe_forward,
    .scratch_per_row = moe_scratch,
    .model_prepare = moe_model_prepare,
    .model_ready = moe_model_ready,
    .model_free = moe_model_free,
    .model_info = moe_model_info,
};
