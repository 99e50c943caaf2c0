/* Flint's declaration list, the model built over it (host->bind_tensors) and what the
 * model tells the core. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families/common/tensor_decls.h"
#include "families/flint/flint.h"

struct decls {
    splash_decl_emit_fn emit;
    void *ctx;
    int have_model;
};

#define DST(d, member) ((d)->have_model ? (void *)&(member) : NULL)

static void decl(const struct decls *d, int32_t il, const char *name, uint32_t accept,
                 uint32_t flags, int32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
                 uint32_t bind, void *dst)
{
    tensor_decls_emit(d->emit, d->ctx, il, name, accept, flags, n_dims, ne0, ne1, ne2, bind, dst);
}

/* A matrix of n_in inputs and n_out outputs (n_exp experts when > 1), bound as a weight. */
static void weight(const struct decls *d, int32_t il, const char *name, int64_t n_in,
                   int64_t n_out, int64_t n_exp, void *dst)
{
    decl(d, il, name, SPLASH_ACCEPT_LINEAR, 0, n_exp > 1 ? 3 : 2, n_in, n_out, n_exp,
         SPLASH_BIND_WEIGHT, dst);
}

static void floats(const struct decls *d, int32_t il, const char *name, uint32_t accept, int64_t n,
                   void *dst)
{
    decl(d, il, name, accept, 0, 1, n, 1, 1, SPLASH_BIND_FLOATS, dst);
}

enum splash_status flint_declare(const struct splash_host *host, const struct splash_meta *m,
                                 void *model, splash_decl_emit_fn emit, void *ctx,
                                 struct splash_err *err)
{
    struct flint_model *fm = model;
    struct flint_config read;
    const struct flint_config *c = &read;
    if (fm) {
        c = &fm->cfg;
    } else {
        enum splash_status st = flint_config_read(host, m, &read, err);
        if (st)
            return st;
    }
    struct decls d = {.emit = emit, .ctx = ctx, .have_model = fm != NULL};
    int64_t e = c->n_embd, qd = (int64_t)c->n_head * c->head_dim,
            kvd = (int64_t)c->n_head_kv * c->head_dim, x = c->n_expert;
    /* the token table must be of a format: an F32 table (RecursiveSI's int4 GGUF) is
     * refused, as the spec has it */
    decl(&d, -1, "token_embd.weight", SPLASH_ACCEPT_LINEAR, 0, 2, e, c->n_vocab, 1,
         SPLASH_BIND_TENSOR, DST(&d, fm->tok_embd));
    floats(&d, -1, "output_norm.weight", SPLASH_ACCEPT_FLOAT, e, DST(&d, fm->output_norm));
    if (c->tied)
        decl(&d, -1, "token_embd.weight", SPLASH_ACCEPT_LINEAR, SPLASH_DECL_AGAIN, 2, e,
             c->n_vocab, 1, SPLASH_BIND_WEIGHT, DST(&d, fm->output));
    else
        weight(&d, -1, "output.weight", e, c->n_vocab, 1, DST(&d, fm->output));
    for (int32_t il = 0; il < (int32_t)c->n_layers; il++) {
        struct flint_layer *L = fm ? &fm->layers[il] : NULL;
        floats(&d, il, "attn_norm.weight", SPLASH_ACCEPT_FLOAT, e, DST(&d, L->attn_norm));
        weight(&d, il, "attn_q.weight", e, qd, 1, DST(&d, L->wq));
        weight(&d, il, "attn_k.weight", e, kvd, 1, DST(&d, L->wk));
        weight(&d, il, "attn_v.weight", e, kvd, 1, DST(&d, L->wv));
        weight(&d, il, "attn_output.weight", qd, e, 1, DST(&d, L->wo));
        /* F32, as llama.cpp writes them (models.md) */
        floats(&d, il, "attn_sinks.weight", SPLASH_ACCEPT_F32, c->n_head, DST(&d, L->sinks));
        floats(&d, il, "ffn_norm.weight", SPLASH_ACCEPT_FLOAT, e, DST(&d, L->ffn_norm));
        if (il < c->n_dense) {
            weight(&d, il, "ffn_gate.weight", e, c->n_ff, 1, DST(&d, L->gate));
            weight(&d, il, "ffn_up.weight", e, c->n_ff, 1, DST(&d, L->up));
            weight(&d, il, "ffn_down.weight", c->n_ff, e, 1, DST(&d, L->down));
            continue;
        }
        /* the router stays a float, or Q8_0, as quantizers leave it */
        decl(&d, il, "ffn_gate_inp.weight", SPLASH_ACCEPT_FLOAT | SPLASH_ACCEPT_Q8_0, 0, 2, e, x,
             1, SPLASH_BIND_WEIGHT, DST(&d, L->router));
        weight(&d, il, "ffn_gate_exps.weight", e, c->n_ff_exp, x, DST(&d, L->gate_exps));
        weight(&d, il, "ffn_up_exps.weight", e, c->n_ff_exp, x, DST(&d, L->up_exps));
        weight(&d, il, "ffn_down_exps.weight", c->n_ff_exp, e, x, DST(&d, L->down_exps));
        weight(&d, il, "ffn_gate_shexp.weight", e, c->n_ff_shexp, 1, DST(&d, L->gate_shexp));
        weight(&d, il, "ffn_up_shexp.weight", e, c->n_ff_shexp, 1, DST(&d, L->up_shexp));
        weight(&d, il, "ffn_down_shexp.weight", c->n_ff_shexp, e, 1, DST(&d, L->down_shexp));
    }
    return SPLASH_OK;
}

