/* The hybrid trunk's forward pass over lanes: every projection runs once over
 * the rows of all lanes; the token mixers (conv + delta rule, attention over the
 * KV pages) run per lane on its own caches, short lanes' in one parallel section.
 * A lane given as runs (forward_runs) runs its mixers once per run, as the call of its
 * own each run stands for, and hands out forks of its caches at the run ends asked for:
 * the conv and delta-rule states copied as each GDN layer passes the run's end, the KV
 * pages shared from the step's start (the step writes their rows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/hybrid.h"
#include "families/common/step_rows.h"

#define HYBRID_UBATCH 512   /* rows per step; longer inputs are split per lane */
#define HYBRID_CHUNK_MIN 16 /* a lane of at least this many tokens runs the chunked delta rule */

struct step {
    struct hybrid_model *model;
    const struct splash_lane *lanes;
    const struct splash_lane_runs *runs; /* NULL, or a lane's runs (n 0: one run) */
    struct hybrid_seq ***forks;          /* NULL, or per lane the restore points being made
                                            (a slot per run, NULL where none is wanted) */
    int32_t n_lanes;
    int64_t n;     /* rows */
    int64_t *row0; /* first row of each lane */
    float *cs;     /* (n, n_rot / 2, 2) rotary cosines and sines */
    /* activations */
    float *x, *xn, *mix; /* (n, n_embd) */
    float *scratch;      /* mixer and FFN scratch */
    /* per-lane kernel arguments (n_lanes each) */
    struct splash_conv_lane *conv_lanes;
    struct splash_gdn_args *gdn_args;
    struct splash_attn_lane *attn_lanes;
};

/* ---- element-wise helpers ------------------------------------------------------- */

struct gate_task {
    const struct hybrid_act *act;
    float *x;
    const float *g;
    int64_t width, x_stride, g_stride;
};

static void silu_gate_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct gate_task *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *x = t->x + r * t->x_stride;
        t->act->silu_mul(t->width, x, t->g + r * t->g_stride, x);
    }
}

/* Rows per piece of an element-wise section: at least HYBRID_SECTION_MIN_VALUES values, so
 * a verify pass's or a small batch's rows run on the calling thread rather than pay a
 * hand-off for a few microseconds of work (a prompt chunk's rows are still split). */
static int64_t grain_rows(int64_t width)
{
    int64_t g = HYBRID_SECTION_MIN_VALUES / (width > 0 ? width : 1);
    return g < 1 ? 1 : g;
}

static void add_into(struct hybrid_model *model, float *x, const float *y, int64_t n)
{
    step_rows_add(model->host, model->opts.pool, x, y, n);
}

/* ---- runs ------------------------------------------------------------------------ */

/* Runs of lane l in this step (1: the whole lane). */
static int32_t lane_runs(const struct step *s, int32_t l)
{
    return s->runs && s->runs[l].n > 1 ? s->runs[l].n : 1;
}

/* The end of run k of lane l, an offset into the lane. */
static int32_t run_end(const struct step *s, int32_t l, int32_t k)
{
    return lane_runs(s, l) == 1 ? s->lanes[l].n_tokens : s->runs[l].ends[k];
}

/* ---- Gated DeltaNet layer --------------------------------------------------------- */

struct decay_task {
    const struct hybrid_layer *L;
    float *a, *b; /* in: alpha, beta projections; out: log decay g, beta */
    int32_t nv;
};

static void decay_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct decay_task *t = ctx;
    for (int64_t i = begin; i < end; i++) {
        int32_t h = (int32_t)(i % t->nv);
        float x = t->a[i] + t->L->dt_bias[h];
        float softplus = x > 20.0f ? x : log1pf(expf(x));
        t->a[i] = t->L->ssm_a[h] * softplus;
        t->b[i] = 1.0f / (1.0f + expf(-t->b[i]));
    }
}

