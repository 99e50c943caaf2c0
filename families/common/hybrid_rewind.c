/* Exact rollback of a verify forward's rejected rows (family ABI 1.3 seq_keep_rows): the
 * GDN layers' states as the forward found them and the rows it fed them, so a truncation
 * recomputes the states over the kept rows with the forward's own kernels and inputs. */
#include <stdlib.h>
#include <string.h>

#include "families/common/hybrid.h"

#define REWIND_MAX_ROWS 15 /* a lane of 16 rows runs the chunked delta rule */

/* floats one GDN layer saves for `rows` rows: conv inputs, q/k/v, decay, beta */
static size_t layer_floats(const struct hybrid_model *model, int32_t rows)
{
    const struct hybrid_config *c = &model->cfg;
    return (size_t)rows * (2 * (size_t)c->conv_dim + 2 * (size_t)c->n_v_heads);
}

static size_t rewind_bytes(const struct hybrid_model *model, int32_t rows)
{
    size_t n_gdn = (size_t)model->n_gdn;
    return n_gdn * (model->gdn_state_bytes + model->conv_state_bytes +
                    layer_floats(model, rows) * sizeof(float));
}

void hybrid_rewind_free(struct hybrid_model *model, struct hybrid_seq *seq)
{
    struct hybrid_rewind *rw = seq->rewind;
    if (!rw)
        return;
    model->cache_bytes -= rewind_bytes(model, rw->cap_rows);
    model->host->free_aligned(rw->gdn_pre);
    model->host->free_aligned(rw->conv_pre);
    model->host->free_aligned(rw->rows);
    free(rw);
    seq->rewind = NULL;
}

enum splash_status hybrid_seq_keep_rows(struct hybrid_model *model, struct hybrid_seq *seq,
                                        int32_t n_rows, struct splash_err *err)
{
    if (n_rows < 0 || n_rows > REWIND_MAX_ROWS)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "keep %d rows of a verify pass (at most %d)", n_rows,
                              REWIND_MAX_ROWS);
    if (model->n_gdn == 0 || n_rows == 0) {
        /* attention alone: the KV pages are truncated as they are */
        if (seq->rewind)
            seq->rewind->armed = seq->rewind->n_saved = 0;
        return SPLASH_OK;
    }
    struct hybrid_rewind *rw = seq->rewind;
    if (!rw || rw->cap_rows < n_rows) {
        hybrid_rewind_free(model, seq);
        rw = calloc(1, sizeof *rw);
        if (!rw)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for a verify pass's save");
        size_t n_gdn = (size_t)model->n_gdn;
        rw->cap_rows = n_rows;
        rw->gdn_pre = model->host->alloc_aligned(64, n_gdn * model->gdn_state_bytes + 64);
        rw->conv_pre = model->host->alloc_aligned(64, n_gdn * model->conv_state_bytes + 64);
        rw->rows = model->host->alloc_aligned(
            64, n_gdn * layer_floats(model, n_rows) * sizeof(float) + 64);
        seq->rewind = rw;
        model->cache_bytes += rewind_bytes(model, n_rows);
        if (!rw->gdn_pre || !rw->conv_pre || !rw->rows) {
            hybrid_rewind_free(model, seq);
            return splash_err_set(err, SPLASH_ERR_NOMEM,
                                  "out of memory for a verify pass's save (%d rows)", n_rows);
        }
    }
    rw->armed = n_rows;
    rw->n_saved = 0;
    return SPLASH_OK;
}

static float *layer_rows(const struct hybrid_model *model, const struct hybrid_rewind *rw,
                         int32_t slot)
{
    return rw->rows + (size_t)slot * layer_floats(model, rw->cap_rows);
}

void hybrid_rewind_save_conv(struct hybrid_model *model, struct hybrid_seq *seq, int32_t slot,
                             const float *x, int64_t n)
{
    struct hybrid_rewind *rw = seq->rewind;
    size_t cd = (size_t)model->cfg.conv_dim;
    memcpy((char *)rw->conv_pre + (size_t)slot * model->conv_state_bytes,
           (const char *)seq->conv_state + (size_t)slot * model->conv_state_bytes,
           model->conv_state_bytes);
    memcpy(layer_rows(model, rw, slot), x, (size_t)n * cd * sizeof(float));
}

struct copy_task {
    char *dst;
    const char *src;
    size_t n;
};

#define COPY_PIECE (64u << 10)

static void copy_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct copy_task *t = ctx;
    size_t b = (size_t)begin * COPY_PIECE, e = (size_t)end * COPY_PIECE;
    memcpy(t->dst + b, t->src + b, (e < t->n ? e : t->n) - b);
}

void hybrid_rewind_save_states(struct hybrid_model *model, struct hybrid_seq *seq)
{
    struct copy_task t = {.dst = seq->rewind->gdn_pre,
                          .src = seq->gdn_state,
                          .n = (size_t)model->n_gdn * model->gdn_state_bytes};
    hybrid_parallel(model, (int64_t)((t.n + COPY_PIECE - 1) / COPY_PIECE), 4, copy_range, &t);
}

