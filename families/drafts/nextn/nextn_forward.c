/* The NextN block's forward: context rows (their keys and values only: a row's K and V
 * depend on its own token and tap alone) and the chained proposal rows (the whole block,
 * the head, and a choice among the best candidates). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "families/drafts/nextn/nextn.h"

#define KV_BF16 1     /* enum splash_kv_format */
#define CHUNK_ROWS 64 /* context rows per pass */

/* The FFN's widest intermediate row: the dense FFN's, or a MoE row's routed experts (each
 * its own row) and shared expert side by side, and the router's logits. */
static int64_t ffn_width(const struct nextn_config *c)
{
    if (!c->moe)
        return c->n_ff;
    return (int64_t)c->n_used * (c->n_ff_exp + c->n_embd) + c->n_ff_shexp + c->n_embd +
           c->n_expert;
}

struct rows {
    float *emb, *cat, *x, *xn, *qg, *kk, *vv, *q, *att, *y, *g, *u, *cs;
};

static size_t rows_floats(const struct nextn_model *m, int64_t n)
{
    const struct nextn_config *c = &m->cfg;
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim;
    return (size_t)(n * (e + 2 * e + e + e + 2 * qd + 2 * kvd + 2 * qd + e + 2 * ffn_width(c) +
                         c->n_rot + 16) + 16 * 8);
}

static void rows_carve(const struct nextn_model *m, float *buf, int64_t n, struct rows *r)
{
    const struct nextn_config *c = &m->cfg;
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim;
    float *p = buf;
#define TAKE(dst, count)                                                                           \
    r->dst = p;                                                                                    \
    p += ((count) + 15) / 16 * 16;
    TAKE(emb, n * e);
    TAKE(cat, n * 2 * e);
    TAKE(x, n * e);
    TAKE(xn, n * e);
    TAKE(qg, n * 2 * qd);
    TAKE(kk, n * kvd);
    TAKE(vv, n * kvd);
    TAKE(q, n * qd);
    TAKE(att, n * qd);
    TAKE(y, n * e);
    TAKE(g, n * ffn_width(c));
    TAKE(u, n * ffn_width(c));
    TAKE(cs, n * c->n_rot + 16);
#undef TAKE
}

static struct splash_kv_pages kv_of(const struct nextn_model *m, const struct nextn_ctx *c)
{
    return (struct splash_kv_pages){.format = KV_BF16,
                                    .page_tokens = NEXTN_PAGE_TOKENS,
                                    .n_kv_heads = m->cfg.n_head_kv,
                                    .head_dim = m->cfg.head_dim,
                                    .pages = c->pages,
                                    .n_pages = m->cap / NEXTN_PAGE_TOKENS};
}

