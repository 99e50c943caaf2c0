/* The NextN block's weights (the target's mapped tensors, read in place) and a sequence's
 * context: the taps appended so far and the block's own KV pages over a sliding span of
 * positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/drafts/nextn/nextn.h"

#define KV_BF16 1 /* enum splash_kv_format */

static enum splash_status bind_weight(struct nextn_model *m, const struct splash_meta *t,
                                      const char *name, struct splash_weight **w,
                                      struct splash_err *err)
{
    const struct splash_tensor_info *ti = m->host->meta->tensor_find(t, name);
    if (!ti || !ti->data || !ti->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s has no data the MTP block "
                              "can read", m->host->meta->path(t), name);
    char scale[128];
    size_t len = strlen(name) > 7 ? strlen(name) - 7 : strlen(name);
    snprintf(scale, sizeof scale, "%.*s.scale", (int)len, name);
    if (m->host->meta->tensor_find(t, scale))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s (a per-tensor scale) is not one the MTP block reads",
                              m->host->meta->path(t), scale);
    m->weight_bytes += ti->n_bytes;
    return m->k->weight_create(ti, w, err);
}

static enum splash_status bind_floats(struct nextn_model *m, const struct splash_meta *t,
                                      const char *name, float **out, struct splash_err *err)
{
    const struct splash_tensor_info *ti = m->host->meta->tensor_find(t, name);
    if (!ti || !ti->data || !ti->format)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s has no data the MTP block "
                              "can read", m->host->meta->path(t), name);
    int64_t n = ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3];
    float *x = m->host->alloc_aligned(64, (size_t)n * sizeof *x);
    if (!x)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
    m->k->to_float(ti, x);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            m->host->free_aligned(x);
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s holds a value that is not finite (element %lld)",
                                  m->host->meta->path(t), name, (long long)i);
        }
    m->weight_bytes += (uint64_t)n * sizeof *x;
    *out = x;
    return SPLASH_OK;
}

/* Rotary frequencies as the trunk turns them: NeoX pairs over the leading n_rot dims; with
 * IMROPE sections, pairs cycle t, h, w and the rest read the fourth position (0 for text). */
static void rope_tables(struct nextn_model *m)
{
    const struct nextn_config *c = &m->cfg;
    const int32_t *sec = c->rope_sections;
    int32_t sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    for (int32_t i = 0; i < c->n_rot / 2; i++) {
        m->rope_freq[i] = (float)pow(c->rope_base, -2.0 * i / c->n_rot);
        m->rope_on[i] = 1;
        if (sect_dims > 0) {
            int32_t s = i % sect_dims;
            m->rope_on[i] = (uint8_t)((s % 3 == 0 && s < 3 * sec[0]) ||
                                      (s % 3 == 1 && s < 3 * sec[1]) ||
                                      (s % 3 == 2 && s < 3 * sec[2]));
        }
    }
}

