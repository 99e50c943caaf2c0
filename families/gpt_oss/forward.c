/* gpt-oss's forward pass over lanes: projections run once over every lane's rows;
 * attention runs per lane on its caches (a batched decode step's lanes in one section),
 * a sliding layer's long lanes in blocks of GPTOSS_SWA_ROWS rows so its ring holds what
 * each block reads. A lane given as runs (forward_runs) attends once per run, as the call
 * of its own each run stands for, and hands out restore points at the run ends asked for:
 * the full layers' pages shared from the step's start (the step writes their rows), each
 * sliding layer's ring copied as that layer passes the run's end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/step_rows.h"
#include "families/gpt_oss/gpt_oss.h"

#define GPTOSS_UBATCH 512 /* rows per step; longer inputs are split per lane */

struct step {
    struct gptoss_model *model;
    const struct splash_lane *lanes;
    const struct splash_lane_runs *runs; /* NULL, or a lane's runs (n 0: one run) */
    struct step_rows_points points;      /* the restore points being made */
    int32_t n_lanes;
    int64_t n;
    int64_t *row0;                  /* first row of each lane */
    float *cs;                      /* (n, n_rot / 2, 2) */
    float *x, *xn, *mix;            /* (n, n_embd) */
    float *q, *k, *v, *att;         /* (n, q or kv dims) */
    struct splash_attn_lane *attn;  /* one per run of every lane */
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

/* Runs of lane l in this step (1: the whole lane), and run k's end (an offset into it). */
static int32_t lane_runs(const struct step *s, int32_t l)
{
    return s->runs && s->runs[l].n > 1 ? s->runs[l].n : 1;
}

static int64_t run_end(const struct step *s, int32_t l, int32_t k)
{
    return lane_runs(s, l) == 1 ? s->lanes[l].n_tokens : s->runs[l].ends[k];
}

/* Rows [from, to) of lane l as an attention lane of layer L: stored, then attended. */
static struct splash_attn_lane lane_rows(const struct step *s, const struct gptoss_layer *L,
                                         int32_t l, int swa, int64_t from, int64_t to)
{
    const struct gptoss_config *c = &s->model->cfg;
    int64_t qd = (int64_t)c->n_head * c->head_dim, kvd = (int64_t)c->n_head_kv * c->head_dim;
    const struct splash_lane *ln = &s->lanes[l];
    int64_t r0 = s->row0[l] + from;
    return (struct splash_attn_lane){.kv = lane_kv(s->model, ln->seq, L, swa),
                                     .pos0 = ln->pos0 + from,
                                     .n_q = to - from,
                                     .q = s->q + r0 * qd,
                                     .q_stride = qd,
                                     .out = s->att + r0 * qd,
                                     .out_stride = qd,
                                     .k = s->k + r0 * kvd,
                                     .v = s->v + r0 * kvd,
                                     .k_stride = kvd,
                                     .v_stride = kvd};
}

/* The restore point at run r of lane l, if one is being made, takes sliding layer L's ring
 * now that the layer has stored the run's rows. */
static void keep_ring(const struct step *s, int32_t l, int32_t r, const struct gptoss_layer *L)
{
    void ***forks = s->points.forks;
    if (forks && forks[l] && forks[l][r])
        gptoss_seq_copy_ring(s->model, s->lanes[l].seq, L->slot, forks[l][r]);
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
        /* a long lane on a sliding layer stores and attends a block at a time, run by run */
        int blocks = swa && ln->n_tokens > GPTOSS_SWA_ROWS;
        for (int32_t r = 0; r < lane_runs(s, l); r++) {
            int64_t from = r ? run_end(s, l, r - 1) : 0, to = run_end(s, l, r);
            if (!blocks) {
                s->attn[n_short++] = lane_rows(s, L, l, swa, from, to);
                continue;
            }
            for (int64_t b = from; b < to; b += GPTOSS_SWA_ROWS) {
                struct splash_attn_lane blk = lane_rows(
                    s, L, l, swa, b, to - b < GPTOSS_SWA_ROWS ? to : b + GPTOSS_SWA_ROWS);
                struct splash_attn_lanes_args one = la;
                one.n_lanes = 1;
                one.lanes = &blk;
                k->attend_lanes(pool, &one);
            }
            keep_ring(s, l, r, L);
        }
    }
    la.n_lanes = n_short;
    if (n_short)
        k->attend_lanes(pool, &la);
    /* the short lanes' rings hold the window before each run end and all their rows */
    for (int32_t l = 0; swa && l < s->n_lanes; l++)
        if (s->lanes[l].n_tokens <= GPTOSS_SWA_ROWS)
            for (int32_t r = 0; r < lane_runs(s, l); r++)
                keep_ring(s, l, r, L);
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

/* A restore point: the full layers' pages up to its run's end shared at the step's start
 * (reserved already; the step writes their rows); each sliding ring is copied as its
 * layer passes the run's end (keep_ring). */
static void *point_share(void *model, void *seq, int64_t n_tokens)
{
    struct gptoss_seq *point = NULL;
    struct splash_err ignored;
    gptoss_seq_share(model, seq, n_tokens, &point, &ignored);
    return point;
}

static void point_destroy(void *model, void *point)
{
    gptoss_seq_destroy(model, point);
}

static enum splash_status forward_step(struct gptoss_model *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       struct splash_err *err)
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
    int64_t n_runs = 0; /* an attention lane per run (a lane of one run: one) */
    for (int32_t l = 0; l < n_lanes; l++)
        n_runs += runs && runs[l].n > 1 ? runs[l].n : 1;
    size_t tail = (size_t)n_runs * sizeof(struct splash_attn_lane) +
                  (size_t)n_lanes * sizeof(int64_t) + step_rows_points_bytes(runs, n_lanes);
    float *arena = gptoss_buffer_get(model, &model->step_arena, floats * sizeof(float) + tail);
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
    struct step s = {.model = model, .lanes = lanes, .runs = runs, .n_lanes = n_lanes, .n = n};
    s.attn = (struct splash_attn_lane *)(arena + floats);
    s.row0 = (int64_t *)(s.attn + n_runs);
    s.points = (struct step_rows_points){
        .model = model, .share = point_share, .destroy = point_destroy};
    step_rows_points_begin(&s.points, lanes, runs, n_lanes, s.row0 + n_lanes);
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
        if (st) {
            step_rows_points_end(&s.points, runs, n_lanes, 0);
            return st;
        }
        add_into(model, s.x, s.mix, n * E);
    }
    enum splash_status st = logits_out(&s, err);
    if (!st)
        for (int32_t l = 0; l < n_lanes; l++)
            ((struct gptoss_seq *)lanes[l].seq)->n_tokens += lanes[l].n_tokens;
    step_rows_points_end(&s.points, runs, n_lanes, st == SPLASH_OK);
    return st;
}

