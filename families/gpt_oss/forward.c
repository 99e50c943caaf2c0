/* gpt-oss's forward pass over lanes: projections run once over every lane's rows;
 * attention runs per lane on its caches (a batched decode step's lanes in one section),
 * a sliding layer's long lanes in blocks of GPTOSS_SWA_ROWS rows so its ring holds what
 * each block reads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/step_rows.h"
#include "families/gpt_oss/gpt_oss.h"

#define GPTOSS_UBATCH 512 /* rows per step; longer inputs are split per lane */

struct step {
    struct gptoss_model *model;
    const struct splash_lane *lanes;
    int32_t n_lanes;
    int64_t n;
    int64_t *row0;                  /* first row of each lane */
    float *cs;                      /* (n, n_rot / 2, 2) */
    float *x, *xn, *mix;            /* (n, n_embd) */
    float *q, *k, *v, *att;         /* (n, q or kv dims) */
    struct splash_attn_lane *attn;  /* n_lanes */
};

static void add_into(struct gptoss_model *model, float *x, const float *y, int64_t n)
{
    step_rows_add(model->host, model->opts.pool, x, y, n);
}

static struct splash_kv_pages lane_kv(const struct gptoss_model *model, const struct gptoss_seq *seq,
                                      const struct gptoss_layer *L, int swa)
{
    const struct gptoss_config *c = &model->cfg;
    struct splash_kv_pages kv = {.format = model->opts.kv_format,
                                 .page_tokens = GPTOSS_PAGE_TOKENS,
                                 .n_kv_heads = c->n_head_kv,
                                 .head_dim = c->head_dim,
                                 .n_pages = seq->cap_pages};
    kv.pages = swa ? seq->view + (size_t)L->slot * seq->cap_pages
                   : seq->pages + (size_t)L->slot * seq->cap_pages;
    return kv;
}

static void attn_layer(struct step *s, const struct gptoss_layer *L, int32_t il)
{
    struct gptoss_model *model = s->model;
    const struct splash_kernels *k = model->k;
    const struct gptoss_config *c = &model->cfg;
    struct splash_pool *pool = model->opts.pool;
    int64_t n = s->n;
    int32_t H = c->n_head, KV = c->n_head_kv, hd = c->head_dim;
    int64_t qd = (int64_t)H * hd, kvd = (int64_t)KV * hd;
    int swa = c->is_swa[il];

    const struct splash_weight *w[3] = {L->wq, L->wk, L->wv};
    float *y[3] = {s->q, s->k, s->v};
    k->matmul_many(pool, w, 3, s->xn, n, y);
    k->add_bias(pool, s->q, qd, n, qd, L->bq, NULL, 0);
    k->add_bias(pool, s->k, kvd, n, kvd, L->bk, NULL, 0);
    k->add_bias(pool, s->v, kvd, n, kvd, L->bv, NULL, 0);
    k->rope(pool, s->q, qd, hd, n, H, c->n_rot / 2, s->cs);
    k->rope(pool, s->k, kvd, hd, n, KV, c->n_rot / 2, s->cs);

    struct splash_attn_lanes_args la = {.size = sizeof la,
                                        .lanes = s->attn,
                                        .lane_size = sizeof *s->attn,
                                        .n_head = H,
                                        .scale = 1.0f / sqrtf((float)hd),
                                        .window = swa && !model->ignore_window ? c->window : 0,
                                        .sinks = L->sinks};
    int32_t n_short = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        const struct splash_lane *ln = &s->lanes[l];
        int64_t r0 = s->row0[l];
        struct splash_attn_lane a = {.kv = lane_kv(model, ln->seq, L, swa),
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
        if (!swa || ln->n_tokens <= GPTOSS_SWA_ROWS) {
            s->attn[n_short++] = a;
            continue;
        }
        /* a long lane on a sliding layer: store and attend a block at a time */
        for (int64_t b = 0; b < ln->n_tokens; b += GPTOSS_SWA_ROWS) {
            struct splash_attn_lane blk = a;
            blk.pos0 = a.pos0 + b;
            blk.n_q = ln->n_tokens - b < GPTOSS_SWA_ROWS ? ln->n_tokens - b : GPTOSS_SWA_ROWS;
            blk.q += b * qd;
            blk.out += b * qd;
            blk.k += b * kvd;
            blk.v += b * kvd;
            struct splash_attn_lanes_args one = la;
            one.n_lanes = 1;
            one.lanes = &blk;
            k->attend_lanes(pool, &one);
        }
    }
    la.n_lanes = n_short;
    if (n_short)
        k->attend_lanes(pool, &la);
    k->matmul(pool, L->wo, s->att, n, s->mix);
    k->add_bias(pool, s->mix, c->n_embd, n, c->n_embd, L->bo, NULL, 0);
}

