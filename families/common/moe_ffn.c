/* The MoE FFN of the Qwen MoE hybrids: sizes, tensors and the forward pass
 * (see moe.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/moe.h"

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

/* ---- tensors ---------------------------------------------------------------------- */

/* What moe_declare_tensors hands the trunk as its emit context: the caller's emitter
 * and the MoE sizes the FFN's declare needs (the ops' declare sees only the trunk's
 * config). */
struct decl_ctx {
    splash_decl_emit_fn emit;
    void *ctx;
    const struct splash_host *host;
    const struct splash_meta *m;
    struct moe_config moe;
};

static void passthrough(void *ctx, const struct splash_tensor_decl *d)
{
    const struct decl_ctx *c = ctx;
    c->emit(c->ctx, d);
}

static void decl(const struct decl_ctx *c, int32_t il, const char *name, uint32_t role, int n_dims,
                 int64_t ne0, int64_t ne1, int64_t ne2)
{
    struct splash_tensor_decl d = {
        .layer = il, .n_dims = n_dims, .ne = {ne0, ne1, ne2, 1}, .role = role};
    snprintf(d.name, sizeof d.name, "blk.%d.%s", il, name);
    c->emit(c->ctx, &d);
}

/* A file fuses gate and up when it holds ffn_gate_up_exps (llama.cpp's
 * create_tensor_gate_up_exps): each expert's gate rows, then its up rows. */
static int layer_fused(const struct splash_host *host, const struct splash_meta *m, int32_t il)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", il);
    return host->meta->tensor_find(m, name) != NULL;
}

static void moe_declare(const struct hybrid_config *cfg, int32_t il, splash_decl_emit_fn emit,
                        void *ctx)
{
    const struct decl_ctx *c = ctx;
    const struct moe_config *mc = &c->moe;
    int64_t e = cfg->n_embd, x = mc->n_expert, ff = mc->n_ff_exp, sh = mc->n_ff_shexp;
    decl(c, il, "ffn_gate_inp.weight", SPLASH_ROLE_ROUTER, 2, e, x, 1);
    if (layer_fused(c->host, c->m, il)) {
        decl(c, il, "ffn_gate_up_exps.weight", SPLASH_ROLE_LINEAR, 3, e, 2 * ff, x);
    } else {
        decl(c, il, "ffn_gate_exps.weight", SPLASH_ROLE_LINEAR, 3, e, ff, x);
        decl(c, il, "ffn_up_exps.weight", SPLASH_ROLE_LINEAR, 3, e, ff, x);
    }
    decl(c, il, "ffn_down_exps.weight", SPLASH_ROLE_LINEAR, 3, ff, e, x);
    decl(c, il, "ffn_gate_inp_shexp.weight", SPLASH_ROLE_SHEXP_GATE, 1, e, 1, 1);
    decl(c, il, "ffn_gate_shexp.weight", SPLASH_ROLE_LINEAR, 2, e, sh, 1);
    decl(c, il, "ffn_up_shexp.weight", SPLASH_ROLE_LINEAR, 2, e, sh, 1);
    decl(c, il, "ffn_down_shexp.weight", SPLASH_ROLE_LINEAR, 2, sh, e, 1);
}

enum splash_status moe_declare_tensors(const struct splash_host *host, const struct splash_meta *m,
                                       const char *arch, splash_decl_emit_fn emit, void *ctx,
                                       struct splash_err *err)
{
    struct decl_ctx c = {.emit = emit, .ctx = ctx, .host = host, .m = m};
    enum splash_status st = moe_config_read(host, m, arch, &c.moe, err);
    if (st)
        return st;
    return hybrid_declare_tensors(host, m, arch, &moe_ffn_ops, passthrough, &c, err);
}

/* ---- a layer's weights -------------------------------------------------------------- */

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

/* Layer il's tensor `name` of exactly this shape (the header's expert count included). */
static const struct splash_tensor_info *find(struct hybrid_model *model, int32_t il,
                                             const char *name, int64_t ne0, int64_t ne1,
                                             int64_t ne2, struct splash_err *err)
{
    const struct splash_meta_api *api = model->host->meta;
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s", il, name);
    const struct splash_tensor_info *t = api->tensor_find(model->meta, full);
    if (!t) {
        splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: tensor %s is missing",
                       api->path(model->meta), full);
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s is %lldx%lldx%lld, expected %lldx%lldx%lld",
                       api->path(model->meta), full, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)t->ne[2], (long long)ne0, (long long)ne1, (long long)ne2);
        return NULL;
    }
    if (!t->data) {
        splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s is not mapped",
                       api->path(model->meta), full);
        return NULL;
    }
    return t;
}

static enum splash_status load(struct hybrid_model *model, int32_t il, const char *name,
                               int64_t ne0, int64_t ne1, int64_t ne2, struct splash_weight **out,
                               struct splash_err *err)
{
    const struct splash_tensor_info *t = find(model, il, name, ne0, ne1, ne2, err);
    if (!t)
        return SPLASH_ERR_INVALID;
    model->weight_bytes += t->n_bytes;
    enum splash_status st = model->k->weight_create(t, out, err);
    if (!st)
        st = hybrid_weight_scale(model, t, *out, NULL, err);
    return st;
}

