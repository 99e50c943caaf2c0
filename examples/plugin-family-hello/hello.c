/* A third-party family plugin built against the installed headers alone: "hello", a
 * bigram language model (each token's logits are the output matrix times that token's
 * embedding, whatever came before it). It claims GGUF architecture "hello", declares
 * its two tensors once, in one list (`splash model-check` walks it; model_create binds
 * the weights through it with host->bind_tensors), and runs its forward pass on the
 * host's kernels, so `splash serve --plugin-dir .` serves a hello model. Keys:
 * hello.embedding_length, hello.vocab_size, hello.context_length. */
#include <splash/family.h>
#include <splash/host.h>
#include <splash/kernels.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const hello_archs[] = {"hello", NULL};
static const char *const hello_types[] = {"hello_lm", NULL};

struct hello_dims {
    int64_t n_embd, n_vocab, n_ctx;
};

static enum splash_status read_dims(const struct splash_host *host, const struct splash_meta *m,
                                    struct hello_dims *d, struct splash_err *err)
{
    enum splash_status st;
    if ((st = host->meta->get_i64(m, "hello.embedding_length", &d->n_embd, err)) ||
        (st = host->meta->get_i64(m, "hello.vocab_size", &d->n_vocab, err)) ||
        (st = host->meta->get_i64(m, "hello.context_length", &d->n_ctx, err)))
        return st;
    if (d->n_embd < 1 || d->n_embd > 65536 || d->n_vocab < 1 || d->n_vocab > (1 << 24) ||
        d->n_ctx < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "hello.embedding_length, vocab_size or context_length out of range");
    return SPLASH_OK;
}

static enum splash_status hello_check(const struct splash_host *host, const struct splash_meta *m,
                                      struct splash_family_verdict *v, struct splash_err *err)
{
    struct hello_dims d;
    enum splash_status st = read_dims(host, m, &d, err);
    if (st != SPLASH_OK)
        return st;
    v->score = 1;
    snprintf(v->architecture, sizeof v->architecture, "Hello (hello)");
    snprintf(v->summary, sizeof v->summary, "hidden %lld, vocab %lld", (long long)d.n_embd,
             (long long)d.n_vocab);
    return SPLASH_OK;
}

/* ---- the model ---------------------------------------------------------------- */

struct hello_model {
    const struct splash_host *host;
    const struct splash_meta *meta;
    struct splash_pool *pool;
    struct hello_dims d;
    struct splash_tensor_ref embd; /* the token table, rows gathered as stored */
    struct splash_weight *output;
    uint64_t weight_bytes;
};

struct hello_seq {
    int32_t n_tokens; /* a bigram model keeps no state but the length */
};

/* The declaration list: every tensor with its shape, what it may be stored as, and where
 * it goes in the model (model NULL: the file is only being checked). */
static enum splash_status hello_list(const struct splash_host *host, const struct splash_meta *m,
                                     void *model, splash_decl_emit_fn emit, void *ctx,
                                     struct splash_err *err)
{
    struct hello_model *hm = model;
    struct hello_dims d;
    enum splash_status st = read_dims(host, m, &d, err);
    if (st != SPLASH_OK)
        return st;
    struct splash_tensor_decl embd = {.name = "token_embd.weight", .layer = -1, .n_dims = 2,
                                      .ne = {d.n_embd, d.n_vocab, 1, 1},
                                      .accept = SPLASH_ACCEPT_LINEAR,
                                      .bind = SPLASH_BIND_TENSOR, .dst = hm ? &hm->embd : NULL};
    struct splash_tensor_decl out = {.name = "output.weight", .layer = -1, .n_dims = 2,
                                     .ne = {d.n_embd, d.n_vocab, 1, 1},
                                     .accept = SPLASH_ACCEPT_LINEAR,
                                     .bind = SPLASH_BIND_WEIGHT, .dst = hm ? &hm->output : NULL};
    emit(ctx, &embd);
    emit(ctx, &out);
    return SPLASH_OK;
}

static enum splash_status hello_declare(const struct splash_host *host, const struct splash_meta *m,
                                        splash_decl_emit_fn emit, void *ctx, struct splash_err *err)
{
    return hello_list(host, m, NULL, emit, ctx, err);
}

static enum splash_status hello_model_create(const struct splash_host *host,
                                             const struct splash_meta *m,
                                             const struct splash_model_opts *opts, void **model,
                                             struct splash_err *err)
{
    struct hello_model *hm = calloc(1, sizeof *hm);
    if (!hm)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "hello: out of memory");
    hm->host = host;
    hm->meta = m;
    hm->pool = opts->pool;
    enum splash_status st = read_dims(host, m, &hm->d, err);
    if (!st)
        st = host->bind_tensors(host, m, hello_list, hm, &hm->weight_bytes, err);
    if (st) {
        free(hm);
        return st;
    }
    *model = hm;
    return SPLASH_OK;
}