void hybrid_rewind_save_rule(struct hybrid_model *model, struct hybrid_seq *seq, int32_t slot,
                             const float *qkv, const float *g, const float *beta, int64_t n)
{
    struct hybrid_rewind *rw = seq->rewind;
    size_t cd = (size_t)model->cfg.conv_dim, nv = (size_t)model->cfg.n_v_heads;
    size_t cap = (size_t)rw->cap_rows;
    float *rows = layer_rows(model, rw, slot);
    memcpy(rows + cap * cd, qkv, (size_t)n * cd * sizeof(float));
    memcpy(rows + 2 * cap * cd, g, (size_t)n * nv * sizeof(float));
    memcpy(rows + 2 * cap * cd + cap * nv, beta, (size_t)n * nv * sizeof(float));
}

void hybrid_rewind_done(struct hybrid_seq *seq, int64_t pos0, int32_t n_tokens, int ok)
{
    struct hybrid_rewind *rw = seq->rewind;
    if (!rw || !rw->armed)
        return;
    rw->n_saved = ok ? n_tokens : 0;
    rw->pos0 = pos0;
    rw->armed = 0;
}

enum splash_status hybrid_rewind_to(struct hybrid_model *model, struct hybrid_seq *seq,
                                    int32_t n_keep, struct splash_err *err)
{
    struct hybrid_rewind *rw = seq->rewind;
    if (!rw || !rw->n_saved || n_keep < rw->pos0 || n_keep >= rw->pos0 + rw->n_saved)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "the GDN state cannot drop tokens %d..%lld (no verify save covers "
                              "them)",
                              n_keep, (long long)seq->n_tokens - 1);
    const struct hybrid_config *c = &model->cfg;
    int32_t keep = (int32_t)(n_keep - rw->pos0), n_gdn = model->n_gdn;
    int64_t cd = c->conv_dim, inner = (int64_t)c->n_v_heads * c->d_v;
    int32_t kw1 = c->conv_kernel - 1;
    size_t cap = (size_t)rw->cap_rows;
    struct splash_gdn_args *args = calloc((size_t)n_gdn, sizeof *args);
    float *out = hybrid_buffer_get(model, &model->step_arena,
                                   (size_t)n_gdn * (size_t)(keep ? keep : 1) * (size_t)inner *
                                       sizeof(float));
    if (!args || !out) {
        free(args);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory to rewind a verify pass");
    }
    /* the states as the forward found them become the sequence's by a swap of the two
     * blocks (same size and alignment) rather than a copy back; the forward's own states
     * are not needed again */
    void *pre = rw->gdn_pre;
    rw->gdn_pre = seq->gdn_state;
    seq->gdn_state = pre;
    for (int32_t slot = 0; slot < n_gdn; slot++) {
        const float *rows = layer_rows(model, rw, slot);
        const float *pre = (const float *)((const char *)rw->conv_pre +
                                           (size_t)slot * model->conv_state_bytes);
        float *state =
            (float *)((char *)seq->conv_state + (size_t)slot * model->conv_state_bytes);
        /* the conv state is the last kw - 1 rows of (state before, rows kept) */
        for (int32_t j = 0; j < kw1; j++) {
            int32_t r = keep + j - kw1;
            const float *src = r >= 0 ? rows + (size_t)r * (size_t)cd : pre + (kw1 + r) * cd;
            memcpy(state + (int64_t)j * cd, src, (size_t)cd * sizeof(float));
        }
        void *gdn = (char *)seq->gdn_state + (size_t)slot * model->gdn_state_bytes;
        const float *qkv = rows + cap * (size_t)cd;
        args[slot] = (struct splash_gdn_args){
            .n_tokens = keep,
            .n_k_heads = c->n_k_heads,
            .n_v_heads = c->n_v_heads,
            .d_k = c->d_k,
            .d_v = c->d_v,
            .grouped = c->gdn_grouped,
            .chunk = 64,
            .q = qkv,
            .k = qkv + (int64_t)c->n_k_heads * c->d_k,
            .qk_stride = cd,
            .v = qkv + 2 * (int64_t)c->n_k_heads * c->d_k,
            .v_stride = cd,
            .g = rows + 2 * cap * (size_t)cd,
            .beta = rows + 2 * cap * (size_t)cd + cap * (size_t)c->n_v_heads,
            .state = gdn,
            .state_bf16 = model->opts.state_format == SPLASH_STATE_BF16,
            .out = out + (size_t)slot * (size_t)(keep ? keep : 1) * (size_t)inner,
            .out_stride = inner};
    }
    /* the kept rows through every layer's recurrence in one section: each layer its own
     * state and inputs, as a batched step's lanes */
    if (keep > 0)
        model->ssm->recurrent_lanes(model->opts.pool, args, n_gdn);
    free(args);
    rw->n_saved = 0;
    return SPLASH_OK;
}