static enum splash_status logits_out(struct step *s, struct splash_err *err)
{
    struct gptoss_model *model = s->model;
    const struct gptoss_config *c = &model->cfg;
    int32_t with;
    int64_t m = step_rows_logit_rows(s->lanes, s->n_lanes, &with);
    float *tmp = NULL;
    if (m && with > 1 &&
        !(tmp = gptoss_buffer_get(model, &model->logits,
                                  (size_t)m * (size_t)c->n_vocab * sizeof *tmp)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld logit rows",
                              (long long)m);
    const struct step_rows_head h = {.k = model->k,
                                     .pool = model->opts.pool,
                                     .norm = model->output_norm,
                                     .eps = c->rms_eps,
                                     .output = model->output,
                                     .n_embd = c->n_embd,
                                     .n_vocab = c->n_vocab};
    step_rows_logits(&h, s->lanes, s->n_lanes, s->row0, s->x, s->xn, tmp);
    return SPLASH_OK;
}

static enum splash_status forward_step(struct gptoss_model *model, const struct splash_lane *lanes,
                                       int32_t n_lanes, struct splash_err *err)
{
    const struct gptoss_config *c = &model->cfg;
    int64_t E = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, pairs = c->n_rot / 2;
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        n += lanes[l].n_tokens;
    if (!n)
        return SPLASH_OK;
    /* caches first: nothing is computed unless every lane fits */
    for (int32_t l = 0; l < n_lanes; l++) {
        enum splash_status st = gptoss_seq_reserve(
            model, lanes[l].seq, (int64_t)lanes[l].pos0 + lanes[l].n_tokens, err);
        if (st)
            return st;
    }
    size_t floats =
        ((size_t)n * (size_t)(3 * E + 2 * pairs + 2 * qd + 2 * kvd) + 15) & ~(size_t)15;
    size_t per_lane = sizeof(int64_t) + sizeof(struct splash_attn_lane);
    float *arena = gptoss_buffer_get(model, &model->step_arena,
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
    step_rows_offsets(lanes, n_lanes, s.row0);
    step_rows_embed(model->k, &model->tok_embd, lanes, n_lanes, s.row0, E, s.x);
    for (int32_t l = 0; l < n_lanes; l++)
        model->k->rope_table(&c->rope, lanes[l].pos0, lanes[l].n_tokens,
                             s.cs + s.row0[l] * 2 * pairs);
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        const struct gptoss_layer *L = &model->layers[il];
        model->k->rmsnorm(model->opts.pool, s.x, E, L->attn_norm, s.xn, E, n, E, c->rms_eps);
        attn_layer(&s, L, il);
        add_into(model, s.x, s.mix, n * E);
        model->k->rmsnorm(model->opts.pool, s.x, E, L->post_norm, s.xn, E, n, E, c->rms_eps);
        enum splash_status st = gptoss_moe_forward(model, L, il, s.xn, n, s.mix, err);
        if (st)
            return st;
        add_into(model, s.x, s.mix, n * E);
    }
    enum splash_status st = logits_out(&s, err);
    if (!st)
        for (int32_t l = 0; l < n_lanes; l++)
            ((struct gptoss_seq *)lanes[l].seq)->n_tokens += lanes[l].n_tokens;
    return st;
}

enum splash_status gptoss_forward(struct gptoss_model *model, const struct splash_lane *lanes,
                                  int32_t n_lanes, struct splash_err *err)
{
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct gptoss_seq *seq = ln->seq;
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
    if (n <= GPTOSS_UBATCH)
        return forward_step(model, lanes, n_lanes, err);
    /* too many rows for one step: each lane in pieces of GPTOSS_UBATCH tokens */
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        for (int32_t off = 0; off < ln->n_tokens; off += GPTOSS_UBATCH) {
            int32_t len = ln->n_tokens - off < GPTOSS_UBATCH ? ln->n_tokens - off : GPTOSS_UBATCH;
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