static void gdn_layer(struct step *s, const struct hybrid_layer *L)
{
    struct hybrid_model *model = s->model;
    const struct splash_kernels *k = model->k;
    const struct splash_ssm_kernels *ssm = model->ssm;
    const struct hybrid_config *c = &model->cfg;
    struct splash_pool *pool = model->opts.pool;
    int64_t n = s->n, cd = c->conv_dim, inner = (int64_t)c->n_v_heads * c->d_v;
    int32_t nv = c->n_v_heads, nk = c->n_k_heads, dk = c->d_k, dv = c->d_v;

    float *qkv = s->scratch;    /* (n, conv_dim)  */
    float *conv = qkv + n * cd; /* (n, conv_dim)  */
    float *z = conv + n * cd;   /* (n, inner)     */
    float *o = z + n * inner;   /* (n, inner)     */
    float *ga = o + n * inner;  /* (n, nv)        */
    float *be = ga + n * nv;    /* (n, nv)        */

    /* q, k, v, z, beta, alpha projections */
    const struct splash_weight *w[4] = {L->qkv, L->z, L->alpha, L->beta};
    float *y[4] = {qkv, z, ga, be};
    hybrid_matmuls(s->model, w, 4, s->xn, n, y);
    /* causal conv + SiLU, per lane on its rolling state; a lane of several runs one run
     * at a time, so a restore point at a run's end gets the state there */
    int32_t n_conv = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        struct hybrid_seq *seq = s->lanes[l].seq;
        float *state = (float *)((char *)seq->conv_state + (size_t)L->slot * model->conv_state_bytes);
        int32_t n_runs = lane_runs(s, l);
        if (seq->rewind && seq->rewind->armed) /* a verify lane is one run */
            hybrid_rewind_save_conv(model, seq, L->slot, qkv + s->row0[l] * cd,
                                    s->lanes[l].n_tokens);
        for (int32_t k = 0, a0 = 0; k < n_runs; k++) {
            int32_t a1 = run_end(s, l, k);
            int64_t r0 = s->row0[l] + a0;
            struct splash_conv_lane cl = {
                .x = qkv + r0 * cd, .n = a1 - a0, .state = state, .out = conv + r0 * cd};
            if (n_runs == 1) {
                s->conv_lanes[n_conv++] = cl;
                break;
            }
            ssm->conv_lanes(pool, &cl, 1, cd, cd, L->conv_w, c->conv_kernel);
            struct hybrid_seq *point = s->forks && s->forks[l] ? s->forks[l][k] : NULL;
            if (point)
                memcpy((char *)point->conv_state + (size_t)L->slot * model->conv_state_bytes,
                       state, model->conv_state_bytes);
            a0 = a1;
        }
    }
    ssm->conv_lanes(pool, s->conv_lanes, n_conv, cd, cd, L->conv_w, c->conv_kernel);
    /* g = -exp(A_log) softplus(alpha + dt_bias), beta = sigmoid(b) */
    struct decay_task dt = {.L = L, .a = ga, .b = be, .nv = nv};
    hybrid_parallel(model, n * nv, 4096, decay_range, &dt);
    /* L2-normalised q (scaled by 1/sqrt(d_k)) and k: a few tokens as one call per token
     * (its heads are adjacent rows), longer batches one call per head over the tokens */
    if (n <= 4) {
        for (int64_t t = 0; t < n; t++) {
            float *q = conv + t * cd;
            k->l2norm(pool, q, dk, nk, dk, c->rms_eps, 1.0f / sqrtf((float)dk));
            k->l2norm(pool, q + (int64_t)nk * dk, dk, nk, dk, c->rms_eps, 1.0f);
        }
    } else {
        for (int32_t m = 0; m < nk; m++) {
            k->l2norm(pool, conv + (int64_t)m * dk, cd, n, dk, c->rms_eps,
                      1.0f / sqrtf((float)dk));
            k->l2norm(pool, conv + (int64_t)(nk + m) * dk, cd, n, dk, c->rms_eps, 1.0f);
        }
    }
    /* the delta rule, per lane on its state: long inputs chunked, the rest (a batched
     * decode step's lanes) token by token in one section */
    int32_t n_rec = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        struct hybrid_seq *seq = s->lanes[l].seq;
        int64_t r0 = s->row0[l];
        int32_t n_runs = lane_runs(s, l);
        struct splash_gdn_args a = {.n_tokens = s->lanes[l].n_tokens,
                                    .n_k_heads = nk,
                                    .n_v_heads = nv,
                                    .d_k = dk,
                                    .d_v = dv,
                                    .grouped = c->gdn_grouped,
                                    .chunk = 64,
                                    .q = conv + r0 * cd,
                                    .k = conv + r0 * cd + (int64_t)nk * dk,
                                    .qk_stride = cd,
                                    .v = conv + r0 * cd + 2 * (int64_t)nk * dk,
                                    .v_stride = cd,
                                    .g = ga + r0 * nv,
                                    .beta = be + r0 * nv,
                                    .state = (char *)seq->gdn_state +
                                             (size_t)L->slot * model->gdn_state_bytes,
                                    .state_bf16 = model->opts.state_format == SPLASH_STATE_BF16,
                                    .out = o + r0 * inner,
                                    .out_stride = inner};
        if (seq->rewind && seq->rewind->armed)
            hybrid_rewind_save_rule(model, seq, L->slot, conv + r0 * cd, ga + r0 * nv,
                                    be + r0 * nv, a.n_tokens);
        if (n_runs == 1) {
            if (a.n_tokens >= HYBRID_CHUNK_MIN)
                ssm->chunked(pool, &a);
            else
                s->gdn_args[n_rec++] = a;
            continue;
        }
        /* several runs: each as the call of its own it stands for, in turn */
        for (int32_t k = 0, a0 = 0; k < n_runs; k++) {
            int32_t a1 = run_end(s, l, k);
            struct splash_gdn_args ra = a;
            ra.n_tokens = a1 - a0;
            ra.q += (int64_t)a0 * cd;
            ra.k += (int64_t)a0 * cd;
            ra.v += (int64_t)a0 * cd;
            ra.g += (int64_t)a0 * nv;
            ra.beta += (int64_t)a0 * nv;
            ra.out += (int64_t)a0 * inner;
            if (ra.n_tokens >= HYBRID_CHUNK_MIN)
                ssm->chunked(pool, &ra);
            else
                ssm->recurrent_lanes(pool, &ra, 1);
            struct hybrid_seq *point = s->forks && s->forks[l] ? s->forks[l][k] : NULL;
            if (point)
                memcpy((char *)point->gdn_state + (size_t)L->slot * model->gdn_state_bytes,
                       a.state, model->gdn_state_bytes);
            a0 = a1;
        }
    }
    ssm->recurrent_lanes(pool, s->gdn_args, n_rec);
    /* gated RMSNorm: norm(o) * silu(z) */
    k->rmsnorm(pool, o, dv, L->ssm_norm, o, dv, n * nv, dv, c->rms_eps);
    struct gate_task gt = {
        .act = model->act, .x = o, .g = z, .width = inner, .x_stride = inner, .g_stride = inner};
    hybrid_parallel(model, n, grain_rows(inner), silu_gate_range, &gt);
    /* output projection */
    k->matmul(pool, L->ssm_out, o, n, s->mix);
}

