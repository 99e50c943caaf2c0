/* A vocabulary spec from GGUF metadata, read through the host's metadata API. */
#include <stdlib.h>
#include <string.h>

#include "server/text/tokenizer/internal.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

/* An optional token id: -1 when absent. */
static enum splash_status get_id(const struct splash_meta_api *api, const struct splash_meta *m,
                                 const char *source, const char *key, int32_t *out,
                                 struct splash_err *err)
{
    *out = -1;
    if (!api->has(m, key))
        return SPLASH_OK;
    int64_t v;
    enum splash_status st = api->get_i64(m, key, &v, err);
    if (st)
        return st;
    if (v < 0 || v > INT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %lld is not a token id",
                              source, key, (long long)v);
    *out = (int32_t)v;
    return SPLASH_OK;
}

static enum splash_status get_flag(const struct splash_meta_api *api, const struct splash_meta *m,
                                   const char *key, int *out, struct splash_err *err)
{
    *out = 0;
    if (!api->has(m, key))
        return SPLASH_OK;
    return api->get_bool(m, key, out, err);
}

static enum splash_status get_required_str(const struct splash_meta_api *api,
                                           const struct splash_meta *m, const char *source,
                                           const char *key, const char **out,
                                           struct splash_err *err)
{
    if (!api->has(m, key))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: missing", source, key);
    return api->get_str(m, key, out, err);
}

static enum splash_status get_required_len(const struct splash_meta_api *api,
                                           const struct splash_meta *m, const char *source,
                                           const char *key, size_t *out, struct splash_err *err)
{
    if (!api->has(m, key))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: missing", source, key);
    return api->arr_len(m, key, out, err);
}

enum splash_status splash_vocab_spec_from_meta(struct splash_vocab_spec *spec,
                                               const struct splash_meta_api *api,
                                               const struct splash_meta *m,
                                               struct splash_err *err)
{
    enum splash_status st;
    memset(spec, 0, sizeof *spec);
    spec->origin = SPLASH_VOCAB_GGUF;
    const char *path = api->path(m);
    const char *slash = path ? strrchr(path, '/') : NULL;
    spec->source = slash ? slash + 1 : path ? path : "gguf";

    if ((st = get_required_str(api, m, spec->source, KEY_MODEL, &spec->model, err)) ||
        (st = get_required_str(api, m, spec->source, KEY_PRE, &spec->pre, err)))
        return st;

    size_t n_types = 0;
    if ((st = get_required_len(api, m, spec->source, KEY_TOKENS, &spec->n_tokens, err)) ||
        (st = get_required_len(api, m, spec->source, KEY_TYPES, &n_types, err)) ||
        (st = get_required_len(api, m, spec->source, KEY_MERGES, &spec->n_merges, err)))
        return st;
    if (n_types != spec->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu entries for %zu tokens",
                              spec->source, KEY_TYPES, n_types, spec->n_tokens);
    if (spec->n_tokens == 0 || spec->n_tokens >= INT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu tokens", spec->source,
                              KEY_TOKENS, spec->n_tokens);

    const char **tokens = calloc(spec->n_tokens, sizeof *tokens);
    int32_t *types = calloc(spec->n_tokens, sizeof *types);
    const char **merges = calloc(spec->n_merges ? spec->n_merges : 1, sizeof *merges);
    spec->owned[0] = (void *)tokens;
    spec->owned[1] = types;
    spec->owned[2] = (void *)merges;
    if (!tokens || !types || !merges) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory for %zu tokens",
                            spec->source, spec->n_tokens);
        goto out_free;
    }
    for (size_t i = 0; i < spec->n_tokens; i++) {
        int64_t t;
        if ((st = api->arr_str(m, KEY_TOKENS, i, &tokens[i], err)) ||
            (st = api->arr_i64(m, KEY_TYPES, i, &t, err)))
            goto out_free;
        if (t < SPLASH_TOKEN_NORMAL || t > SPLASH_TOKEN_BYTE) {
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: token type %lld",
                                spec->source, KEY_TYPES, i, (long long)t);
            goto out_free;
        }
        types[i] = (int32_t)t;
    }
    for (size_t i = 0; i < spec->n_merges; i++) {
        if ((st = api->arr_str(m, KEY_MERGES, i, &merges[i], err)))
            goto out_free;
    }
    spec->tokens = tokens;
    spec->types = types;
    spec->merges = merges;

    if ((st = get_id(api, m, spec->source, "tokenizer.ggml.bos_token_id", &spec->bos, err)) ||
        (st = get_id(api, m, spec->source, "tokenizer.ggml.eos_token_id", &spec->eos, err)) ||
        (st = get_id(api, m, spec->source, "tokenizer.ggml.padding_token_id", &spec->pad, err)) ||
        (st = get_flag(api, m, "tokenizer.ggml.add_bos_token", &spec->add_bos, err)) ||
        (st = get_flag(api, m, "tokenizer.ggml.add_eos_token", &spec->add_eos, err)))
        goto out_free;
    return SPLASH_OK;

out_free:
    splash_vocab_spec_free(spec);
    return st;
}

void splash_vocab_spec_free(struct splash_vocab_spec *spec)
{
    for (size_t i = 0; i < sizeof spec->owned / sizeof spec->owned[0]; i++) {
        free(spec->owned[i]);
        spec->owned[i] = NULL;
    }
    spec->tokens = NULL;
    spec->types = NULL;
    spec->merges = NULL;
}
