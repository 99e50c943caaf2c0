/* One DFlash2 block: the anchor's token row and mask rows through the draft's layers
 * (grouped dynamic causal convolutions around attention and the SwiGLU MLP, attention
 * over the context window and the whole block), then the target's head, softcapped. */
#include <math.h>
#include <string.h>

#include "families/drafts/dflash2/dflash2.h"

#define ROWS DFLASH2_MIN_BLOCK /* rows a cycle drafts: the anchor and 7 mask rows */
#define QW (DFLASH2_HEADS * DFLASH2_HEAD_DIM)
#define KVW (DFLASH2_KV_HEADS * DFLASH2_HEAD_DIM)

/* out_t[c] = sum_o (base[stage][o][c] + dyn_t[stage][o][c / 16]) * in_{t-o}[c], rows
 * before the block's first reading zero. in and out are ROWS x H, distinct. */
static void conv_stage(const struct dflash2_model *m, const struct dflash2_conv *cv, int stage,
                       const float *dyn, const float *in, float *out)
{
    const int64_t H = m->cfg.n_embd;
    const int32_t K = m->cfg.conv_kernel, G = m->cfg.conv_groups;
    const int64_t dyn_w = 2 * (int64_t)K * G;
    for (int32_t t = 0; t < ROWS; t++) {
        float *o = out + t * H;
        memset(o, 0, (size_t)H * sizeof(float));
        for (int32_t off = 0; off < K && off <= t; off++) {
            const float *base = cv->base + ((int64_t)stage * K + off) * H;
            const float *d = dyn + t * dyn_w + ((int64_t)stage * K + off) * G;
            const float *x = in + (t - off) * H;
            for (int64_t c = 0; c < H; c++)
                o[c] += (base[c] + d[c / DFLASH2_CONV_GROUP]) * x[c];
        }
    }
}

#define GROUP DFLASH2_GROUP

/* Queries per KV head: every block row's GROUP heads. */
#define NQ (ROWS * GROUP)

