/* Flint's forward pass over lanes: projections run once over every lane's rows; each
 * layer's attention runs over every lane's caches in one call (attend_lanes) with the
 * layer's window (0 for a full layer) and its sinks; RoPE only where the layer has it. */
#include <math.h>

#include "families/flint/flint.h"

struct step {
    struct flint_model *model;
    const struct splash_lane *lanes;
    int32_t n_lanes;
    int64_t n;
    int64_t *row0;                 /* first row of each lane */
    float *cs;                     /* (n, n_rot / 2, 2) */
    float *x, *xn, *mix;           /* (n, n_embd) */
    float *q, *k, *v, *att;        /* (n, q or kv dims) */
    struct splash_attn_lane *attn; /* n_lanes */
};

static void attn_layer(struct step *s, int32_t il)
{
    struct flint_model *model = s->model;
    const struct splash_kernels *k = model->k;
    const struct flint_config *c = &model->cfg;
    const struct flint_layer *L = &model->layers[il];
    struct splash_pool *pool = model->opts.pool;
    int64_t n = s->n;
    int32_t H = c->n_head, KV = c->n_head_kv, hd = c->head_dim;
    int64_t qd = (int64_t)H * hd, kvd = (int64_t)KV * hd;

    /* q, k, v = xn Wq, xn Wk, xn Wv */
    const struct splash_weight *w[3] = {L->wq, L->wk, L->wv};
    float *y[3] = {s->q, s->k, s->v};
    k->matmul_many(pool, w, 3, s->xn, n, y);
    /* NeoX RoPE on the layers that have it (rope_pattern) */
    if (c->has_rope[il]) {
        k->rope(pool, s->q, qd, hd, n, H, c->n_rot / 2, s->cs);
        k->rope(pool, s->k, kvd, hd, n, KV, c->n_rot / 2, s->cs);
    }
    /* store k, v; attend within the window (sliding layers) with the sinks */
    for (int32_t l = 0; l < s->n_lanes; l++) {
        const struct splash_lane *ln = &s->lanes[l];
        const struct flint_seq *seq = ln->seq;
        int64_t r0 = s->row0[l];
        s->attn[l] = (struct splash_attn_lane){
            .kv = {.format = model->opts.kv_format,
                   .page_tokens = FLINT_PAGE_TOKENS,
                   .n_kv_heads = KV,
                   .head_dim = hd,
                   .pages = seq->pages + (size_t)il * (size_t)seq->cap_pages,
                   .n_pages = seq->cap_pages},
            .pos0 = ln->pos0,
            .n_q = ln->n_tokens,
            .q = s->q + r0 * qd,
            .q_stride = qd,
            .out = s->att + r0 * qd,
            .out_stride = qd,
            .k = s->k + r0 * kvd,
            .v = s->v + r0 * kvd,
            .k_stride = kvd,
            .v_stride = kvd};
    }
    struct splash_attn_lanes_args la = {.size = sizeof la,
                                        .n_lanes = s->n_lanes,
                                        .lanes = s->attn,
                                        .lane_size = sizeof *s->attn,
                                        .n_head = H,
                                        .scale = 1.0f / sqrtf((float)hd),
                                        .window = c->is_swa[il] ? c->window : 0,
                                        .sinks = L->sinks};
    k->attend_lanes(pool, &la);
    /* mix = att Wo */
    k->matmul(pool, L->wo, s->att, n, s->mix);
}