static float sigmoidf(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

static void swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* One row's MoE FFN (out, n_embd) of its post-attention-normed x: softmax over the
 * router's logits in fp32, the top n_used (ties to the lower expert) renormalised, each
 * chosen expert's SwiGLU weighted by it, plus the shared expert scaled by the sigmoid of
 * its scalar gate. g and u: ffn_width floats each. */
static void moe_row(struct nextn_model *m, const float *x, float *g, float *u, float *out)
{
    const struct nextn_config *c = &m->cfg;
    const struct splash_kernels *k = m->k;
    const int64_t e = c->n_embd, ff = c->n_ff_exp, K = c->n_used;
    float *logits = u + K * (ff + e) + c->n_ff_shexp + e; /* the tail of u */
    k->matmul(m->pool, m->router, x, 1, logits);
    float mx = logits[0];
    for (int32_t j = 1; j < c->n_expert; j++)
        mx = logits[j] > mx ? logits[j] : mx;
    int32_t ids[NEXTN_MAX_USED];
    float w[NEXTN_MAX_USED];
    /* the k largest (the softmax keeps the order; renormalised, its sum cancels) */
    for (int32_t j = 0; j < K; j++) {
        int32_t best = -1;
        for (int32_t x2 = 0; x2 < c->n_expert; x2++) {
            int taken = 0;
            for (int32_t q = 0; q < j; q++)
                taken |= ids[q] == x2;
            if (!taken && (best < 0 || logits[x2] > logits[best]))
                best = x2;
        }
        ids[j] = best;
    }
    double sum = 0;
    for (int32_t j = 0; j < K; j++)
        sum += (w[j] = expf(logits[ids[j]] - mx));
    for (int32_t j = 0; j < K; j++)
        w[j] = (float)(w[j] / sum);
    /* the routed experts, each chosen one a row of its own */
    float *xk = g + K * ff; /* K x e: the row repeated */
    for (int32_t j = 0; j < K; j++)
        memcpy(xk + j * e, x, (size_t)e * sizeof *x);
    k->matmul_experts(m->pool, m->gate_exps, xk, ids, K, g);
    k->matmul_experts(m->pool, m->up_exps, xk, ids, K, u);
    swiglu(g, u, K * ff);
    float *y = u; /* K x e */
    k->matmul_experts(m->pool, m->down_exps, g, ids, K, y);
    for (int64_t i = 0; i < e; i++) {
        float acc = 0;
        for (int32_t j = 0; j < K; j++)
            acc += w[j] * y[j * e + i];
        out[i] = acc;
    }
    if (c->n_ff_shexp > 0) {
        float *sg = g + K * (ff + e), *su = u + K * (ff + e), *sy = sg + c->n_ff_shexp;
        k->matmul(m->pool, m->sh_gate, x, 1, sg);
        k->matmul(m->pool, m->sh_up, x, 1, su);
        swiglu(sg, su, c->n_ff_shexp);
        k->matmul(m->pool, m->sh_down, sg, 1, sy);
        float s = 0;
        for (int64_t i = 0; i < e; i++)
            s += x[i] * m->sh_inp[i];
        s = 1.0f / (1.0f + expf(-s));
        for (int64_t i = 0; i < e; i++)
            out[i] += s * sy[i];
    }
}

/* Rows p0 .. p0 + n - 1 (tokens and the taps before each, h + i * e; NULL row 0 reads
 * zeros): the block's input projection and attention norm, their keys and values stored.
 * full: the rest of the block for every row, out (n x n_embd) the normed output. */
static void block_rows(struct nextn_model *m, struct nextn_ctx *c, int32_t p0, int32_t n,
                       const int32_t *tokens, const float *h, int full, struct rows *r,
                       float *out)
{
    const struct nextn_config *cf = &m->cfg;
    const struct splash_kernels *k = m->k;
    struct splash_pool *pool = m->pool;
    const int64_t e = cf->n_embd, hd = cf->head_dim, H = cf->n_head, KV = cf->n_head_kv;
    const int64_t qd = H * hd, kvd = KV * hd;
    const float eps = cf->rms_eps;

    k->embed_rows(m->embd, tokens, n, r->emb);
    k->rmsnorm(pool, r->emb, e, m->enorm, r->cat, 2 * e, n, e, eps);
    for (int32_t i = 0; i < n; i++) {
        float *dst = r->cat + (int64_t)i * 2 * e + e;
        if (h)
            memcpy(dst, h + (int64_t)i * e, (size_t)e * sizeof *dst);
        else
            memset(dst, 0, (size_t)e * sizeof *dst);
    }
    k->rmsnorm(pool, r->cat + e, 2 * e, m->hnorm, r->cat + e, 2 * e, n, e, eps);
    k->matmul(pool, m->eh_proj, r->cat, n, r->x);
    k->rmsnorm(pool, r->x, e, m->attn_norm, r->xn, e, n, e, eps);
    const struct splash_weight *w[3] = {m->wq, m->wk, m->wv};
    float *y[3] = {r->qg, r->kk, r->vv};
    k->matmul_many(pool, full ? w : w + 1, full ? 3 : 2, r->xn, n, full ? y : y + 1);
    k->rmsnorm(pool, r->kk, hd, m->k_norm, r->kk, hd, n * KV, hd, eps);
    if (full)
        k->rmsnorm(pool, r->qg, 2 * hd, m->q_norm, r->qg, 2 * hd, n * H, hd, eps);
    const int32_t pairs = cf->n_rot / 2;
    if (pairs > 0) {
        for (int32_t i = 0; i < n; i++)
            for (int32_t p = 0; p < pairs; p++) {
                double th = m->rope_on[p] ? (double)(p0 + i) * m->rope_freq[p] : 0.0;
                r->cs[((int64_t)i * pairs + p) * 2] = (float)cos(th);
                r->cs[((int64_t)i * pairs + p) * 2 + 1] = (float)sin(th);
            }
        k->rope(pool, r->kk, kvd, hd, n, (int32_t)KV, pairs, r->cs);
        if (full)
            k->rope(pool, r->qg, 2 * qd, 2 * hd, n, (int32_t)H, pairs, r->cs);
    }
    const struct splash_kv_pages kv = kv_of(m, c);
    k->kv_store(pool, &kv, p0 - c->base, n, r->kk, kvd, r->vv, kvd);
    if (!full)
        return;

    for (int32_t i = 0; i < n; i++)
        for (int64_t hh = 0; hh < H; hh++)
            memcpy(r->q + i * qd + hh * hd, r->qg + i * 2 * qd + hh * 2 * hd,
                   (size_t)hd * sizeof(float));
    const struct splash_attn_args a = {.size = sizeof a,
                                       .n_head = (int32_t)H,
                                       .kv = &kv,
                                       .q = r->q,
                                       .q_stride = qd,
                                       .n_q = n,
                                       .pos0 = p0 - c->base,
                                       .scale = 1.0f / sqrtf((float)hd),
                                       .window = NEXTN_WINDOW,
                                       .out = r->att,
                                       .out_stride = qd};
    k->attend(pool, &a);
    for (int32_t i = 0; i < n; i++)
        for (int64_t hh = 0; hh < H; hh++) {
            float *o = r->att + i * qd + hh * hd;
            const float *gt = r->qg + i * 2 * qd + hh * 2 * hd + hd;
            for (int64_t d = 0; d < hd; d++)
                o[d] *= sigmoidf(gt[d]);
        }
    k->matmul(pool, m->wo, r->att, n, r->y);
    for (int64_t i = 0; i < n * e; i++)
        r->x[i] += r->y[i];
    k->rmsnorm(pool, r->x, e, m->post_norm, r->xn, e, n, e, eps);
    if (cf->moe) {
        for (int32_t i = 0; i < n; i++)
            moe_row(m, r->xn + (int64_t)i * e, r->g, r->u, r->y + (int64_t)i * e);
    } else {
        const struct splash_weight *fw[2] = {m->gate, m->up};
        float *fy[2] = {r->g, r->u};
        k->matmul_many(pool, fw, 2, r->xn, n, fy);
        for (int64_t i = 0; i < n * cf->n_ff; i++)
            r->g[i] = r->g[i] / (1.0f + expf(-r->g[i])) * r->u[i];
        k->matmul(pool, m->down, r->g, n, r->y);
    }
    for (int64_t i = 0; i < n * e; i++)
        r->x[i] += r->y[i];
    k->rmsnorm(pool, r->x, e, m->head_norm, out, e, n, e, eps);
}

/* The k best of n logits, best first (ties: the lower id), and their softmax at
 * temperature 1 among themselves. */
static void top_candidates(const float *logits, int64_t n, int32_t kk, int32_t *ids, float *probs)
{
    int32_t have = 0;
    for (int64_t t = 0; t < n; t++) {
        float v = logits[t];
        if (have == kk && !(v > logits[ids[kk - 1]]))
            continue;
        int32_t j = have < kk ? have++ : kk - 1;
        while (j > 0 && v > logits[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = (int32_t)t;
    }
    double sum = 0;
    for (int32_t j = 0; j < have; j++)
        sum += exp((double)logits[ids[j]] - (double)logits[ids[0]]);
    for (int32_t j = 0; j < have; j++)
        probs[j] = (float)(exp((double)logits[ids[j]] - (double)logits[ids[0]]) / sum);
    for (int32_t j = have; j < kk; j++) {
        ids[j] = -1;
        probs[j] = 0;
    }
}

enum splash_status nextn_propose(struct nextn_model *m, struct nextn_ctx *c,
                                 const struct splash_draft_block *b, struct splash_err *err)
{
    const size_t need = offsetof(struct splash_draft_block, history) + sizeof b->history;
    if (b->size < need || !b->history)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MTP draft: the block carries no token history (ABI 1.5)");
    if (b->pos != c->n_h || b->n_rows < 1 || b->n_rows > NEXTN_BLOCK - 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MTP draft: a block at %d of %d rows over a context of %d",
                              b->pos, b->n_rows, c->n_h);
    if (b->history[b->pos] != b->anchor)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MTP draft: the history's token at %d is not the anchor", b->pos);
    const struct nextn_config *cf = &m->cfg;
    const int64_t e = cf->n_embd;
    const int32_t pos = b->pos;
    nextn_ctx_reserve(m, c, pos + b->n_rows);

    int64_t rows_max = CHUNK_ROWS;
    size_t scratch = rows_floats(m, rows_max) + (size_t)(cf->n_vocab + 2 * e);
    float *buf = m->host->alloc_aligned(64, scratch * sizeof(float));
    if (!buf)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for an MTP draft block");
    struct rows r;
    rows_carve(m, buf, rows_max, &r);
    float *logits = buf + rows_floats(m, rows_max);
    float *hrow = logits + cf->n_vocab, *next = hrow + e;

    /* the context rows the window reads that are not yet computed */
    int32_t lo = pos - NEXTN_WINDOW + 1 > 0 ? pos - NEXTN_WINDOW + 1 : 0;
    int32_t from = c->n_kv;
    if (c->kv_lo > lo || c->n_kv < lo) {
        from = lo;
        c->kv_lo = lo;
    }
    int32_t p = from;
    if (p == 0 && pos > 0) { /* row 0 has no tap before it: zeros */
        block_rows(m, c, 0, 1, b->history, NULL, 0, &r, NULL);
        p = 1;
    }
    for (int32_t n; p < pos; p += n) {
        n = pos - p < CHUNK_ROWS ? pos - p : CHUNK_ROWS;
        block_rows(m, c, p, n, b->history + p, c->h + (int64_t)(p - 1 - c->base) * e, 0, &r,
                   NULL);
    }
    c->n_kv = pos;

    /* the chain: the anchor with the last tap, then each proposal with the row's output */
    int32_t tok = b->anchor;
    const float *h = pos > 0 ? c->h + (int64_t)(pos - 1 - c->base) * e : NULL;
    int32_t ids[NEXTN_TOP_K];
    float probs[NEXTN_TOP_K];
    for (int32_t i = 0; i < b->n_rows; i++) {
        block_rows(m, c, pos + i, 1, &tok, h, 1, &r, next);
        m->k->matmul(m->pool, m->head, next, 1, logits);
        top_candidates(logits, cf->n_vocab, NEXTN_TOP_K, ids, probs);
        int32_t pick = 0;
        if (b->uniforms) {
            float u = b->uniforms[i], acc = 0;
            for (pick = 0; pick < NEXTN_TOP_K - 1 && ids[pick + 1] >= 0; pick++) {
                acc += probs[pick];
                if (u < acc)
                    break;
            }
        }
        tok = ids[pick];
        b->tokens[i] = tok;
        if (b->cand_tokens)
            memcpy(b->cand_tokens + (int64_t)i * NEXTN_TOP_K, ids, sizeof ids);
        if (b->cand_probs)
            memcpy(b->cand_probs + (int64_t)i * NEXTN_TOP_K, probs, sizeof probs);
        if (b->confidence)
            b->confidence[i] = probs[0];
        memcpy(hrow, next, (size_t)e * sizeof *hrow);
        h = hrow;
    }
    m->host->free_aligned(buf);
    return SPLASH_OK;
}