/* n queries' dot products with one key, in 8 independent lanes each. */
static void dots_ref(const float *q, int n, const float *k, float *out)
{
    for (int g = 0; g < n; g++) {
        const float *qg = q + g * DFLASH2_HEAD_DIM;
        float lane[8] = {0};
        for (int d = 0; d < DFLASH2_HEAD_DIM; d += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += qg[d + l] * k[d + l];
        out[g] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                 ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
}

static void axpy_ref(const float *p, int n, const float *v, float *acc)
{
    for (int g = 0; g < n; g++)
        for (int d = 0; d < DFLASH2_HEAD_DIM; d++)
            acc[g * DFLASH2_HEAD_DIM + d] += p[g] * v[d];
}

const struct dflash2_attn_ops dflash2_attn_ref = {.isa = "scalar", .dots = dots_ref,
                                                  .axpy = axpy_ref};

const struct dflash2_attn_ops *dflash2_attn_pick(uint64_t cpu)
{
#if defined(__x86_64__)
    if ((cpu & (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA)) == (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA))
        return &dflash2_attn_avx2;
#endif
    return &dflash2_attn_ref;
}

struct attn_task {
    const struct dflash2_model *m;
    const struct dflash2_ctx *c;
    int32_t layer, pos;
    const float *q, *kb, *vb; /* block rows: ROWS x QW, ROWS x KVW, ROWS x KVW */
    float *out;               /* ROWS x QW */
    float *scratch;           /* per thread: NQ x head dim queries, NQ x (ring + ROWS) scores */
    int64_t scratch_per_thread;
};

/* Items are KV heads: the NQ queries of that head (block row i at position pos + i)
 * attend the context rows of the window before them and every block row; each key and
 * value is read once for all of them. Query (i, g) is at qs + (i * GROUP + g) * head dim. */
static void attn_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct attn_task *t = ctx;
    const struct dflash2_model *m = t->m;
    const int32_t ring = m->ring;
    const size_t layer_off = (size_t)t->layer * (size_t)ring * KVW;
    const float scale = 1.0f / sqrtf((float)DFLASH2_HEAD_DIM);
    float *qs = t->scratch + thread * t->scratch_per_thread;
    float *sc = qs + NQ * DFLASH2_HEAD_DIM; /* [key][NQ] */
    /* the window's first context row for the block's first row; row i starts i later */
    int32_t lo = t->pos - m->cfg.window + 1;
    if (lo < t->c->oldest)
        lo = t->c->oldest;
    if (lo < 0)
        lo = 0;
    const int32_t n_ctx = t->pos > lo ? t->pos - lo : 0, n_keys = n_ctx + ROWS;
    for (int64_t kvh = begin; kvh < end; kvh++) {
        for (int32_t i = 0; i < ROWS; i++)
            memcpy(qs + (int64_t)i * GROUP * DFLASH2_HEAD_DIM,
                   t->q + (int64_t)i * QW + kvh * GROUP * DFLASH2_HEAD_DIM,
                   GROUP * DFLASH2_HEAD_DIM * sizeof(float));
        float mx[NQ];
        for (int g = 0; g < NQ; g++)
            mx[g] = -INFINITY;
        for (int32_t j = 0; j < n_keys; j++) {
            const float *k = j < n_ctx ? t->c->k + layer_off + (size_t)((lo + j) % ring) * KVW
                                       : t->kb + (int64_t)(j - n_ctx) * KVW;
            float *s = sc + (int64_t)j * NQ;
            m->attn->dots(qs, NQ, k + (size_t)kvh * DFLASH2_HEAD_DIM, s);
            for (int g = 0; g < NQ; g++) {
                /* row i sees context rows from lo + i: the window slides with it */
                s[g] = j < n_ctx && lo + j < t->pos + g / GROUP - m->cfg.window + 1
                           ? -INFINITY
                           : s[g] * scale;
                mx[g] = s[g] > mx[g] ? s[g] : mx[g];
            }
        }
        float sum[NQ] = {0};
        for (int32_t j = 0; j < n_keys; j++)
            for (int g = 0; g < NQ; g++) {
                float e = expf(sc[(int64_t)j * NQ + g] - mx[g]);
                sc[(int64_t)j * NQ + g] = e;
                sum[g] += e;
            }
        float *acc = qs; /* the queries are read: their room takes the sums */
        memset(acc, 0, NQ * DFLASH2_HEAD_DIM * sizeof(float));
        for (int32_t j = 0; j < n_keys; j++) {
            const float *v = j < n_ctx ? t->c->v + layer_off + (size_t)((lo + j) % ring) * KVW
                                       : t->vb + (int64_t)(j - n_ctx) * KVW;
            m->attn->axpy(sc + (int64_t)j * NQ, NQ, v + (size_t)kvh * DFLASH2_HEAD_DIM, acc);
        }
        for (int g = 0; g < NQ; g++) {
            int32_t i = g / GROUP, h = (int32_t)kvh * GROUP + g % GROUP;
            float *o = t->out + (int64_t)i * QW + (int64_t)h * DFLASH2_HEAD_DIM;
            const float inv = 1.0f / sum[g];
            for (int d = 0; d < DFLASH2_HEAD_DIM; d++)
                o[d] = acc[g * DFLASH2_HEAD_DIM + d] * inv;
        }
    }
}

struct block_buf {
    float *h, *x, *x2, *dyn, *q, *kb, *vb, *att, *ff_g, *ff_u, *cs, *scores;
};

static void layer_forward(struct dflash2_model *m, const struct dflash2_ctx *c, int32_t il,
                          int32_t pos, struct block_buf *b, int64_t scratch_per_thread)
{
    const struct splash_kernels *k = m->k;
    const struct dflash2_layer *L = &m->layers[il];
    const int64_t H = m->cfg.n_embd, F = m->cfg.n_ff;
    const float eps = m->cfg.rms_eps;
    /* attention, inside the attention convolution */
    k->rmsnorm(m->pool, b->h, H, L->in_norm, b->x, H, ROWS, H, eps);
    k->matmul(m->pool, L->attn_conv.proj.w, b->x, ROWS, b->dyn);
    conv_stage(m, &L->attn_conv, 0, b->dyn, b->x, b->x2);
    const struct splash_weight *w[3] = {L->wq.w, L->wk.w, L->wv.w};
    float *y[3] = {b->q, b->kb, b->vb};
    k->matmul_many(m->pool, w, 3, b->x2, ROWS, y);
    k->rmsnorm(m->pool, b->q, DFLASH2_HEAD_DIM, L->q_norm, b->q, DFLASH2_HEAD_DIM,
               ROWS * DFLASH2_HEADS, DFLASH2_HEAD_DIM, eps);
    k->rmsnorm(m->pool, b->kb, DFLASH2_HEAD_DIM, L->k_norm, b->kb, DFLASH2_HEAD_DIM,
               ROWS * DFLASH2_KV_HEADS, DFLASH2_HEAD_DIM, eps);
    k->rope(m->pool, b->q, QW, DFLASH2_HEAD_DIM, ROWS, DFLASH2_HEADS, DFLASH2_HEAD_DIM / 2, b->cs);
    k->rope(m->pool, b->kb, KVW, DFLASH2_HEAD_DIM, ROWS, DFLASH2_KV_HEADS, DFLASH2_HEAD_DIM / 2,
            b->cs);
    struct attn_task at = {.m = m, .c = c, .layer = il, .pos = pos, .q = b->q, .kb = b->kb,
                           .vb = b->vb, .out = b->att, .scratch = b->scores,
                           .scratch_per_thread = scratch_per_thread};
    m->host->parallel_for(m->pool, DFLASH2_KV_HEADS, 1, attn_range, &at);
    k->matmul(m->pool, L->wo.w, b->att, ROWS, b->x2);
    conv_stage(m, &L->attn_conv, 1, b->dyn, b->x2, b->x);
    for (int64_t i = 0; i < ROWS * H; i++)
        b->h[i] += b->x[i];
    /* SwiGLU, inside the MLP convolution */
    k->rmsnorm(m->pool, b->h, H, L->post_norm, b->x, H, ROWS, H, eps);
    k->matmul(m->pool, L->mlp_conv.proj.w, b->x, ROWS, b->dyn);
    conv_stage(m, &L->mlp_conv, 0, b->dyn, b->x, b->x2);
    const struct splash_weight *wf[2] = {L->gate.w, L->up.w};
    float *yf[2] = {b->ff_g, b->ff_u};
    k->matmul_many(m->pool, wf, 2, b->x2, ROWS, yf);
    for (int64_t i = 0; i < ROWS * F; i++) {
        float g = b->ff_g[i];
        b->ff_g[i] = g / (1.0f + expf(-g)) * b->ff_u[i];
    }
    k->matmul(m->pool, L->down.w, b->ff_g, ROWS, b->x2);
    conv_stage(m, &L->mlp_conv, 1, b->dyn, b->x2, b->x);
    for (int64_t i = 0; i < ROWS * H; i++)
        b->h[i] += b->x[i];
}

enum splash_status dflash2_propose(struct dflash2_model *m, struct dflash2_ctx *c,
                                   const struct splash_draft_block *blk, struct splash_err *err)
{
    if (!blk || blk->size < sizeof *blk)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft block: no arguments");
    if (blk->n_rows < 1 || blk->n_rows > ROWS - 1 || !blk->tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "draft block: %d proposals asked, 1 to %d", blk->n_rows, ROWS - 1);
    if (blk->anchor < 0 || blk->anchor >= m->cfg.n_vocab)
        return splash_err_set(err, SPLASH_ERR_INVALID, "draft block: anchor token %d out of range",
                              blk->anchor);
    if (blk->pos != c->n)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "draft block: anchor at position %d, the context holds %d rows",
                              blk->pos, c->n);
    const int64_t H = m->cfg.n_embd, F = m->cfg.n_ff, V = m->cfg.n_vocab;
    const int64_t dyn_w = 2 * (int64_t)m->cfg.conv_kernel * m->cfg.conv_groups;
    const int threads = m->host->pool_threads(m->pool) > 0 ? m->host->pool_threads(m->pool) : 1;
    const int64_t per_thread = (int64_t)NQ * (DFLASH2_HEAD_DIM + m->ring + ROWS);
    const int64_t n_prop = blk->n_rows;
    size_t floats = (size_t)ROWS * (size_t)(3 * H + dyn_w + QW + 2 * KVW + QW + 2 * F +
                                            DFLASH2_HEAD_DIM) +
                    (size_t)threads * (size_t)per_thread + (size_t)n_prop * (size_t)V;
    float *arena = dflash2_alloc(m, floats);
    if (!arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for a draft block");
    struct block_buf b;
    float *p = arena;
    b.h = p, p += ROWS * H;
    b.x = p, p += ROWS * H;
    b.x2 = p, p += ROWS * H;
    b.dyn = p, p += ROWS * dyn_w;
    b.q = p, p += ROWS * QW;
    b.kb = p, p += ROWS * KVW;
    b.vb = p, p += ROWS * KVW;
    b.att = p, p += ROWS * QW;
    b.ff_g = p, p += ROWS * F;
    b.ff_u = p, p += ROWS * F;
    b.cs = p, p += ROWS * DFLASH2_HEAD_DIM;
    b.scores = p, p += threads * per_thread;
    float *logits = p;

    /* row 0: the anchor's token row; the rest: the mask row */
    m->k->embed_rows(m->tok_embd, &blk->anchor, 1, b.h);
    for (int32_t r = 1; r < ROWS; r++)
        memcpy(b.h + r * H, m->mask_row, (size_t)H * sizeof(float));
    dflash2_rope_cs(m, blk->pos, ROWS, b.cs);
    for (int32_t il = 0; il < m->cfg.n_layers; il++)
        layer_forward(m, c, il, blk->pos, &b, per_thread);
    /* rows 1 .. n_prop: final norm, the target's head, multiplier and softcap */
    float *hn = b.x;
    m->k->rmsnorm(m->pool, b.h + H, H, m->norm, hn, H, n_prop, H, m->cfg.rms_eps);
    m->k->matmul(m->pool, m->head, hn, n_prop, logits);
    const float mult = m->cfg.out_mult, cap = m->cfg.softcap;
    for (int64_t i = 0; i < n_prop * V; i++) {
        float l = logits[i] * mult;
        logits[i] = cap > 0 ? tanhf(l / cap) * cap : l;
    }
    enum splash_status st = dflash2_select(m, logits, hn, (int32_t)n_prop, blk, err);
    dflash2_free(m, arena);
    return st;
}
