/* Flint's forward pass over lanes: projections run once over every lane's rows; each
 * layer's attention runs over every lane's caches in one call (attend_lanes) with the
 * layer's window (0 for a full layer) and its sinks; RoPE only where the layer has it.
 * A lane given as runs (forward_runs) attends once per run, as the call of its own each
 * run stands for, and hands out restore points at the run ends asked for: each shares the
 * lane's pages from the step's start (the step writes their rows). A draft's taps take
 * the residual stream after the layers it reads, row by row. */
#include <math.h>

#include "families/common/step_rows.h"
#include "families/flint/flint.h"

struct step {
    struct flint_model *model;
    const struct splash_lane *lanes;
    const struct splash_lane_runs *runs; /* NULL, or a lane's runs (n 0: one run) */
    struct step_rows_points points;      /* the restore points being made */
    int32_t n_lanes;
    int64_t n;
    int64_t *row0;                 /* first row of each lane */
    float *cs;                     /* (n, n_rot / 2, 2) */
    float *x, *xn, *mix;           /* (n, n_embd) */
    float *q, *k, *v, *att;        /* (n, q or kv dims) */
    struct splash_attn_lane *attn; /* one per run of every lane */
};

/* Runs of lane l in this step (1: the whole lane), and run k's end (an offset into it). */
static int32_t lane_runs(const struct step *s, int32_t l)
{
    return s->runs && s->runs[l].n > 1 ? s->runs[l].n : 1;
}

static int64_t run_end(const struct step *s, int32_t l, int32_t k)
{
    return lane_runs(s, l) == 1 ? s->lanes[l].n_tokens : s->runs[l].ends[k];
}

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
    /* store k, v; attend within the window (sliding layers) with the sinks, run by run */
    int32_t n_att = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        const struct splash_lane *ln = &s->lanes[l];
        const struct flint_seq *seq = ln->seq;
        for (int32_t r = 0; r < lane_runs(s, l); r++) {
            int64_t r0 = s->row0[l] + (r ? run_end(s, l, r - 1) : 0);
            s->attn[n_att++] = (struct splash_attn_lane){
                .kv = {.format = model->opts.kv_format,
                       .page_tokens = FLINT_PAGE_TOKENS,
                       .n_kv_heads = KV,
                       .head_dim = hd,
                       .pages = seq->pages + (size_t)il * (size_t)seq->cap_pages,
                       .n_pages = seq->cap_pages},
                .pos0 = ln->pos0 + (r0 - s->row0[l]),
                .n_q = s->row0[l] + run_end(s, l, r) - r0,
                .q = s->q + r0 * qd,
                .q_stride = qd,
                .out = s->att + r0 * qd,
                .out_stride = qd,
                .k = s->k + r0 * kvd,
                .v = s->v + r0 * kvd,
                .k_stride = kvd,
                .v_stride = kvd};
        }
    }
    struct splash_attn_lanes_args la = {.size = sizeof la,
                                        .n_lanes = n_att,
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

/* A restore point: the lane's pages up to its run's end shared at the step's start (the
 * step writes their rows); once the step is done, its sliding layers' pages before its
 * window let go. */
static void *point_share(void *model, void *seq, int64_t n_tokens)
{
    struct flint_seq *point = NULL;
    struct splash_err ignored;
    flint_seq_share(model, seq, n_tokens, &point, &ignored);
    return point;
}

static void point_keep(void *model, void *point)
{
    flint_seq_release_swa(model, point);
}

static void point_destroy(void *model, void *point)
{
    flint_seq_destroy(model, point);
}

static enum splash_status forward_step(struct flint_model *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       const struct splash_taps *taps, struct splash_err *err)
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
    int64_t n_runs = 0; /* an attention lane per run (a lane of one run: one) */
    for (int32_t l = 0; l < n_lanes; l++)
        n_runs += runs && runs[l].n > 1 ? runs[l].n : 1;
    size_t tail = (size_t)n_runs * sizeof(struct splash_attn_lane) +
                  (size_t)n_lanes * sizeof(int64_t) + step_rows_points_bytes(runs, n_lanes);
    float *arena = flint_buffer_get(model, &model->step_arena, floats * sizeof(float) + tail);
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
    struct step s = {.model = model, .lanes = lanes, .runs = runs, .n_lanes = n_lanes, .n = n};
    s.attn = (struct splash_attn_lane *)(arena + floats);
    s.row0 = (int64_t *)(s.attn + n_runs);
    s.points = (struct step_rows_points){.model = model,
                                         .share = point_share,
                                         .destroy = point_destroy,
                                         .keep = point_keep};
    step_rows_points_begin(&s.points, lanes, runs, n_lanes, s.row0 + n_lanes);
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
        if (st) {
            step_rows_points_end(&s.points, runs, n_lanes, 0);
            return st;
        }
        step_rows_add(model->host, model->opts.pool, s.x, s.mix, n * E);
        if (taps)
            step_rows_write_taps(taps, lanes, n_lanes, s.row0, s.x, E, il);
    }
    /* xn is free by now and holds the m <= n rows asked for */
    step_rows_logits(&model->head, lanes, n_lanes, s.row0, s.x, s.xn, logit_rows);
    for (int32_t l = 0; l < n_lanes; l++) {
        ((struct flint_seq *)lanes[l].seq)->n_tokens += lanes[l].n_tokens;
        flint_seq_release_swa(model, lanes[l].seq);
    }
    step_rows_points_end(&s.points, runs, n_lanes, 1);
    return SPLASH_OK;
}

static enum splash_status step_of(void *model, const struct splash_lane *lanes,
                                  const struct splash_lane_runs *runs, int32_t n_lanes,
                                  const struct splash_taps *taps, struct splash_err *err)
{
    return forward_step(model, lanes, runs, n_lanes, taps, err);
}

static int64_t seq_tokens(const void *seq)
{
    return ((const struct flint_seq *)seq)->n_tokens;
}

enum splash_status flint_forward(struct flint_model *model, const struct splash_lane *lanes,
                                 const struct splash_lane_runs *runs, int32_t n_lanes,
                                 const struct splash_taps *taps, struct splash_err *err)
{
    if (taps) {
        enum splash_status st = step_rows_check_taps(taps, model->cfg.n_layers, err);
        if (st)
            return st;
    }
    int64_t n;
    enum splash_status st = step_rows_check_lanes(lanes, runs, n_lanes, seq_tokens,
                                                  model->max_context, model->cfg.n_vocab, &n, err);
    if (st)
        return st;
    if (n <= FLINT_UBATCH)
        return forward_step(model, lanes, runs, n_lanes, taps, err);
    /* too many rows for one step: each lane run by run, in pieces of FLINT_UBATCH */
    return step_rows_pieces(model, step_of, lanes, runs, n_lanes, taps, FLINT_UBATCH,
                            model->cfg.n_vocab, model->cfg.n_embd, err);
}
