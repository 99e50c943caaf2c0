/* A tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json).
 *
 * Only what byte-level BPE with one of our profiles can honour is accepted:
 * a BPE model without byte fallback or affixes, an NFC or absent normalizer,
 * Split pre-tokenizers whose patterns are a profile's followed by ByteLevel
 * without its own regex, and no post-processor that inserts tokens. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/text/tokenizer/internal.h"

/* Messages name the files as a user sees them in the model directory. */
#define TOKENIZER_JSON "tokenizer.json"
#define CONFIG_JSON "tokenizer_config.json"

struct hf_load {
    char path[512];        /* dir/tokenizer.json */
    char config_path[512];
    json_t *root, *config;
    size_t n_tokens;
    const char **tokens;
    int32_t *types;
    size_t n_merges;
    const char **merges;
    char *merge_arena;
};

static const char *json_str_or(json_t *obj, const char *key, const char *dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* A key that must be false, null or absent (or "" for strings). */
static enum splash_status require_off(const struct hf_load *h, json_t *obj, const char *path,
                                      const char *key, struct splash_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v) || json_is_false(v) ||
        (json_is_string(v) && json_string_length(v) == 0))
        return SPLASH_OK;
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s.%s: not supported", TOKENIZER_JSON,
                          path, key);
}

static enum splash_status read_model(struct hf_load *h, struct splash_err *err)
{
    enum splash_status st;
    json_t *model = json_object_get(h->root, "model");
    if (!json_is_object(model))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model: missing", TOKENIZER_JSON);
    const char *type = json_str_or(model, "type", "(missing)");
    if (strcmp(type, "BPE") != 0)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: model.type: '%.40s', only BPE",
                              TOKENIZER_JSON, type);
    if ((st = require_off(h, model, "model", "byte_fallback", err)) ||
        (st = require_off(h, model, "model", "continuing_subword_prefix", err)) ||
        (st = require_off(h, model, "model", "end_of_word_suffix", err)) ||
        (st = require_off(h, model, "model", "dropout", err)) ||
        (st = require_off(h, model, "model", "ignore_merges", err)))
        return st;

    json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(h->root, "added_tokens");
    if (!json_is_object(vocab))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.vocab: missing", TOKENIZER_JSON);
    if (added && !json_is_array(added))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: added_tokens: not an array",
                              TOKENIZER_JSON);

    /* ids run from 0 to the largest the vocabulary or an added token names */
    json_int_t max_id = -1;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= INT32_MAX - 1)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.vocab: '%.40s': bad id",
                                  TOKENIZER_JSON, key);
        if (json_integer_value(v) > max_id)
            max_id = json_integer_value(v);
    }
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX - 1 ||
            !json_is_string(json_object_get(v, "content")))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: added_tokens[%zu]: bad id or "
                                  "content", TOKENIZER_JSON, i);
        if (json_integer_value(id) > max_id)
            max_id = json_integer_value(id);
    }
    if (max_id < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.vocab: empty", TOKENIZER_JSON);
    h->n_tokens = (size_t)max_id + 1;
    h->tokens = calloc(h->n_tokens, sizeof *h->tokens);
    h->types = calloc(h->n_tokens, sizeof *h->types);
    if (!h->tokens || !h->types)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", TOKENIZER_JSON);

    json_object_foreach(vocab, key, v) {
        size_t id = (size_t)json_integer_value(v);
        if (h->tokens[id])
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.vocab: id %zu used twice",
                                  TOKENIZER_JSON, id);
        h->tokens[id] = key;
        h->types[id] = SPLASH_TOKEN_NORMAL;
    }
    json_array_foreach(added, i, v) {
        size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        const char *content = json_string_value(json_object_get(v, "content"));
        static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
        for (size_t k = 0; k < 3; k++) {
            if (json_is_true(json_object_get(v, unsupported[k])))
                return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                      "%s: added_tokens[%zu].%s: not supported", TOKENIZER_JSON, i,
                                      unsupported[k]);
        }
        if (h->tokens[id] && h->types[id] != SPLASH_TOKEN_NORMAL)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: added_tokens[%zu]: id %zu used "
                                  "twice", TOKENIZER_JSON, i, id);
        h->tokens[id] = content;
        h->types[id] = json_is_true(json_object_get(v, "special")) ? SPLASH_TOKEN_CONTROL
                                                                  : SPLASH_TOKEN_USER_DEFINED;
    }
    for (i = 0; i < h->n_tokens; i++) {
        if (!h->tokens[i])
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.vocab: no token has id %zu",
                                  TOKENIZER_JSON, i);
    }

    /* merges: "a b" strings, or [a, b] pairs in newer files */
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.merges: missing", TOKENIZER_JSON);
    h->n_merges = json_array_size(merges);
    size_t arena = 0;
    json_array_foreach(merges, i, v) {
        if (json_is_string(v)) {
            arena += json_string_length(v) + 1;
        } else if (json_is_array(v) && json_array_size(v) == 2 &&
                   json_is_string(json_array_get(v, 0)) && json_is_string(json_array_get(v, 1))) {
            arena += json_string_length(json_array_get(v, 0)) +
                     json_string_length(json_array_get(v, 1)) + 2;
        } else {
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: model.merges[%zu]: not a pair",
                                  TOKENIZER_JSON, i);
        }
    }
    h->merges = calloc(h->n_merges ? h->n_merges : 1, sizeof *h->merges);
    h->merge_arena = malloc(arena ? arena : 1);
    if (!h->merges || !h->merge_arena)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", TOKENIZER_JSON);
    char *p = h->merge_arena;
    json_array_foreach(merges, i, v) {
        h->merges[i] = p;
        if (json_is_string(v)) {
            size_t n = json_string_length(v);
            memcpy(p, json_string_value(v), n + 1);
            p += n + 1;
        } else {
            json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
            size_t na = json_string_length(a), nb = json_string_length(b);
            /* a space inside either part would make the pair ambiguous */
            if (memchr(json_string_value(a), ' ', na) || memchr(json_string_value(b), ' ', nb))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: model.merges[%zu]: part holds a space",
                                      TOKENIZER_JSON, i);
            memcpy(p, json_string_value(a), na);
            p[na] = ' ';
            memcpy(p + na + 1, json_string_value(b), nb + 1);
            p += na + nb + 2;
        }
    }
    return SPLASH_OK;
}