static void moe_destroy(struct hybrid_model *model, void *layer_ffn)
{
    struct moe_layer *L = layer_ffn;
    if (!L)
        return;
    const struct splash_kernels *k = model->k;
    k->weight_destroy(L->router);
    k->weight_destroy(L->gate);
    k->weight_destroy(L->up);
    k->weight_destroy(L->gate_up);
    k->weight_destroy(L->down);
    k->weight_destroy(L->sh_gate);
    k->weight_destroy(L->sh_up);
    k->weight_destroy(L->sh_down);
    free(L->sh_inp);
    free(L);
}

static enum splash_status moe_create(struct hybrid_model *model, int32_t il, void **layer_ffn,
                                     struct splash_err *err)
{
    struct moe_layer *L = calloc(1, sizeof *L);
    if (!L)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = moe_config_read(model->host, model->meta, model->cfg.arch, &L->c, err);
    if (st)
        goto out_destroy;
    L->il = il;
    L->simd = moe_simd_pick(model->host->cpu_features());
    int64_t e = model->cfg.n_embd, x = L->c.n_expert, ff = L->c.n_ff_exp, sh = L->c.n_ff_shexp;
    if ((st = load(model, il, "ffn_gate_inp.weight", e, x, 1, &L->router, err)))
        goto out_destroy;
    if (layer_fused(model->host, model->meta, il))
        st = load(model, il, "ffn_gate_up_exps.weight", e, 2 * ff, x, &L->gate_up, err);
    else if (!(st = load(model, il, "ffn_gate_exps.weight", e, ff, x, &L->gate, err)))
        st = load(model, il, "ffn_up_exps.weight", e, ff, x, &L->up, err);
    if (st || (st = load(model, il, "ffn_down_exps.weight", ff, e, x, &L->down, err)) ||
        (st = load(model, il, "ffn_gate_shexp.weight", e, sh, 1, &L->sh_gate, err)) ||
        (st = load(model, il, "ffn_up_shexp.weight", e, sh, 1, &L->sh_up, err)) ||
        (st = load(model, il, "ffn_down_shexp.weight", sh, e, 1, &L->sh_down, err)))
        goto out_destroy;
    /* the shared expert's gate: the F32 values it holds, whatever its format */
    const struct splash_tensor_info *g = find(model, il, "ffn_gate_inp_shexp.weight", e, 1, 1, err);
    if (!g) {
        st = SPLASH_ERR_INVALID;
        goto out_destroy;
    }
    L->sh_inp = malloc((size_t)e * sizeof *L->sh_inp);
    if (!L->sh_inp) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_destroy;
    }
    model->k->to_float(g, L->sh_inp);
    model->weight_bytes += g->n_bytes;
    *layer_ffn = L;
    return SPLASH_OK;

out_destroy:
    moe_destroy(model, L);
    return st;
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

static int64_t rows_grain(int64_t width)
{
    int64_t g = 16384 / (width > 0 ? width : 1);
    return g < 1 ? 1 : g;
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
    hybrid_parallel(model, n, rows_grain(E * K), route_range, &rt);
    if (L->observe)
        for (int64_t r = 0; r < n; r++)
            L->observe(L->observe_ctx, L->il, r,
                       route_margin(logits + r * X, (int32_t)X, ids + r * K, (int32_t)K));
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
    hybrid_parallel(model, nk, rows_grain(F), swiglu_range, &st);
    /* routed experts' down projection, into xk's rows */
    k->matmul_experts(pool, L->down, h, ids, nk, xk);
    /* shared expert */
    const struct splash_weight *shw[2] = {L->sh_gate, L->sh_up};
    float *shout[2] = {shg, shu};
    hybrid_matmuls(model, shw, 2, x, n, shout);
    struct swiglu_task sst = {
        .fn = L->simd->swiglu, .g = shg, .u = shu, .in_stride = S, .h = shg, .width = S};
    hybrid_parallel(model, n, rows_grain(S), swiglu_range, &sst);
    k->matmul(pool, L->sh_down, shg, n, shy);
    /* sum of the routed outputs by weight, plus the gated shared expert */
    struct combine_task ct = {
        .L = L, .out = out, .sh = shy, .sh_scale = sh_scale, .y = xk, .w = w, .n_embd = E};
    hybrid_parallel(model, n, rows_grain(E * (K + 1)), combine_range, &ct);
}

static int64_t moe_scratch(const struct hybrid_config *cfg)
{
    return 0; /* moe_forward sizes its own (see there) */
}

const struct hybrid_ffn_ops moe_ffn_ops = {
    .declare = moe_declare,
    .create = moe_create,
    .destroy = moe_destroy,
    .forward = moe_forward,
    .scratch_per_row = moe_scratch,
};