static enum splash_status step_of(void *model, const struct splash_lane *lanes,
                                  const struct splash_lane_runs *runs, int32_t n_lanes,
                                  const struct splash_taps *taps, struct splash_err *err)
{
    (void)taps; /* gpt_oss gives no taps: its pieces are asked for none */
    return forward_step(model, lanes, runs, n_lanes, err);
}

static int64_t seq_tokens(const void *seq)
{
    return ((const struct gptoss_seq *)seq)->n_tokens;
}

enum splash_status gptoss_forward(struct gptoss_model *model, const struct splash_lane *lanes,
                                  const struct splash_lane_runs *runs, int32_t n_lanes,
                                  struct splash_err *err)
{
    int64_t n;
    enum splash_status st = step_rows_check_lanes(lanes, runs, n_lanes, seq_tokens,
                                                  model->max_context, model->cfg.n_vocab, &n, err);
    if (st)
        return st;
    if (n <= GPTOSS_UBATCH)
        return forward_step(model, lanes, runs, n_lanes, err);
    /* too many rows for one step: each lane run by run, in pieces of GPTOSS_UBATCH */
    return step_rows_pieces(model, step_of, lanes, runs, n_lanes, NULL, GPTOSS_UBATCH,
                            model->cfg.n_vocab, model->cfg.n_embd, err);
}
