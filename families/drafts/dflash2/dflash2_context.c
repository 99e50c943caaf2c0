/* A sequence's draft context: the target's taps of committed rows, fused (fc +
 * hidden_norm) and projected once into every layer's keys and values, kept for the last
 * `ring` positions (the window and room to roll a few blocks back). */
#include <stdlib.h>
#include <string.h>

#include "families/drafts/dflash2/dflash2.h"

#define APPEND_CHUNK 64 /* rows projected per pass */

static size_t kv_width(void)
{
    return (size_t)DFLASH2_KV_HEADS * DFLASH2_HEAD_DIM;
}

enum splash_status dflash2_ctx_create(struct dflash2_model *m, struct dflash2_ctx **out,
                                      struct splash_err *err)
{
    struct dflash2_ctx *c = calloc(1, sizeof *c);
    size_t n = (size_t)m->cfg.n_layers * (size_t)m->ring * kv_width();
    if (c) {
        c->k = dflash2_alloc(m, n);
        c->v = dflash2_alloc(m, n);
    }
    if (!c || !c->k || !c->v) {
        dflash2_ctx_destroy(m, c);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for a draft context");
    }
    *out = c;
    return SPLASH_OK;
}

void dflash2_ctx_destroy(struct dflash2_model *m, struct dflash2_ctx *c)
{
    if (!c)
        return;
    dflash2_free(m, c->k);
    dflash2_free(m, c->v);
    free(c);
}

enum splash_status dflash2_ctx_fork(struct dflash2_model *m, const struct dflash2_ctx *c,
                                    struct dflash2_ctx **out, struct splash_err *err)
{
    struct dflash2_ctx *f;
    enum splash_status st = dflash2_ctx_create(m, &f, err);
    if (st)
        return st;
    const size_t KVW = kv_width(), layer = (size_t)m->ring * KVW;
    /* only the slots of held rows: a short context leaves the rest of the ring untouched */
    for (int32_t p = c->oldest; p < c->n; p++) {
        size_t slot = (size_t)(p % m->ring) * KVW;
        for (int32_t il = 0; il < m->cfg.n_layers; il++) {
            memcpy(f->k + (size_t)il * layer + slot, c->k + (size_t)il * layer + slot,
                   KVW * sizeof(float));
            memcpy(f->v + (size_t)il * layer + slot, c->v + (size_t)il * layer + slot,
                   KVW * sizeof(float));
        }
    }
    f->n = c->n;
    f->oldest = c->oldest;
    *out = f;
    return SPLASH_OK;
}

/* Rows [pos0, pos0 + n) of taps (dense, n x n_taps * n_embd) into every layer's ring. */
static void project_rows(struct dflash2_model *m, struct dflash2_ctx *c, const float *taps,
                         int32_t pos0, int32_t n, float *buf)
{
    const struct splash_kernels *k = m->k;
    const int64_t H = m->cfg.n_embd, KVW = (int64_t)kv_width();
    float *fused = buf;            /* n x H */
    float *kk = fused + n * H;     /* n x KVW */
    float *vv = kk + n * KVW;      /* n x KVW */
    float *cs = vv + n * KVW;      /* n x 64 x 2 */
    k->matmul(m->pool, m->fc.w, taps, n, fused);
    k->rmsnorm(m->pool, fused, H, m->hidden_norm, fused, H, n, H, m->cfg.rms_eps);
    dflash2_rope_cs(m, pos0, n, cs);
    for (int32_t il = 0; il < m->cfg.n_layers; il++) {
        const struct dflash2_layer *L = &m->layers[il];
        const struct splash_weight *w[2] = {L->wk.w, L->wv.w};
        float *y[2] = {kk, vv};
        k->matmul_many(m->pool, w, 2, fused, n, y);
        k->rmsnorm(m->pool, kk, DFLASH2_HEAD_DIM, L->k_norm, kk, DFLASH2_HEAD_DIM,
                   (int64_t)n * DFLASH2_KV_HEADS, DFLASH2_HEAD_DIM, m->cfg.rms_eps);
        k->rope(m->pool, kk, KVW, DFLASH2_HEAD_DIM, n, DFLASH2_KV_HEADS, DFLASH2_HEAD_DIM / 2,
                cs);
        float *lk = c->k + (size_t)il * (size_t)m->ring * (size_t)KVW;
        float *lv = c->v + (size_t)il * (size_t)m->ring * (size_t)KVW;
        for (int32_t i = 0; i < n; i++) {
            size_t slot = (size_t)((pos0 + i) % m->ring);
            memcpy(lk + slot * (size_t)KVW, kk + (size_t)i * (size_t)KVW,
                   (size_t)KVW * sizeof(float));
            memcpy(lv + slot * (size_t)KVW, vv + (size_t)i * (size_t)KVW,
                   (size_t)KVW * sizeof(float));
        }
    }
}

enum splash_status dflash2_append(struct dflash2_model *m, struct dflash2_ctx *c,
                                  const float *taps, int64_t stride, int32_t pos0, int32_t n,
                                  struct splash_err *err)
{
    const int64_t width = (int64_t)m->cfg.n_taps * m->cfg.n_embd;
    if (pos0 != c->n)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "draft context: rows appended at position %d, it holds %d", pos0,
                              c->n);
    if (n < 0 || (n && !taps) || stride < width || n > INT32_MAX - pos0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "draft context: %d rows of stride %lld (%lld floats a row)", n,
                              (long long)stride, (long long)width);
    if (!n)
        return SPLASH_OK;
    int32_t chunk = n < APPEND_CHUNK ? n : APPEND_CHUNK;
    size_t floats = (size_t)chunk * ((size_t)width + (size_t)m->cfg.n_embd + 2 * kv_width() +
                                     DFLASH2_HEAD_DIM);
    float *buf = dflash2_alloc(m, floats);
    if (!buf)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %d context rows", chunk);
    float *dense = buf + (size_t)chunk * (size_t)width;
    for (int32_t off = 0; off < n; off += chunk) {
        int32_t len = n - off < chunk ? n - off : chunk;
        /* the matmul reads dense rows */
        for (int32_t i = 0; i < len; i++)
            memcpy(buf + (size_t)i * (size_t)width, taps + (int64_t)(off + i) * stride,
                   (size_t)width * sizeof(float));
        project_rows(m, c, buf, pos0 + off, len, dense);
    }
    dflash2_free(m, buf);
    c->n = pos0 + n;
    if (c->n - c->oldest > m->ring)
        c->oldest = c->n - m->ring;
    return SPLASH_OK;
}

enum splash_status dflash2_rollback(struct dflash2_model *m, struct dflash2_ctx *c,
                                    int32_t n_keep, struct splash_err *err)
{
    if (n_keep < 0 || n_keep > c->n)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "draft context: cannot keep %d rows of %d", n_keep, c->n);
    if (n_keep == 0) {
        c->n = c->oldest = 0;
        return SPLASH_OK;
    }
    int32_t need = n_keep > m->cfg.window ? n_keep - m->cfg.window : 0;
    if (need < c->oldest)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "draft context: rows from %d are gone (it holds %d to %d); append "
                              "them again from 0",
                              need, c->oldest, c->n - 1);
    c->n = n_keep;
    return SPLASH_OK;
}