enum splash_status nextn_model_create(const struct splash_host *host,
                                      const struct splash_meta *target,
                                      const struct splash_draft_opts *opts,
                                      struct nextn_model **out, struct splash_err *err)
{
    struct nextn_model *m = calloc(1, sizeof *m);
    if (!m)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for the MTP block");
    m->host = host;
    m->k = host->kernels;
    m->pool = opts ? opts->pool : NULL;
    enum splash_status st = nextn_config_read(host, target, &m->cfg, err);
    if (st)
        goto fail;
    rope_tables(m);
    /* the window and room for a block past it and a rollback, in whole pages */
    m->cap = (NEXTN_WINDOW + 4 * NEXTN_PAGE_TOKENS) / NEXTN_PAGE_TOKENS * NEXTN_PAGE_TOKENS;
    m->page_bytes =
        m->k->kv_page_bytes(KV_BF16, NEXTN_PAGE_TOKENS, m->cfg.n_head_kv, m->cfg.head_dim);
    m->embd = host->meta->tensor_find(target, m->cfg.embd);
    char n[128];
    const int32_t il = m->cfg.n_layers;
#define W(dst, suffix)                                                                             \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                               \
    if ((st = bind_weight(m, target, n, &m->dst, err)))                                            \
        goto fail;
#define F(dst, suffix)                                                                             \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                               \
    if ((st = bind_floats(m, target, n, &m->dst, err)))                                            \
        goto fail;
    W(eh_proj, "nextn.eh_proj.weight");
    W(wq, "attn_q.weight");
    W(wk, "attn_k.weight");
    W(wv, "attn_v.weight");
    W(wo, "attn_output.weight");
    if (m->cfg.moe) {
        W(router, "ffn_gate_inp.weight");
        W(gate_exps, "ffn_gate_exps.weight");
        W(up_exps, "ffn_up_exps.weight");
        W(down_exps, "ffn_down_exps.weight");
        if (m->cfg.n_ff_shexp > 0) {
            W(sh_gate, "ffn_gate_shexp.weight");
            W(sh_up, "ffn_up_shexp.weight");
            W(sh_down, "ffn_down_shexp.weight");
            F(sh_inp, "ffn_gate_inp_shexp.weight");
        }
    } else {
        W(gate, "ffn_gate.weight");
        W(up, "ffn_up.weight");
        W(down, "ffn_down.weight");
    }
    F(enorm, "nextn.enorm.weight");
    F(hnorm, "nextn.hnorm.weight");
    F(attn_norm, "attn_norm.weight");
    F(post_norm, "post_attention_norm.weight");
    F(q_norm, "attn_q_norm.weight");
    F(k_norm, "attn_k_norm.weight");
#undef W
#undef F
    if ((st = bind_weight(m, target, m->cfg.head, &m->head, err)) ||
        (st = bind_floats(m, target, m->cfg.head_norm, &m->head_norm, err)))
        goto fail;
    if (!m->embd || !m->embd->data || !m->embd->format) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s has no data the MTP block can read",
                            host->meta->path(target), m->cfg.embd);
        goto fail;
    }
    *out = m;
    return SPLASH_OK;
fail:
    nextn_model_destroy(m);
    return st;
}

void nextn_model_destroy(struct nextn_model *m)
{
    if (!m)
        return;
    struct splash_weight *ws[] = {m->eh_proj,   m->wq,      m->wk,        m->wv,
                                  m->wo,        m->gate,    m->up,        m->down,
                                  m->head,      m->router,  m->gate_exps, m->up_exps,
                                  m->down_exps, m->sh_gate, m->sh_up,     m->sh_down};
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
        if (ws[i])
            m->k->weight_destroy(ws[i]);
    float *fs[] = {m->enorm,  m->hnorm,  m->attn_norm, m->post_norm,
                   m->q_norm, m->k_norm, m->head_norm, m->sh_inp};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (fs[i])
            m->host->free_aligned(fs[i]);
    free(m);
}

static int32_t n_pages(const struct nextn_model *m)
{
    return m->cap / NEXTN_PAGE_TOKENS;
}

uint64_t nextn_ctx_bytes(const struct nextn_model *m)
{
    return (uint64_t)m->cap * (uint64_t)m->cfg.n_embd * sizeof(float) +
           (uint64_t)n_pages(m) * m->page_bytes;
}

enum splash_status nextn_ctx_create(struct nextn_model *m, struct nextn_ctx **out,
                                    struct splash_err *err)
{
    struct nextn_ctx *c = calloc(1, sizeof *c);
    int ok = c && (c->h = m->host->alloc_aligned(64, (size_t)m->cap * (size_t)m->cfg.n_embd *
                                                         sizeof(float))) &&
             (c->pages = calloc((size_t)n_pages(m), sizeof *c->pages));
    /* zeroed: the kernels never read a position the window leaves out, but no page ever
     * holds bytes that are not numbers */
    for (int32_t p = 0; ok && p < n_pages(m); p++)
        if ((ok = (c->pages[p] = m->host->alloc_aligned(64, m->page_bytes)) != NULL))
            memset(c->pages[p], 0, m->page_bytes);
    if (!ok) {
        nextn_ctx_destroy(m, c);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for an MTP draft context");
    }
    *out = c;
    return SPLASH_OK;
}

