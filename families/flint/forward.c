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
    struct flint_seq ***forks;           /* NULL, or per lane its restore points being made
                                            (a slot per run, NULL where none is wanted) */
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

/* The restore points the lanes' runs ask for, made at the step's start: each shares the
 * lane's pages up to its run's end (reserved already; the step writes their rows). One
 * memory refuses is left out. slots: n_lanes pointers, then a slot per run. */
static void forks_begin(struct step *s, struct flint_seq ***slots, struct flint_seq **all)
{
    s->forks = NULL;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        const struct splash_lane_runs *ru = s->runs ? &s->runs[l] : NULL;
        slots[l] = NULL;
        if (!ru || !ru->fork)
            continue;
        slots[l] = all;
        for (int32_t r = 0; r < ru->n; r++) {
            struct splash_err ignored;
            all[r] = NULL;
            if (ru->fork[r])
                flint_seq_share(s->model, s->lanes[l].seq,
                                (int64_t)s->lanes[l].pos0 + ru->ends[r], &all[r], &ignored);
        }
        all += ru->n;
        s->forks = slots;
    }
}

/* Hands the restore points out, their sliding layers' pages before the window let go
 * (the step done), or drops them (it failed). */
static void forks_end(struct step *s, int ok)
{
    for (int32_t l = 0; s->forks && l < s->n_lanes; l++) {
        if (!s->forks[l])
            continue;
        for (int32_t r = 0; r < s->runs[l].n; r++) {
            struct flint_seq *point = s->forks[l][r];
            if (ok && point)
                flint_seq_release_swa(s->model, point);
            else
                flint_seq_destroy(s->model, point);
            s->runs[l].forks[r] = ok ? point : NULL;
        }
    }
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
    int64_t n_slots = 0; /* restore points' slots */
    for (int32_t l = 0; l < n_lanes; l++) {
        n_runs += runs && runs[l].n > 1 ? runs[l].n : 1;
        n_slots += runs && runs[l].fork ? runs[l].n : 0;
    }
    size_t tail = (size_t)n_runs * sizeof(struct splash_attn_lane) +
                  (size_t)n_lanes * (sizeof(int64_t) + sizeof(struct flint_seq **)) +
                  (size_t)n_slots * sizeof(struct flint_seq *);
    float *arena = flint_buffer_get(model, &model->step_arena, floats * sizeof(float) + tail);
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
    struct step s = {.model = model, .lanes = lanes, .runs = runs, .n_lanes = n_lanes, .n = n};
    s.attn = (struct splash_attn_lane *)(arena + floats);
    s.row0 = (int64_t *)(s.attn + n_runs);
    struct flint_seq ***fork_slots = (struct flint_seq ***)(s.row0 + n_lanes);
    forks_begin(&s, fork_slots, (struct flint_seq **)(fork_slots + n_lanes));
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
            forks_end(&s, 0);
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
    forks_end(&s, 1);
    return SPLASH_OK;
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
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct flint_seq *seq = ln->seq;
        enum splash_status st = step_rows_check_lane(ln, l, seq ? seq->n_tokens : 0,
                                                     model->max_context, model->cfg.n_vocab, err);
        if (st || (st = step_rows_check_runs(ln, runs ? &runs[l] : NULL, l, err)))
            return st;
        for (int32_t j = 0; j < l; j++)
            if (lanes[j].seq == ln->seq && ln->n_tokens && lanes[j].n_tokens)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "lanes %d and %d extend the same sequence", j, l);
        n += ln->n_tokens;
    }
    if (n <= FLINT_UBATCH)
        return forward_step(model, lanes, runs, n_lanes, taps, err);
    int64_t tap_width = taps ? (int64_t)taps->n_layers * model->cfg.n_embd : 0;
    /* too many rows for one step: each lane run by run, a run in pieces of FLINT_UBATCH
     * tokens from its start (as a call per run would cut it), its restore point after its
     * last piece */
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct splash_lane_runs *ru = runs && runs[l].n ? &runs[l] : NULL;
        for (int32_t r = 0, from = 0; r < (ru ? ru->n : 1); r++) {
            int32_t to = ru ? ru->ends[r] : ln->n_tokens;
            for (int32_t off = from; off < to; off += FLINT_UBATCH) {
                int32_t len = to - off < FLINT_UBATCH ? to - off : FLINT_UBATCH;
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
                /* this piece's rows of the lane's taps */
                float *tap_rows =
                    taps && taps->rows[l] ? taps->rows[l] + (int64_t)off * tap_width : NULL;
                const struct splash_taps sub_taps = {.size = sizeof sub_taps,
                                                     .n_layers = taps ? taps->n_layers : 0,
                                                     .layers = taps ? taps->layers : NULL,
                                                     .rows = &tap_rows};
                /* the run's restore point, if asked for, at its last piece's end */
                const uint8_t want = 1;
                struct splash_lane_runs point = {.n = 1,
                                                 .ends = &len,
                                                 .fork = &want,
                                                 .forks = ru && ru->fork ? &ru->forks[r] : NULL};
                int at_end = off + len == to && ru && ru->fork && ru->fork[r];
                enum splash_status st = forward_step(model, &sub, at_end ? &point : NULL, 1,
                                                     taps ? &sub_taps : NULL, err);
                if (st)
                    return st;
            }
            from = to;
        }
    }
    return SPLASH_OK;
}