static int64_t gdn_scratch_per_row(const struct hybrid_config *c)
{
    return 2 * c->conv_dim + 2 * (int64_t)c->n_v_heads * c->d_v + 2 * c->n_v_heads;
}

/* ---- gated attention layer ----------------------------------------------------------- */

struct split_task {
    const float *qg;
    float *q;
    int32_t n_head, hd;
};

static void split_q_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct split_task *t = ctx;
    for (int64_t r = begin; r < end; r++)
        for (int32_t h = 0; h < t->n_head; h++)
            memcpy(t->q + (r * t->n_head + h) * t->hd, t->qg + (r * t->n_head + h) * 2 * t->hd,
                   (size_t)t->hd * sizeof(float));
}

/* Pages for the sequence to hold n_tokens, and the page it appends into its own
 * (a page shared with a cached prefix is copied before anything is written to it). */
static enum splash_status reserve_pages(struct hybrid_model *model, struct hybrid_seq *seq,
                                        int64_t n_tokens, struct splash_err *err)
{
    int64_t need = (n_tokens + model->page_tokens - 1) / model->page_tokens;
    int32_t n_attn = model->cfg.n_attn;
    if (n_attn == 0)
        return SPLASH_OK;
    enum splash_status st;
    if (seq->n_tokens % model->page_tokens &&
        (st = hybrid_page_own(model, seq, seq->n_tokens / model->page_tokens, err)))
        return st;
    if (need <= seq->n_pages)
        return SPLASH_OK;
    if ((st = hybrid_seq_pages_grow(model, seq, need, err)))
        return st;
    for (int64_t p = seq->n_pages; p < need; p++) {
        if ((st = hybrid_page_add(model, seq, p, err)))
            return st;
        seq->n_pages = p + 1;
    }
    return SPLASH_OK;
}