static enum splash_status forward_step(struct flint_model *model, const struct splash_lane *lanes,
                                       int32_t n_lanes, struct splash_err *err)
{
    const struct flint_config *c = &model->cfg;
    const struct splash_kernels *k = model->k;
    int64_t E = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, pairs = c->n_rot / 2;
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        n += lanes[l].n_tokens;
    if (!n)
        return SPLASH_OK;
    /* caches first: nothing is computed unless every lane fits */
    for (int32_t l = 0; l < n_lanes; l++) {
        enum splash_status st = flint_seq_reserve(model, lanes[l].seq,
                                                  (int64_t)lanes[l].pos0 + lanes[l].n_tokens, err);
        if (st)
            return st;
    }
    /* the logits of rows from several lanes go through the arena's tail; one lane's go
     * straight into its own buffer */
    int32_t with_logits;
    int64_t m = step_rows_logit_rows(lanes, n_lanes, &with_logits);
    size_t logit_floats = with_logits > 1 ? (size_t)m * (size_t)c->n_vocab : 0;
    size_t floats =
        ((size_t)n * (size_t)(3 * E + 2 * pairs + 2 * qd + 2 * kvd) + logit_floats + 15) &
        ~(size_t)15;
    size_t per_lane = sizeof(int64_t) + sizeof(struct splash_attn_lane);
    float *arena = flint_buffer_get(model, &model->step_arena,
                                    floats * sizeof(float) + (size_t)n_lanes * per_lane);
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
    struct step s = {.model = model, .lanes = lanes, .n_lanes = n_lanes, .n = n};
    s.attn = (struct splash_attn_lane *)(arena + floats);
    s.row0 = (int64_t *)(s.attn + n_lanes);
    s.x = arena;
    s.xn = s.x + n * E;
    s.mix = s.xn + n * E;
    s.cs = s.mix + n * E;
    s.q = s.cs + n * 2 * pairs;
    s.att = s.q + n * qd;
    s.k = s.att + n * qd;
    s.v = s.k + n * kvd;
    float *logit_rows = s.v + n * kvd; /* (m, n_vocab) when more than one lane asks */
    /* x = the tokens' rows of the table; the rotary angles of their positions */
    step_rows_offsets(lanes, n_lanes, s.row0);
    step_rows_embed(k, &model->tok_embd, lanes, n_lanes, s.row0, E, s.x);
    for (int32_t l = 0; l < n_lanes; l++)
        k->rope_table(&c->rope, lanes[l].pos0, lanes[l].n_tokens, s.cs + s.row0[l] * 2 * pairs);
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        const struct flint_layer *L = &model->layers[il];
        /* x += attention(attn_norm(x)) */
        k->rmsnorm(model->opts.pool, s.x, E, L->attn_norm, s.xn, E, n, E, c->rms_eps);
        attn_layer(&s, il);
        step_rows_add(model->host, model->opts.pool, s.x, s.mix, n * E);
        /* x += ffn(ffn_norm(x)) */
        k->rmsnorm(model->opts.pool, s.x, E, L->ffn_norm, s.xn, E, n, E, c->rms_eps);
        enum splash_status st = flint_ffn_forward(model, il, s.xn, n, s.mix, err);
        if (st)
            return st;
        step_rows_add(model->host, model->opts.pool, s.x, s.mix, n * E);
    }
    /* xn is free by now and holds the m <= n rows asked for */
    step_rows_logits(&model->head, lanes, n_lanes, s.row0, s.x, s.xn, logit_rows);
    for (int32_t l = 0; l < n_lanes; l++) {
        ((struct flint_seq *)lanes[l].seq)->n_tokens += lanes[l].n_tokens;
        flint_seq_release_swa(model, lanes[l].seq);
    }
    return SPLASH_OK;
}

enum splash_status flint_forward(struct flint_model *model, const struct splash_lane *lanes,
                                 int32_t n_lanes, struct splash_err *err)
{
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct flint_seq *seq = ln->seq;
        enum splash_status st = step_rows_check_lane(ln, l, seq ? seq->n_tokens : 0,
                                                     model->max_context, model->cfg.n_vocab, err);
        if (st)
            return st;
        for (int32_t j = 0; j < l; j++)
            if (lanes[j].seq == ln->seq && ln->n_tokens && lanes[j].n_tokens)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "lanes %d and %d extend the same sequence", j, l);
        n += ln->n_tokens;
    }
    if (n <= FLINT_UBATCH)
        return forward_step(model, lanes, n_lanes, err);
    /* too many rows for one step: each lane in pieces of FLINT_UBATCH tokens */
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        for (int32_t off = 0; off < ln->n_tokens; off += FLINT_UBATCH) {
            int32_t len = ln->n_tokens - off < FLINT_UBATCH ? ln->n_tokens - off : FLINT_UBATCH;
            int last = off + len == ln->n_tokens;
            struct splash_lane sub = {.seq = ln->seq,
                                      .tokens = ln->tokens + off,
                                      .n_tokens = len,
                                      .pos0 = ln->pos0 + off,
                                      .logits_all = ln->logits_all};
            if (ln->logits && ln->logits_all)
                sub.logits = ln->logits + (size_t)off * (size_t)model->cfg.n_vocab;
            else if (ln->logits && last)
                sub.logits = ln->logits;
            enum splash_status st = forward_step(model, &sub, 1, err);
            if (st)
                return st;
        }
    }
    return SPLASH_OK;
}