static void hello_model_destroy(void *model)
{
    struct hello_model *hm = model;
    hm->host->unbind_tensors(hm->host, hm->meta, hello_list, hm);
    free(hm);
}

static void hello_model_info(const void *model, struct splash_model_info *info)
{
    const struct hello_model *hm = model;
    info->n_vocab = hm->d.n_vocab;
    info->n_embd = hm->d.n_embd;
    info->n_layers = 1;
    info->n_ctx_train = hm->d.n_ctx;
    info->weight_bytes = hm->weight_bytes;
    info->kv_bytes_per_token = 0;
    info->state_bytes_per_seq = 0;
}

static enum splash_status hello_seq_create(void *model, void **seq, struct splash_err *err)
{
    (void)model;
    struct hello_seq *s = calloc(1, sizeof *s);
    if (!s)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "hello: out of memory for a sequence");
    *seq = s;
    return SPLASH_OK;
}

static void hello_seq_destroy(void *model, void *seq)
{
    (void)model;
    free(seq);
}

static enum splash_status hello_seq_truncate(void *model, void *seq, int32_t n_keep,
                                             struct splash_err *err)
{
    (void)model;
    (void)err;
    struct hello_seq *s = seq;
    if (n_keep < s->n_tokens)
        s->n_tokens = n_keep;
    return SPLASH_OK;
}

/* Each lane's logits: its last token's (or every token's) embedding times the output
 * matrix, one matmul over all the rows the lanes want. */
static enum splash_status hello_forward(void *model, const struct splash_lane *lanes,
                                        int32_t n_lanes, struct splash_err *err)
{
    struct hello_model *hm = model;
    const struct splash_kernels *k = hm->host->kernels;
    int64_t rows = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        if (lanes[l].logits && lanes[l].n_tokens > 0)
            rows += lanes[l].logits_all ? lanes[l].n_tokens : 1;
    float *x = rows ? malloc((size_t)rows * (size_t)hm->d.n_embd * sizeof *x) : NULL;
    float *y = rows ? malloc((size_t)rows * (size_t)hm->d.n_vocab * sizeof *y) : NULL;
    if (rows && (!x || !y)) {
        free(x);
        free(y);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "hello: out of memory for %lld rows",
                              (long long)rows);
    }
    int64_t r = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        for (int32_t t = 0; t < ln->n_tokens; t++)
            if (ln->tokens[t] < 0 || ln->tokens[t] >= hm->d.n_vocab) {
                free(x);
                free(y);
                return splash_err_set(err, SPLASH_ERR_INVALID, "hello: token %d is past the vocabulary",
                                      (int)ln->tokens[t]);
            }
        if (!ln->logits || ln->n_tokens <= 0)
            continue;
        int32_t first = ln->logits_all ? 0 : ln->n_tokens - 1;
        int64_t n = ln->n_tokens - first;
        float *row = x + r * hm->d.n_embd;
        k->embed_rows(hm->embd.t, ln->tokens + first, n, row);
        for (int64_t i = 0; hm->embd.scale != 1.0f && i < n * hm->d.n_embd; i++)
            row[i] *= hm->embd.scale; /* a per-tensor scale stored beside the table */
        r += n;
    }
    if (rows)
        k->matmul(hm->pool, hm->output, x, rows, y);
    r = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_lane *ln = &lanes[l];
        ((struct hello_seq *)ln->seq)->n_tokens = ln->pos0 + ln->n_tokens;
        if (!ln->logits || ln->n_tokens <= 0)
            continue;
        int64_t n = ln->logits_all ? ln->n_tokens : 1;
        for (int64_t i = 0; i < n * hm->d.n_vocab; i++)
            ln->logits[i] = y[r * hm->d.n_vocab + i];
        r += n;
    }
    free(x);
    free(y);
    return SPLASH_OK;
}

static const struct splash_family_plugin hello_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "hello", "0.3",
                                        struct splash_family_plugin),
    .gguf_architectures = hello_archs,
    .model_types = hello_types,
    .check_config = hello_check,
    .declare_tensors = hello_declare,
    .model_create = hello_model_create,
    .model_destroy = hello_model_destroy,
    .model_info = hello_model_info,
    .seq_create = hello_seq_create,
    .seq_destroy = hello_seq_destroy,
    .seq_truncate = hello_seq_truncate,
    .forward = hello_forward,
};

static const struct splash_plugin_header *hello_entry(const struct splash_host *host)
{
    host->log(SPLASH_LOG_DEBUG, "hello", "registered");
    return &hello_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_hello, hello_entry)