void nextn_ctx_destroy(struct nextn_model *m, struct nextn_ctx *c)
{
    if (!c)
        return;
    for (int32_t p = 0; c->pages && p < n_pages(m); p++)
        if (c->pages[p])
            m->host->free_aligned(c->pages[p]);
    free(c->pages);
    if (c->h)
        m->host->free_aligned(c->h);
    free(c);
}

enum splash_status nextn_ctx_fork(struct nextn_model *m, const struct nextn_ctx *c,
                                  struct nextn_ctx **out, struct splash_err *err)
{
    struct nextn_ctx *f;
    enum splash_status st = nextn_ctx_create(m, &f, err);
    if (st)
        return st;
    f->n_h = c->n_h;
    f->n_kv = c->n_kv;
    f->kv_lo = c->kv_lo;
    f->base = c->base;
    memcpy(f->h, c->h, (size_t)m->cap * (size_t)m->cfg.n_embd * sizeof(float));
    for (int32_t p = 0; p < n_pages(m); p++)
        memcpy(f->pages[p], c->pages[p], m->page_bytes);
    *out = f;
    return SPLASH_OK;
}

void nextn_ctx_reserve(struct nextn_model *m, struct nextn_ctx *c, int32_t end)
{
    if (end - c->base <= m->cap)
        return;
    /* keep the window before the last rows (and one tap before it), whole pages */
    int32_t keep_from = end - NEXTN_WINDOW - 2 * NEXTN_BLOCK;
    int32_t base = keep_from / NEXTN_PAGE_TOKENS * NEXTN_PAGE_TOKENS;
    int32_t drop = (base - c->base) / NEXTN_PAGE_TOKENS, np = n_pages(m);
    if (drop <= 0)
        return;
    if (drop > np)
        drop = np;
    void *dropped[NEXTN_WINDOW / NEXTN_PAGE_TOKENS + 8];
    memcpy(dropped, c->pages, (size_t)drop * sizeof *c->pages);
    memmove(c->pages, c->pages + drop, (size_t)(np - drop) * sizeof *c->pages);
    memcpy(c->pages + np - drop, dropped, (size_t)drop * sizeof *c->pages);
    int64_t rows = (int64_t)drop * NEXTN_PAGE_TOKENS, e = m->cfg.n_embd;
    memmove(c->h, c->h + rows * e, (size_t)((int64_t)m->cap - rows) * (size_t)e * sizeof(float));
    c->base += (int32_t)rows;
}

enum splash_status nextn_append(struct nextn_model *m, struct nextn_ctx *c, const float *taps,
                                int64_t stride, int32_t pos0, int32_t n, struct splash_err *err)
{
    if (pos0 != c->n_h || n < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MTP draft context: rows from %d appended to one of %d", pos0,
                              c->n_h);
    const int64_t e = m->cfg.n_embd;
    for (int32_t i = 0; i < n; i++) {
        nextn_ctx_reserve(m, c, pos0 + i + 1);
        memcpy(c->h + (int64_t)(pos0 + i - c->base) * e, taps + (int64_t)i * stride,
               (size_t)e * sizeof(float));
    }
    c->n_h = pos0 + n;
    return SPLASH_OK;
}

enum splash_status nextn_rollback(struct nextn_model *m, struct nextn_ctx *c, int32_t n_keep,
                                  struct splash_err *err)
{
    (void)m;
    if (n_keep <= 0) {
        c->n_h = c->n_kv = c->kv_lo = c->base = 0;
        return SPLASH_OK;
    }
    if (n_keep > c->n_h)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MTP draft context: rollback to %d of %d rows", n_keep, c->n_h);
    /* a proposal at n_keep reads keys from n_keep - window + 1 and that row's tap before */
    if (c->base > 0 && n_keep - NEXTN_WINDOW - 1 < c->base)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "MTP draft context: rows before %d are gone (it holds %d on)",
                              n_keep, c->base);
    c->n_h = n_keep;
    if (c->n_kv > n_keep)
        c->n_kv = n_keep;
    return SPLASH_OK;
}
