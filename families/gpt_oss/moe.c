/* gpt-oss's mixture of experts: router logits with their bias, the top k taken and a
 * softmax over those k (llama.cpp's SOFTMAX_WEIGHT gating), each chosen expert's gate
 * and up projections with their biases, SwiGLU-OAI, the down projection with its bias,
 * and the weighted sum. Experts run batched (matmul_experts: each expert's weights read
 * once per step for every row routed to it). */
#include <math.h>
#include <string.h>

#include "families/common/moe_route.h"
#include "families/common/step_rows.h"
#include "families/gpt_oss/gpt_oss.h"

#define SWIGLU_LIMIT 7.0f
#define SWIGLU_ALPHA 1.702f

void gptoss_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t *ids, float *w)
{
    moe_route_top_k(logits, n_expert, k, ids);
    float mx = logits[ids[0]], sum = 0.0f;
    for (int32_t j = 0; j < k; j++) {
        w[j] = expf(logits[ids[j]] - mx);
        sum += w[j];
    }
    for (int32_t j = 0; j < k; j++)
        w[j] /= sum;
}

void gptoss_swiglu_oai(int64_t n, const float *g, const float *u, float *h)
{
    for (int64_t i = 0; i < n; i++) {
        float x = fminf(g[i], SWIGLU_LIMIT);
        float up = fminf(fmaxf(u[i], -SWIGLU_LIMIT), SWIGLU_LIMIT);
        h[i] = x / (1.0f + expf(-SWIGLU_ALPHA * x)) * (up + 1.0f);
    }
}

struct route_task {
    const struct gptoss_config *c;
    const float *x;      /* (n, E) */
    const float *logits; /* (n, X) */
    int32_t *ids;        /* (n, K) */
    float *w;            /* (n, K) */
    float *xk;           /* (n * K, E): each row once per expert it takes */
};

static void route_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct route_task *t = ctx;
    int64_t E = t->c->n_embd;
    int32_t K = t->c->n_used;
    for (int64_t r = begin; r < end; r++) {
        gptoss_route_row(t->logits + r * t->c->n_expert, t->c->n_expert, K, t->ids + r * K,
                         t->w + r * K);
        moe_route_spread(t->x + r * E, E, K, t->xk + r * K * E);
    }
}

struct swiglu_task {
    const float *g, *u;
    float *h;
    int64_t width;
};

static void swiglu_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct swiglu_task *t = ctx;
    gptoss_swiglu_oai((end - begin) * t->width, t->g + begin * t->width, t->u + begin * t->width,
                      t->h + begin * t->width);
}

/* Row r's top-k margin: the weakest chosen logit over the strongest unchosen one. */
static float route_margin(const float *logits, int32_t n_expert, const int32_t *ids, int32_t k)
{
    float weakest = INFINITY, rival = -INFINITY;
    for (int32_t j = 0; j < k; j++)
        weakest = fminf(weakest, logits[ids[j]]);
    for (int32_t e = 0; e < n_expert; e++) {
        int chosen = 0;
        for (int32_t j = 0; j < k && !chosen; j++)
            chosen = ids[j] == e;
        if (!chosen)
            rival = fmaxf(rival, logits[e]);
    }
    return weakest - rival;
}

enum splash_status gptoss_moe_forward(struct gptoss_model *model, const struct gptoss_layer *L,
                                      int32_t il, const float *x, int64_t n, float *out,
                                      struct splash_err *err)
{
    const struct gptoss_config *c = &model->cfg;
    const struct splash_kernels *k = model->k;
    struct splash_pool *pool = model->opts.pool;
    int64_t E = c->n_embd, X = c->n_expert, K = c->n_used, F = c->n_ff_exp, nk = n * K;
    size_t floats = (size_t)(n * X + nk + nk * E + 3 * nk * F);
    float *arena = gptoss_buffer_get(model, &model->moe_arena,
                                     floats * sizeof(float) + (size_t)nk * sizeof(int32_t));
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld expert rows",
                              (long long)nk);
    float *logits = arena;   /* (n, X) */
    float *w = logits + n * X; /* (n, K) */
    float *xk = w + nk;      /* (nk, E): routed rows, later the experts' outputs */
    float *g = xk + nk * E;  /* (nk, F) */
    float *u = g + nk * F;   /* (nk, F) */
    float *h = u + nk * F;   /* (nk, F) */
    int32_t *ids = (int32_t *)(h + nk * F);

    k->matmul(pool, L->router, x, n, logits);
    k->add_bias(pool, logits, X, n, X, L->b_router, NULL, 0);
    struct route_task rt = {.c = c, .x = x, .logits = logits, .ids = ids, .w = w, .xk = xk};
    gptoss_parallel(model, n, step_rows_grain(E * K), route_range, &rt);
    if (model->route_observer)
        for (int64_t r = 0; r < n; r++)
            model->route_observer(model->route_observer_ctx, il, r,
                                  route_margin(logits + r * X, (int32_t)X, ids + r * K,
                                               (int32_t)K));
    k->matmul_experts(pool, L->gate, xk, ids, nk, g);
    k->matmul_experts(pool, L->up, xk, ids, nk, u);
    k->add_bias(pool, g, F, nk, F, L->b_gate, ids, F);
    k->add_bias(pool, u, F, nk, F, L->b_up, ids, F);
    struct swiglu_task st = {.g = g, .u = u, .h = h, .width = F};
    gptoss_parallel(model, nk, step_rows_grain(F), swiglu_range, &st);
    k->matmul_experts(pool, L->down, h, ids, nk, xk);
    k->add_bias(pool, xk, E, nk, E, L->b_down, ids, E);
    struct moe_route_combine ct = {
        .out = out, .y = xk, .w = w, .E = E, .K = (int32_t)K, .overwrite = 1};
    gptoss_parallel(model, n, step_rows_grain(E * K), moe_route_combine_range, &ct);
    return SPLASH_OK;
}