static const struct splash_tok_profile *read_profile(const struct hf_load *h,
                                                     struct splash_err *err)
{
    json_t *norm = json_object_get(h->root, "normalizer");
    int nfc = 0;
    if (norm && !json_is_null(norm)) {
        const char *type = json_str_or(norm, "type", "(missing)");
        if (strcmp(type, "NFC") != 0) {
            splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: normalizer: '%.40s' not supported",
                           TOKENIZER_JSON, type);
            return NULL;
        }
        nfc = 1;
    }

    json_t *pre = json_object_get(h->root, "pre_tokenizer");
    json_t *steps = NULL;
    if (json_is_object(pre) && strcmp(json_str_or(pre, "type", ""), "Sequence") == 0)
        steps = json_object_get(pre, "pretokenizers");
    size_t n = json_array_size(steps);
    if (n < 2 || n > SPLASH_TOK_MAX_SPLITS + 1) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer: not a Sequence of regex Splits and ByteLevel",
                       TOKENIZER_JSON);
        return NULL;
    }
    const char *patterns[SPLASH_TOK_MAX_SPLITS];
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *s = json_array_get(steps, i);
        json_t *pattern = json_object_get(s, "pattern");
        if (strcmp(json_str_or(s, "type", ""), "Split") != 0 ||
            strcmp(json_str_or(s, "behavior", ""), "Isolated") != 0 ||
            json_is_true(json_object_get(s, "invert")) ||
            !json_is_string(json_object_get(pattern, "Regex"))) {
            splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                           "%s: pre_tokenizer.pretokenizers[%zu]: not an Isolated regex Split",
                           TOKENIZER_JSON, i);
            return NULL;
        }
        patterns[i] = json_string_value(json_object_get(pattern, "Regex"));
    }
    json_t *bl = json_array_get(steps, n - 1);
    if (strcmp(json_str_or(bl, "type", ""), "ByteLevel") != 0 ||
        json_is_true(json_object_get(bl, "add_prefix_space")) ||
        json_is_true(json_object_get(bl, "use_regex"))) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer.pretokenizers[%zu]: not ByteLevel without prefix space "
                       "or regex", TOKENIZER_JSON, n - 1);
        return NULL;
    }
    const struct splash_tok_profile *profile = splash_tok_profile_match((int)n - 1, patterns);
    if (!profile) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer: its splits are none of the supported profiles (%s)",
                       TOKENIZER_JSON, splash_tok_profile_names());
        return NULL;
    }
    if (profile->nfc != nfc) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: normalizer: profile %s %s NFC",
                       TOKENIZER_JSON, profile->name, profile->nfc ? "needs" : "has no");
        return NULL;
    }

    json_t *dec = json_object_get(h->root, "decoder");
    if (dec && !json_is_null(dec) && strcmp(json_str_or(dec, "type", ""), "ByteLevel") != 0) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: decoder: '%.40s' not supported",
                       TOKENIZER_JSON, json_str_or(dec, "type", "(missing)"));
        return NULL;
    }
    json_t *post = json_object_get(h->root, "post_processor");
    if (post && !json_is_null(post) && strcmp(json_str_or(post, "type", ""), "ByteLevel") != 0) {
        splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                       "%s: post_processor: '%.40s' inserts tokens automatically, not supported",
                       TOKENIZER_JSON, json_str_or(post, "type", "(missing)"));
        return NULL;
    }
    return profile;
}