struct head_gate_task {
    const struct hybrid_act *act;
    float *att;      /* (n, n_head * hd) */
    const float *qg; /* (n, n_head * 2 hd): per head, query then gate */
    int32_t n_head, hd;
};

static void head_gate_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct head_gate_task *t = ctx;
    int64_t qd = (int64_t)t->n_head * t->hd;
    for (int64_t r = begin; r < end; r++)
        for (int32_t h = 0; h < t->n_head; h++) {
            float *x = t->att + r * qd + (int64_t)h * t->hd;
            t->act->sigmoid_mul(t->hd, x, t->qg + r * 2 * qd + (int64_t)(2 * h + 1) * t->hd, x);
        }
}

static void attn_layer(struct step *s, const struct hybrid_layer *L)
{
    struct hybrid_model *model = s->model;
    const struct splash_kernels *k = model->k;
    const struct hybrid_config *c = &model->cfg;
    struct splash_pool *pool = model->opts.pool;
    int64_t n = s->n;
    int32_t H = c->n_head, KV = c->n_head_kv, hd = c->head_dim;
    int64_t qd = (int64_t)H * hd, kvd = (int64_t)KV * hd;

    float *qg = s->scratch;      /* (n, 2 * qd): per head, query then gate */
    float *kk = qg + n * 2 * qd; /* (n, kvd) */
    float *vv = kk + n * kvd;    /* (n, kvd) */
    float *q = vv + n * kvd;     /* (n, qd)  */
    float *att = q + n * qd;     /* (n, qd)  */

    /* projections */
    const struct splash_weight *w[3] = {L->wq, L->wk, L->wv};
    float *y[3] = {qg, kk, vv};
    hybrid_matmuls(s->model, w, 3, s->xn, n, y);
    /* q and k RMSNorm per head */
    k->rmsnorm(pool, qg, 2 * hd, L->q_norm, qg, 2 * hd, n * H, hd, c->rms_eps);
    k->rmsnorm(pool, kk, hd, L->k_norm, kk, hd, n * KV, hd, c->rms_eps);
    /* rotary on the leading n_rot dims */
    if (c->n_rot > 0) {
        k->rope(pool, qg, 2 * qd, 2 * hd, n, H, c->n_rot / 2, s->cs);
        k->rope(pool, kk, kvd, hd, n, KV, c->n_rot / 2, s->cs);
    }
    struct split_task sp = {.qg = qg, .q = q, .n_head = H, .hd = hd};
    hybrid_parallel(model, n, grain_rows(qd), split_q_range, &sp);
    /* KV pages and causal attention, per lane on its pages: a batched decode step's lanes
     * in one section. A lane of several runs attends as one lane per run, so each run's
     * rows take the form (rows or blocks) and blocks a call of its own would */
    int32_t n_attn = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        struct hybrid_seq *seq = s->lanes[l].seq;
        for (int32_t k = 0, a0 = 0; k < lane_runs(s, l); k++) {
            int32_t a1 = run_end(s, l, k);
            int64_t r0 = s->row0[l] + a0;
            s->attn_lanes[n_attn++] = (struct splash_attn_lane){
                .kv = {.format = model->opts.kv_format,
                       .page_tokens = model->page_tokens,
                       .n_kv_heads = KV,
                       .head_dim = hd,
                       .pages = seq->pages + (size_t)L->slot * seq->cap_pages,
                       .n_pages = seq->n_pages},
                .pos0 = s->lanes[l].pos0 + a0,
                .n_q = a1 - a0,
                .q = q + r0 * qd,
                .q_stride = qd,
                .out = att + r0 * qd,
                .out_stride = qd,
                .k = kk + r0 * kvd,
                .v = vv + r0 * kvd,
                .k_stride = kvd,
                .v_stride = kvd};
            a0 = a1;
        }
    }
    float scale = 1.0f / sqrtf((float)hd);
    const struct splash_attn_lanes_args la = {.size = sizeof la,
                                              .n_lanes = n_attn,
                                              .lanes = s->attn_lanes,
                                              .lane_size = sizeof *s->attn_lanes,
                                              .n_head = H,
                                              .scale = scale};
    k->attend_lanes(pool, &la);
    /* output gate: att * sigmoid(gate), gate head h at qg + h * 2 hd + hd */
    struct head_gate_task gt = {.act = model->act, .att = att, .qg = qg, .n_head = H, .hd = hd};
    hybrid_parallel(model, n, grain_rows(qd), head_gate_range, &gt);
    /* output projection */
    k->matmul(pool, L->wo, att, n, s->mix);
}

