/* Flint's FFNs. A leading dense layer: SwiGLU, down(silu(gate x) * up x). A MoE layer: the
 * router's scores (softmax over every expert, or each logit's sigmoid), the k best, their
 * scores as weights (renormalised to sum 1 with norm_topk_prob, times routed_scaling_factor),
 * each chosen expert's SwiGLU, the weighted sum, plus the shared expert's SwiGLU added
 * whole: Flint's shared expert has no gate. Experts run batched (matmul_experts: each
 * expert's weights read once per step for every row routed to it). */
#include <math.h>
#include <string.h>

#include "families/common/moe_route.h"
#include "families/flint/flint.h"

/* llama.cpp's floor under the sum it renormalises by */
#define NORM_SUM_MIN 6.103515625e-5f

void flint_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t gating,
                     int32_t norm_topk, float scale, float *scores, int32_t *ids, float *w)
{
    if (gating == FLINT_GATING_SIGMOID) {
        for (int32_t e = 0; e < n_expert; e++)
            scores[e] = 1.0f / (1.0f + expf(-logits[e]));
    } else {
        float mx = logits[0], sum = 0.0f;
        for (int32_t e = 1; e < n_expert; e++)
            mx = fmaxf(mx, logits[e]);
        for (int32_t e = 0; e < n_expert; e++)
            sum += scores[e] = expf(logits[e] - mx);
        for (int32_t e = 0; e < n_expert; e++)
            scores[e] /= sum;
    }
    moe_route_top_k(scores, n_expert, k, ids);
    for (int32_t j = 0; j < k; j++)
        w[j] = scores[ids[j]];
    if (norm_topk) {
        float sum = 0.0f;
        for (int32_t j = 0; j < k; j++)
            sum += w[j];
        sum = fmaxf(sum, NORM_SUM_MIN);
        for (int32_t j = 0; j < k; j++)
            w[j] /= sum;
    }
    for (int32_t j = 0; j < k; j++)
        w[j] *= scale;
}

/* h = silu(g) * u over rows of `width` values */
struct swiglu_task {
    const float *g, *u;
    float *h;
    int64_t width;
};

static void swiglu_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct swiglu_task *t = ctx;
    for (int64_t i = begin * t->width; i < end * t->width; i++)
        t->h[i] = t->g[i] / (1.0f + expf(-t->g[i])) * t->u[i];
}

static void swiglu(struct flint_model *model, const float *g, const float *u, float *h, int64_t n,
                   int64_t width)
{
    struct swiglu_task t = {.g = g, .u = u, .h = h, .width = width};
    flint_parallel(model, n, step_rows_grain(width), swiglu_range, &t);
}

/* out (n, E) = down(silu(gate x) * up x); g, u, h are (n, F) scratch */
static void dense_swiglu(struct flint_model *model, const struct splash_weight *gate,
                         const struct splash_weight *up, const struct splash_weight *down,
                         const float *x, int64_t n, int64_t F, float *g, float *u, float *h,
                         float *out)
{
    const struct splash_weight *w[2] = {gate, up};
    float *y[2] = {g, u};
    model->k->matmul_many(model->opts.pool, w, 2, x, n, y);
    swiglu(model, g, u, h, n, F);
    model->k->matmul(model->opts.pool, down, h, n, out);
}

struct route_task {
    const struct flint_config *c;
    const float *x;      /* (n, E) */
    const float *logits; /* (n, X) */
    float *scores;       /* (n, X) */
    int32_t *ids;        /* (n, K) */
    float *w;            /* (n, K) */
    float *xk;           /* (n * K, E): each row once per expert it takes */
};

static void route_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct route_task *t = ctx;
    const struct flint_config *c = t->c;
    int64_t E = c->n_embd, X = c->n_expert;
    int32_t K = c->n_used;
    for (int64_t r = begin; r < end; r++) {
        flint_route_row(t->logits + r * X, (int32_t)X, K, c->gating, c->norm_topk,
                        c->routed_scale, t->scores + r * X, t->ids + r * K, t->w + r * K);
        moe_route_spread(t->x + r * E, E, K, t->xk + r * K * E);
    }
}

enum splash_status flint_ffn_forward(struct flint_model *model, int32_t il, const float *x,
                                     int64_t n, float *out, struct splash_err *err)
{
    const struct flint_config *c = &model->cfg;
    const struct flint_layer *L = &model->layers[il];
    const struct splash_kernels *k = model->k;
    struct splash_pool *pool = model->opts.pool;
    int64_t E = c->n_embd;
    if (il < c->n_dense) {
        int64_t F = c->n_ff;
        float *g = flint_buffer_get(model, &model->moe_arena, (size_t)(3 * n * F) * sizeof(float));
        if (!g)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld FFN rows",
                                  (long long)n);
        dense_swiglu(model, L->gate, L->up, L->down, x, n, F, g, g + n * F, g + 2 * n * F, out);
        return SPLASH_OK;
    }
    int64_t X = c->n_expert, K = c->n_used, F = c->n_ff_exp, S = c->n_ff_shexp, nk = n * K;
    int64_t wide = nk * F > n * S ? nk * F : n * S;
    size_t floats = (size_t)(2 * n * X + nk + nk * E + 3 * wide);
    float *arena = flint_buffer_get(model, &model->moe_arena,
                                    floats * sizeof(float) + (size_t)nk * sizeof(int32_t));
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld expert rows",
                              (long long)nk);
    float *logits = arena;          /* (n, X) */
    float *scores = logits + n * X; /* (n, X) */
    float *w = scores + n * X;      /* (n, K) */
    float *xk = w + nk;             /* (nk, E): routed rows, later the experts' outputs */
    float *g = xk + nk * E;         /* (nk, F), or (n, S) for the shared expert */
    float *u = g + wide;
    float *h = u + wide;
    int32_t *ids = (int32_t *)(h + wide);

    /* the shared expert, whole, into out */
    dense_swiglu(model, L->gate_shexp, L->up_shexp, L->down_shexp, x, n, S, g, u, h, out);
    /* the routed experts, weighted, added */
    k->matmul(pool, L->router, x, n, logits);
    struct route_task rt = {.c = c, .x = x, .logits = logits, .scores = scores, .ids = ids,
                            .w = w, .xk = xk};
    flint_parallel(model, n, step_rows_grain(E * K), route_range, &rt);
    k->matmul_experts(pool, L->gate_exps, xk, ids, nk, g);
    k->matmul_experts(pool, L->up_exps, xk, ids, nk, u);
    swiglu(model, g, u, h, nk, F);
    k->matmul_experts(pool, L->down_exps, h, ids, nk, xk);
    struct moe_route_combine ct = {.out = out, .y = xk, .w = w, .E = E, .K = (int32_t)K};
    flint_parallel(model, n, step_rows_grain(E * K), moe_route_combine_range, &ct);
    return SPLASH_OK;
}