/* tokenizer_config.json's bos/eos/pad token: a string, {"content": ...} or null. */
static enum splash_status config_token(const struct hf_load *h, const char *key, int32_t *out,
                                       struct splash_err *err)
{
    *out = -1;
    json_t *v = json_object_get(h->config, key);
    if (json_is_object(v))
        v = json_object_get(v, "content");
    if (!v || json_is_null(v))
        return SPLASH_OK;
    if (!json_is_string(v))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: not a string", CONFIG_JSON,
                              key);
    const char *text = json_string_value(v);
    for (size_t i = 0; i < h->n_tokens; i++) {
        if (h->types[i] != SPLASH_TOKEN_NORMAL && strcmp(h->tokens[i], text) == 0) {
            *out = (int32_t)i;
            return SPLASH_OK;
        }
    }
    json_t *id = json_object_get(json_object_get(json_object_get(h->root, "model"), "vocab"), text);
    if (json_is_integer(id)) {
        *out = (int32_t)json_integer_value(id);
        return SPLASH_OK;
    }
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: '%.40s' is not a token",
                          CONFIG_JSON, key, text);
}

static enum splash_status read_config(struct hf_load *h, struct splash_vocab_spec *spec,
                                      struct splash_err *err)
{
    enum splash_status st;
    json_error_t jerr;
    h->config = json_load_file(h->config_path, 0, &jerr);
    if (!h->config) {
        FILE *f = fopen(h->config_path, "rb");
        if (!f)
            return SPLASH_OK; /* optional */
        fclose(f);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: line %d: %s", CONFIG_JSON,
                              jerr.line, jerr.text);
    }
    static const char *const add_keys[2] = {"add_bos_token", "add_eos_token"};
    for (int i = 0; i < 2; i++) {
        if (json_is_true(json_object_get(h->config, add_keys[i])))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s: automatic %s insertion is not supported", CONFIG_JSON,
                                  add_keys[i], i ? "EOS" : "BOS");
    }
    if ((st = config_token(h, "bos_token", &spec->bos, err)) ||
        (st = config_token(h, "eos_token", &spec->eos, err)) ||
        (st = config_token(h, "pad_token", &spec->pad, err)))
        return st;
    return SPLASH_OK;
}

enum splash_status splash_tokenizer_load_hf(const char *dir, struct splash_tokenizer **out,
                                            struct splash_err *err)
{
    enum splash_status st;
    struct hf_load h = {0};
    struct splash_vocab_spec spec = {0};
    *out = NULL;
    snprintf(h.path, sizeof h.path, "%s/tokenizer.json", dir);
    snprintf(h.config_path, sizeof h.config_path, "%s/tokenizer_config.json", dir);

    json_error_t jerr;
    h.root = json_load_file(h.path, 0, &jerr);
    if (!h.root) {
        FILE *f = fopen(h.path, "rb");
        if (!f)
            return splash_err_set(err, SPLASH_ERR_IO, "%s: cannot open", h.path);
        fclose(f);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: line %d: %s", TOKENIZER_JSON, jerr.line,
                              jerr.text);
    }
    const struct splash_tok_profile *profile = read_profile(&h, err);
    if (!profile) {
        st = SPLASH_ERR_UNSUPPORTED;
        goto out_free;
    }
    if ((st = read_model(&h, err)))
        goto out_free;
    spec.origin = SPLASH_VOCAB_HF;
    spec.source = TOKENIZER_JSON;
    spec.model = "gpt2";
    spec.pre = profile->name;
    spec.n_tokens = h.n_tokens;
    spec.tokens = h.tokens;
    spec.types = h.types;
    spec.n_merges = h.n_merges;
    spec.merges = h.merges;
    spec.bos = spec.eos = spec.pad = -1;
    if ((st = read_config(&h, &spec, err)))
        goto out_free;
    st = splash_tokenizer_create(&spec, out, err);

out_free:
    free(h.merge_arena);
    free(h.merges);
    free(h.types);
    free(h.tokens);
    json_decref(h.config);
    json_decref(h.root);
    return st;
}