static int64_t attn_scratch_per_row(const struct hybrid_config *c)
{
    int64_t qd = (int64_t)c->n_head * c->head_dim, kvd = (int64_t)c->n_head_kv * c->head_dim;
    return 4 * qd + 2 * kvd;
}

/* ---- one step over <= ubatch rows ------------------------------------------------------- */

static void rope_cs(struct step *s)
{
    struct hybrid_model *model = s->model;
    int32_t pairs = model->cfg.n_rot / 2;
    for (int32_t l = 0; l < s->n_lanes; l++)
        for (int32_t i = 0; i < s->lanes[l].n_tokens; i++) {
            double pos = (double)s->lanes[l].pos0 + i;
            float *cs = s->cs + (s->row0[l] + i) * pairs * 2;
            for (int32_t p = 0; p < pairs; p++) {
                double th = model->rope_on[p] ? pos * model->rope_freq[p] : 0.0;
                cs[2 * p] = (float)cos(th) * model->yarn_mscale;
                cs[2 * p + 1] = (float)sin(th) * model->yarn_mscale;
            }
        }
}

static enum splash_status logits_out(struct step *s, struct splash_err *err)
{
    struct hybrid_model *model = s->model;
    const struct hybrid_config *c = &model->cfg;
    int32_t with;
    int64_t m = step_rows_logit_rows(s->lanes, s->n_lanes, &with);
    float *tmp = NULL;
    if (m && with > 1 &&
        !(tmp = hybrid_buffer_get(model, &model->logits,
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

/* Restore points of this step: a fork of each lane's sequence at every run end asked
 * for but its last, sharing the pages reserve_pages made (the step writes their rows)
 * and given each GDN layer's state as the layer passes the run's end. */
static void forks_begin(struct step *s, struct hybrid_seq ***slots, struct hybrid_seq **all)
{
    int any = 0;
    for (int32_t l = 0; l < s->n_lanes; l++) {
        slots[l] = NULL;
        const struct splash_lane_runs *ru = s->runs ? &s->runs[l] : NULL;
        if (!ru || !ru->fork || lane_runs(s, l) < 2)
            continue;
        slots[l] = all;
        struct hybrid_seq *seq = s->lanes[l].seq;
        for (int32_t k = 0; k < ru->n; k++) {
            all[k] = NULL;
            if (!ru->fork[k] || k == ru->n - 1)
                continue;
            struct splash_err err;
            if (hybrid_seq_fork_pages(s->model, seq, s->lanes[l].pos0 + ru->ends[k], &all[k],
                                      &err) == SPLASH_OK)
                any = 1;
        }
        all += ru->n;
    }
    s->forks = any ? slots : NULL;
}

/* Hands the forks out (ok) or drops them; the last run's are taken after the step. */
static void forks_end(struct step *s, struct hybrid_seq ***slots, int ok)
{
    for (int32_t l = 0; l < s->n_lanes; l++) {
        const struct splash_lane_runs *ru = s->runs ? &s->runs[l] : NULL;
        if (!ru || !ru->fork)
            continue;
        for (int32_t k = 0; k < ru->n; k++) {
            struct hybrid_seq *point = slots[l] && k < ru->n - 1 ? slots[l][k] : NULL;
            if (!ok) {
                if (point)
                    hybrid_seq_destroy(s->model, point);
                ru->forks[k] = NULL;
                continue;
            }
            if (k == ru->n - 1 && ru->fork[k]) {
                struct splash_err err;
                if (hybrid_seq_fork(s->model, s->lanes[l].seq,
                                    s->lanes[l].pos0 + s->lanes[l].n_tokens, &point,
                                    &err) != SPLASH_OK)
                    point = NULL;
            }
            ru->forks[k] = point;
        }
    }
}

static enum splash_status forward_step(struct hybrid_model *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       const struct splash_taps *taps,
                                       struct splash_err *err)
{
    const struct hybrid_config *c = &model->cfg;
    int64_t E = c->n_embd;
    int64_t n = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        n += lanes[l].n_tokens;
    if (!n)
        return SPLASH_OK;
    /* caches first: nothing is computed unless every lane fits */
    for (int32_t l = 0; l < n_lanes; l++) {
        enum splash_status st =
            reserve_pages(model, lanes[l].seq, (int64_t)lanes[l].pos0 + lanes[l].n_tokens, err);
        if (st)
            return st;
    }
    int64_t per_row = gdn_scratch_per_row(c);
    if (attn_scratch_per_row(c) > per_row)
        per_row = attn_scratch_per_row(c);
    if (model->ffn->scratch_per_row(c) > per_row)
        per_row = model->ffn->scratch_per_row(c);
    int64_t pairs = c->n_rot / 2;
    int64_t n_runs = 0;
    for (int32_t l = 0; runs && l < n_lanes; l++)
        n_runs += runs[l].n;
    /* the lanes' first rows after the step's floats, 64-byte aligned */
    size_t floats = ((size_t)n * (size_t)(3 * E + per_row + 2 * pairs) + 15) & ~(size_t)15;
    size_t per_lane = sizeof(int64_t) + sizeof(struct splash_gdn_args) +
                      sizeof(struct splash_conv_lane) + sizeof(struct splash_attn_lane) +
                      sizeof(struct hybrid_seq **);
    float *arena = hybrid_buffer_get(model, &model->step_arena,
                                     floats * sizeof(float) + (size_t)n_lanes * per_lane +
                                         (size_t)n_runs * (sizeof(struct hybrid_seq *) +
                                                           sizeof(struct splash_attn_lane)));
    int64_t *row0 = arena ? (int64_t *)(arena + floats) : NULL;
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %lld rows", (long long)n);
    struct step s = {
        .model = model, .lanes = lanes, .runs = runs, .n_lanes = n_lanes, .n = n, .row0 = row0};
    s.gdn_args = (struct splash_gdn_args *)(row0 + n_lanes);
    s.conv_lanes = (struct splash_conv_lane *)(s.gdn_args + n_lanes);
    s.attn_lanes = (struct splash_attn_lane *)(s.conv_lanes + n_lanes);
    /* an attention lane per run (a lane of one run: one) */
    struct hybrid_seq ***fork_slots = (struct hybrid_seq ***)(s.attn_lanes + n_lanes + n_runs);
    forks_begin(&s, fork_slots, (struct hybrid_seq **)(fork_slots + n_lanes));
    s.x = arena;
    s.xn = s.x + n * E;
    s.mix = s.xn + n * E;
    s.cs = s.mix + n * E;
    s.scratch = s.cs + n * 2 * pairs;
    for (int32_t l = 0; l < n_lanes; l++) {
        struct hybrid_seq *seq = lanes[l].seq;
        if (seq->rewind && seq->rewind->armed && model->n_gdn > 0)
            hybrid_rewind_save_states(model, seq);
    }
    step_rows_offsets(lanes, n_lanes, row0);
    step_rows_embed(model->k, &model->tok_embd, lanes, n_lanes, row0, E, s.x);
    rope_cs(&s);
    for (int64_t il = 0; il < c->n_layers; il++) {
        const struct hybrid_layer *L = &model->layers[il];
        /* pre-norm, token mixer, residual */
        model->k->rmsnorm(model->opts.pool, s.x, E, L->attn_norm, s.xn, E, n, E, c->rms_eps);
        if (L->is_attn)
            attn_layer(&s, L);
        else
            gdn_layer(&s, L);
        add_into(model, s.x, s.mix, n * E);
        /* post-attention norm, FFN, residual */
        model->k->rmsnorm(model->opts.pool, s.x, E, L->post_norm, s.xn, E, n, E, c->rms_eps);
        model->ffn_status = SPLASH_OK;
        model->ffn->forward(model, L->ffn, s.xn, n, s.mix, s.scratch);
        if (model->ffn_status)
            break;
        add_into(model, s.x, s.mix, n * E);
        if (taps)
            step_rows_write_taps(taps, lanes, n_lanes, s.row0, s.x, E, il);
    }
    enum splash_status st = model->ffn_status;
    if (st) {
        if (err)
            *err = model->ffn_err;
        model->ffn_status = SPLASH_OK;
    } else {
        st = logits_out(&s, err);
    }
    for (int32_t l = 0; l < n_lanes; l++) {
        struct hybrid_seq *seq = lanes[l].seq;
        hybrid_rewind_done(seq, lanes[l].pos0, lanes[l].n_tokens, !st);
        if (!st)
            seq->n_tokens += lanes[l].n_tokens;
    }
    forks_end(&s, fork_slots, st == SPLASH_OK);
    return st;
}

/* The furthest place from off, at most limit, where a step may end and the next start
 * without moving the recurrence's chunks: a run's end, or a whole chunk into a run. */
static int32_t piece_end(const struct splash_lane_runs *ru, int32_t n_tokens, int32_t off,
                         int32_t limit)
{
    if (limit >= n_tokens)
        return n_tokens;
    int32_t best = off, start = 0;
    for (int32_t k = 0; k < (ru && ru->n ? ru->n : 1); k++) {
        int32_t end = ru && ru->n ? ru->ends[k] : n_tokens;
        if (end <= limit) {
            best = end;
        } else {
            int32_t whole = start + (limit - start) / 64 * 64;
            if (whole > best)
                best = whole;
            break;
        }
        start = end;
    }
    return best > off ? best : (off + 64 < n_tokens ? off + 64 : n_tokens);
}

/* Every entry point: lanes, each optionally as runs (restore points inside a prompt chunk)
 * and with the draft's taps of every row. */
static enum splash_status forward_all(struct hybrid_model *model, const struct splash_lane *lanes,
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
        const struct hybrid_seq *seq = ln->seq;
        enum splash_status st = step_rows_check_lane(ln, l, seq ? seq->n_tokens : 0,
                                                     model->max_context, model->cfg.n_vocab, err);
        if (st)
            return st;
        if (seq->rewind && seq->rewind->armed && ln->n_tokens > seq->rewind->armed)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "lane %d: %d tokens, the verify save was armed for %d", l,
                                  ln->n_tokens, seq->rewind->armed);
        if ((st = step_rows_check_runs(ln, runs ? &runs[l] : NULL, l, err)))
            return st;
        n += ln->n_tokens;
    }
    const int32_t ubatch = model->ubatch > 0 ? model->ubatch : HYBRID_UBATCH;
    if (n <= ubatch)
        return forward_step(model, lanes, runs, n_lanes, taps, err);
    int64_t tap_width = taps ? (int64_t)taps->n_layers * model->cfg.n_embd : 0;
    /* too many rows for one step: each lane in pieces of at most ubatch tokens,
     * cut where its runs allow */
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        const struct splash_lane_runs *ru = runs && runs[l].n ? &runs[l] : NULL;
        int32_t *ends = ru ? malloc((size_t)ru->n * sizeof *ends) : NULL;
        if (ru && !ends)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %d runs", ru->n);
        int32_t k0 = 0;
        for (int32_t off = 0; off < ln->n_tokens;) {
            int32_t end = piece_end(ru, ln->n_tokens, off, off + ubatch);
            int last = end == ln->n_tokens;
            struct splash_lane sub = {.seq = ln->seq,
                                      .tokens = ln->tokens + off,
                                      .n_tokens = end - off,
                                      .pos0 = ln->pos0 + off,
                                      .logits_all = ln->logits_all};
            if (ln->logits && ln->logits_all)
                sub.logits = ln->logits + (size_t)off * (size_t)model->cfg.n_vocab;
            else if (ln->logits && last)
                sub.logits = ln->logits;
            /* this piece's rows of the lane's taps */
            float *tap_rows = taps && taps->rows[l] ? taps->rows[l] + (int64_t)off * tap_width
                                                    : NULL;
            const struct splash_taps sub_taps = {.size = sizeof sub_taps,
                                                 .n_layers = taps ? taps->n_layers : 0,
                                                 .layers = taps ? taps->layers : NULL,
                                                 .rows = &tap_rows};
            struct splash_lane_runs sr = {0};
            uint8_t *flags = NULL;
            if (ru) {
                /* the runs within [off, end); a piece that ends mid-run ends a run of its
                 * own there, with no point asked for at it */
                int32_t k = k0;
                while (k < ru->n && ru->ends[k] <= end) {
                    ends[k - k0] = ru->ends[k] - off;
                    k++;
                }
                int mid = k == k0 || ends[k - k0 - 1] != end - off;
                if (mid)
                    ends[k - k0] = end - off;
                sr = (struct splash_lane_runs){.n = k - k0 + mid,
                                               .ends = ends,
                                               .fork = ru->fork ? ru->fork + k0 : NULL,
                                               .forks = ru->forks ? ru->forks + k0 : NULL};
                if (mid && ru->fork) {
                    if (!(flags = calloc((size_t)sr.n, 1))) {
                        free(ends);
                        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for runs");
                    }
                    memcpy(flags, ru->fork + k0, (size_t)(k - k0));
                    sr.fork = flags;
                }
                k0 = k;
            }
            enum splash_status st =
                forward_step(model, &sub, ru ? &sr : NULL, 1, taps ? &sub_taps : NULL, err);
            free(flags);
            if (st) {
                free(ends);
                return st;
            }
            off = end;
        }
        free(ends);
    }
    return SPLASH_OK;
}

enum splash_status hybrid_forward(struct hybrid_model *model, const struct splash_lane *lanes,
                                  int32_t n_lanes, struct splash_err *err)
{
    return forward_all(model, lanes, NULL, n_lanes, NULL, err);
}

enum splash_status hybrid_forward_taps(struct hybrid_model *model, const struct splash_lane *lanes,
                                       int32_t n_lanes, const struct splash_taps *taps,
                                       struct splash_err *err)
{
    return forward_all(model, lanes, NULL, n_lanes, taps, err);
}

enum splash_status hybrid_forward_runs(struct hybrid_model *model, const struct splash_lane *lanes,
                                       const struct splash_lane_runs *runs, int32_t n_lanes,
                                       const struct splash_taps *taps, struct splash_err *err)
{
    return forward_all(model, lanes, runs, n_lanes, taps, err);
}