enum splash_status flint_model_create(const struct splash_host *host, const struct splash_meta *m,
                                      const struct splash_model_opts *opts,
                                      struct flint_model **out, struct splash_err *err)
{
    struct flint_model *model = calloc(1, sizeof *model);
    if (!model)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    model->host = host;
    model->k = host->kernels;
    model->meta = m;
    model->opts = *opts;
    enum splash_status st = flint_config_read(host, m, &model->cfg, err);
    if (st)
        goto out_destroy;
    const struct flint_config *c = &model->cfg;
    const char *path = host->meta->path(m);
    if (opts->kv_format < SPLASH_KV_INT8 || opts->kv_format > SPLASH_KV_F32) {
        st = splash_err_set(err, SPLASH_ERR_INVALID, "kv format %d", opts->kv_format);
        goto out_destroy;
    }
    /* server.md: Flint's full layers have no RoPE to stretch, so its native window is its
     * most */
    if (opts->rope_yarn_factor > 1.0 || opts->max_context > c->n_ctx_train) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                            "%s: a context of %lld tokens: Flint serves at most its native %lld "
                            "(its full layers have no RoPE to stretch)",
                            path, (long long)opts->max_context, (long long)c->n_ctx_train);
        goto out_destroy;
    }
    if (c->n_eos == 0) {
        st = splash_err_set(err, SPLASH_ERR_INVALID,
                            "%s: no vocabulary (tokenizer.ggml.tokens) to find Flint's stop "
                            "tokens in", path);
        goto out_destroy;
    }
    model->layers = calloc((size_t)c->n_layers, sizeof *model->layers);
    if (!model->layers) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_destroy;
    }
    if ((st = host->bind_tensors(host, m, flint_declare, model, &model->weight_bytes, err)))
        goto out_destroy;
    model->bound = 1;
    model->max_context = opts->max_context > 0 ? opts->max_context : c->n_ctx_train;
    model->head = (struct step_rows_head){.k = model->k,
                                          .pool = opts->pool,
                                          .norm = model->output_norm,
                                          .eps = c->rms_eps,
                                          .output = model->output,
                                          .n_embd = c->n_embd,
                                          .n_vocab = c->n_vocab};
    model->kv_page_bytes = model->k->kv_page_bytes(opts->kv_format, FLINT_PAGE_TOKENS,
                                                   c->n_head_kv, c->head_dim);
    *out = model;
    return SPLASH_OK;

out_destroy:
    flint_model_destroy(model);
    return st;
}

void flint_model_destroy(struct flint_model *model)
{
    if (!model)
        return;
    if (model->bound)
        model->host->unbind_tensors(model->host, model->meta, flint_declare, model);
    free(model->layers);
    model->host->free_aligned(model->step_arena.p);
    model->host->free_aligned(model->moe_arena.p);
    free(model);
}

void flint_model_info(const struct flint_model *model, struct splash_model_info *info)
{
    const struct flint_config *c = &model->cfg;
    memset(info, 0, sizeof *info);
    info->n_vocab = c->n_vocab;
    info->n_embd = c->n_embd;
    info->n_layers = c->n_layers;
    info->n_ctx_train = c->n_ctx_train;
    info->weight_bytes = model->weight_bytes;
    /* only the full layers' KV grows with the context; a sliding layer's pages are a fixed
     * cost per sequence, like a recurrent state */
    uint64_t n_full = (uint64_t)(c->n_layers - c->n_swa);
    info->kv_bytes_per_token = n_full * model->kv_page_bytes / FLINT_PAGE_TOKENS;
    info->state_bytes_per_seq =
        (uint64_t)c->n_swa * (uint64_t)flint_swa_pages(model) * model->kv_page_bytes;
    info->kv_page_tokens = FLINT_PAGE_TOKENS;
    info->kv_page_bytes = n_full * model->kv_page_bytes;
    info->n_ctx_max = c->n_ctx_train; /* no RoPE scaling: nothing past the native window */
}

void *flint_buffer_get(const struct flint_model *model, struct step_buffer *b, size_t bytes)
{
    return step_buffer_get(model->host, b, bytes);
}

void flint_parallel(const struct flint_model *model, int64_t n, int64_t grain, splash_range_fn fn,
                    void *ctx)
{
    model->host->parallel_for(model->opts.pool, n, grain, fn, ctx);
}
