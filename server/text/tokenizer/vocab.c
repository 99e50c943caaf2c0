/* Building a tokenizer from a vocabulary spec: validation, the byte alphabet,
 * token bytes, the merge table and the added-token list. */
#include <stdlib.h>
#include <string.h>

#include "server/text/tokenizer/internal.h"

/* ---- key names for messages ------------------------------------------------ */

struct vocab_keys {
    const char *model, *pre, *tokens, *types, *merges, *bos, *eos, *pad, *add_bos, *add_eos;
};

static const struct vocab_keys gguf_keys = {
    .model = "tokenizer.ggml.model",
    .pre = "tokenizer.ggml.pre",
    .tokens = "tokenizer.ggml.tokens",
    .types = "tokenizer.ggml.token_type",
    .merges = "tokenizer.ggml.merges",
    .bos = "tokenizer.ggml.bos_token_id",
    .eos = "tokenizer.ggml.eos_token_id",
    .pad = "tokenizer.ggml.padding_token_id",
    .add_bos = "tokenizer.ggml.add_bos_token",
    .add_eos = "tokenizer.ggml.add_eos_token",
};

static const struct vocab_keys hf_keys = {
    .model = "model.type",
    .pre = "pre_tokenizer",
    .tokens = "model.vocab",
    .types = "added_tokens",
    .merges = "model.merges",
    .bos = "bos_token",
    .eos = "eos_token",
    .pad = "pad_token",
    .add_bos = "add_bos_token",
    .add_eos = "add_eos_token",
};

/* ---- GPT-2 byte alphabet ---------------------------------------------------- */

/* Bytes that stand for themselves: printable Latin-1 except the soft hyphen.
 * The others take code points 256, 257, ... in byte order. This mapping
 * defines the byte-level BPE format. */
static int byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t splash_tok_byte_to_cp(unsigned char b)
{
    if (byte_is_printable(b))
        return b;
    if (b <= 0x20)
        return 256 + b;
    if (b <= 0xA0)
        return 256 + 33 + (b - 0x7F);
    return 256 + 67; /* 0xAD */
}

int splash_tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t n = cp - 256;
    if (n <= 32)
        return (int)n;
    if (n <= 66)
        return (int)(0x7F + n - 33);
    return n == 67 ? 0xAD : -1;
}

size_t splash_tok_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return k;
}

/* Decodes n bytes of byte-level spelling into raw bytes (at most n of them).
 * Returns the byte count, or -1 when a character is outside the alphabet. */
static long byte_level_decode(const char *src, size_t n, unsigned char *dst)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = splash_tok_utf8_seq(s + i, n - i, &cp);
        if (k == 0)
            return -1;
        int b = splash_tok_cp_to_byte(cp);
        if (b < 0)
            return -1;
        dst[o++] = (unsigned char)b;
        i += k;
    }
    return (long)o;
}

/* ---- a temporary map from token bytes to id, for reading merges ----------- */

struct bytes_map {
    int32_t *slots; /* token ids, -1 when free */
    size_t mask;
};

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

static const char *tok_bytes(const struct splash_tokenizer *tok, int32_t id, size_t *len)
{
    *len = tok->piece_off[id + 1] - tok->piece_off[id];
    return tok->arena + tok->piece_off[id];
}

/* Inserts id unless a token of the same bytes is there; returns that token or -1. */
static int32_t bytes_map_insert(struct bytes_map *m, const struct splash_tokenizer *tok,
                                int32_t id)
{
    size_t n;
    const char *p = tok_bytes(tok, id, &n);
    size_t i = (size_t)hash_bytes(p, n) & m->mask;
    while (m->slots[i] >= 0) {
        size_t n2;
        const char *p2 = tok_bytes(tok, m->slots[i], &n2);
        if (n2 == n && memcmp(p, p2, n) == 0)
            return m->slots[i];
        i = (i + 1) & m->mask;
    }
    m->slots[i] = id;
    return -1;
}

static int32_t bytes_map_find(const struct bytes_map *m, const struct splash_tokenizer *tok,
                              const unsigned char *p, size_t n)
{
    size_t i = (size_t)hash_bytes((const char *)p, n) & m->mask;
    while (m->slots[i] >= 0) {
        size_t n2;
        const char *p2 = tok_bytes(tok, m->slots[i], &n2);
        if (n2 == n && memcmp(p, p2, n) == 0)
            return m->slots[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---- building ----------------------------------------------------------------- */

/* A user-defined token spelled <|...|> is control in all but name: Qwen's files
 * mark their FIM and repository tokens non-special, and matching those in
 * untrusted text would let a user write FIM markup (llama.cpp treats them as
 * control for the same reason). */
static int control_looking(const char *text)
{
    size_t n = strlen(text);
    return n >= 5 && text[0] == '<' && text[1] == '|' && text[n - 2] == '|' && text[n - 1] == '>';
}

static enum splash_status fill_tokens(struct splash_tokenizer *tok,
                                      const struct splash_vocab_spec *spec,
                                      const struct vocab_keys *keys, struct splash_err *err)
{
    size_t total = 0;
    for (size_t i = 0; i < spec->n_tokens; i++) {
        if (!spec->tokens[i])
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: missing", tok->source,
                                  keys->tokens, i);
        total += strlen(spec->tokens[i]);
    }
    tok->arena = malloc(total + 1);
    tok->piece_off = malloc((spec->n_tokens + 1) * sizeof *tok->piece_off);
    tok->types = malloc(spec->n_tokens);
    if (!tok->arena || !tok->piece_off || !tok->types)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory for %zu tokens",
                              tok->source, spec->n_tokens);
    size_t off = 0;
    for (size_t i = 0; i < spec->n_tokens; i++) {
        int32_t type = spec->types[i];
        if (type < SPLASH_TOKEN_NORMAL || type > SPLASH_TOKEN_BYTE)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: token type %d",
                                  tok->source, keys->types, i, (int)type);
        const char *text = spec->tokens[i];
        tok->piece_off[i] = off;
        if (type == SPLASH_TOKEN_NORMAL) {
            long n = byte_level_decode(text, strlen(text), (unsigned char *)tok->arena + off);
            if (n <= 0)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: %s[%zu]: '%.40s' is not spelled in the byte-level "
                                      "alphabet",
                                      tok->source, keys->tokens, i, text);
            off += (size_t)n;
        } else {
            size_t n = strlen(text);
            /* added tokens split the text, so each must be whole characters */
            for (size_t k = 0, step; k < n; k += step) {
                uint32_t cp;
                step = splash_tok_utf8_seq((const unsigned char *)text + k, n - k, &cp);
                if (step == 0)
                    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: not valid UTF-8",
                                          tok->source, keys->tokens, i);
            }
            memcpy(tok->arena + off, text, n);
            off += n;
            if (type == SPLASH_TOKEN_USER_DEFINED && control_looking(text))
                type = SPLASH_TOKEN_CONTROL;
        }
        tok->types[i] = (uint8_t)type;
    }
    tok->piece_off[spec->n_tokens] = off;
    tok->arena[off] = 0;
    return SPLASH_OK;
}

/* Maps normal tokens by their bytes (refusing duplicates) and finds the 256
 * single-byte tokens. */
static enum splash_status map_normal_tokens(struct splash_tokenizer *tok, struct bytes_map *m,
                                            const struct vocab_keys *keys, struct splash_err *err)
{
    m->mask = pow2_at_least(2 * tok->n_tokens) - 1;
    m->slots = malloc((m->mask + 1) * sizeof *m->slots);
    if (!m->slots)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", tok->source);
    memset(m->slots, 0xff, (m->mask + 1) * sizeof *m->slots);
    for (int b = 0; b < 256; b++)
        tok->byte_id[b] = -1;
    for (size_t i = 0; i < tok->n_tokens; i++) {
        if (tok->types[i] != SPLASH_TOKEN_NORMAL)
            continue;
        int32_t dup = bytes_map_insert(m, tok, (int32_t)i);
        if (dup >= 0)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: same bytes as token %d",
                                  tok->source, keys->tokens, i, (int)dup);
        size_t n;
        const char *p = tok_bytes(tok, (int32_t)i, &n);
        if (n == 1)
            tok->byte_id[(unsigned char)p[0]] = (int32_t)i;
    }
    for (int b = 0; b < 256; b++) {
        if (tok->byte_id[b] < 0)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s: no token for byte 0x%02x (byte-level BPE needs all 256)",
                                  tok->source, keys->tokens, b);
    }
    return SPLASH_OK;
}

static enum splash_status fill_merges(struct splash_tokenizer *tok,
                                      const struct splash_vocab_spec *spec,
                                      const struct bytes_map *m, const struct vocab_keys *keys,
                                      struct splash_err *err)
{
    if (spec->n_merges > UINT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu merges", tok->source,
                              keys->merges, spec->n_merges);
    tok->pair_mask = pow2_at_least(2 * spec->n_merges + 1) - 1;
    tok->pairs = malloc((tok->pair_mask + 1) * sizeof *tok->pairs);
    size_t cap = 64;
    unsigned char *buf = malloc(cap);
    if (!tok->pairs || !buf) {
        free(buf);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", tok->source);
    }
    for (size_t i = 0; i <= tok->pair_mask; i++)
        tok->pairs[i].key = SPLASH_TOK_PAIR_EMPTY;

    enum splash_status st = SPLASH_OK;
    for (size_t r = 0; r < spec->n_merges; r++) {
        const char *merge = spec->merges[r];
        const char *space = merge ? strchr(merge, ' ') : NULL;
        if (!space || space == merge || !space[1] || strchr(space + 1, ' ')) {
            st = splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu]: '%.40s' is not 'a b'",
                                tok->source, keys->merges, r, merge ? merge : "(null)");
            goto out_free_buf;
        }
        size_t n = strlen(merge);
        if (n + 1 > cap) {
            cap = n + 1;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", tok->source);
                goto out_free_buf;
            }
            buf = nb;
        }
        /* left and right decode into buf back to back, so buf is also the result */
        long br = -1, bl = byte_level_decode(merge, (size_t)(space - merge), buf);
        if (bl > 0)
            br = byte_level_decode(space + 1, n - (size_t)(space + 1 - merge), buf + bl);
        if (bl <= 0 || br <= 0) {
            st = splash_err_set(err, SPLASH_ERR_INVALID,
                                "%s: %s[%zu]: '%.40s' is not spelled in the byte-level alphabet",
                                tok->source, keys->merges, r, merge);
            goto out_free_buf;
        }
        int32_t a = bytes_map_find(m, tok, buf, (size_t)bl);
        int32_t b = bytes_map_find(m, tok, buf + bl, (size_t)br);
        int32_t c = bytes_map_find(m, tok, buf, (size_t)(bl + br));
        if (a < 0 || b < 0 || c < 0) {
            st = splash_err_set(err, SPLASH_ERR_INVALID,
                                "%s: %s[%zu]: '%.40s' names a token not in the vocabulary",
                                tok->source, keys->merges, r, merge);
            goto out_free_buf;
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t h = key * 0x9E3779B97F4A7C15ull;
        size_t i = (size_t)(h >> 32) & tok->pair_mask;
        while (tok->pairs[i].key != SPLASH_TOK_PAIR_EMPTY && tok->pairs[i].key != key)
            i = (i + 1) & tok->pair_mask;
        if (tok->pairs[i].key == key)
            continue; /* a repeated pair keeps its first (lowest) rank */
        tok->pairs[i].key = key;
        tok->pairs[i].rank = (uint32_t)r;
        tok->pairs[i].result = c;
    }
out_free_buf:
    free(buf);
    return st;
}

static int special_cmp(const void *pa, const void *pb)
{
    const struct splash_tok_special *a = pa, *b = pb;
    unsigned char fa = (unsigned char)a->text[0], fb = (unsigned char)b->text[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static enum splash_status fill_specials(struct splash_tokenizer *tok, struct splash_err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < tok->n_tokens; i++) {
        int t = tok->types[i];
        if ((t == SPLASH_TOKEN_CONTROL || t == SPLASH_TOKEN_USER_DEFINED ||
             t == SPLASH_TOKEN_UNKNOWN) &&
            tok->piece_off[i + 1] > tok->piece_off[i])
            n++;
    }
    tok->specials = calloc(n ? n : 1, sizeof *tok->specials);
    if (!tok->specials)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", tok->source);
    for (size_t i = 0; i < tok->n_tokens; i++) {
        int t = tok->types[i];
        if ((t == SPLASH_TOKEN_CONTROL || t == SPLASH_TOKEN_USER_DEFINED ||
             t == SPLASH_TOKEN_UNKNOWN) &&
            tok->piece_off[i + 1] > tok->piece_off[i]) {
            struct splash_tok_special *sp = &tok->specials[tok->n_specials++];
            sp->text = tok_bytes(tok, (int32_t)i, &sp->len);
            sp->id = (int32_t)i;
            sp->control = t != SPLASH_TOKEN_USER_DEFINED;
        }
    }
    qsort(tok->specials, tok->n_specials, sizeof *tok->specials, special_cmp);
    size_t j = 0;
    for (unsigned b = 0; b <= 256; b++) {
        while (j < tok->n_specials && (unsigned char)tok->specials[j].text[0] < b)
            j++;
        tok->first_start[b] = (uint32_t)j;
    }
    return SPLASH_OK;
}

static enum splash_status check_id(const struct splash_tokenizer *tok, const char *key, int32_t id,
                                   struct splash_err *err)
{
    if (id < -1 || (id >= 0 && (size_t)id >= tok->n_tokens))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %d is not a token (%zu tokens)",
                              tok->source, key, (int)id, tok->n_tokens);
    return SPLASH_OK;
}

enum splash_status splash_tokenizer_create(const struct splash_vocab_spec *spec,
                                           struct splash_tokenizer **out, struct splash_err *err)
{
    const struct vocab_keys *keys = spec->origin == SPLASH_VOCAB_HF ? &hf_keys : &gguf_keys;
    const char *source = spec->source ? spec->source : "vocabulary";
    enum splash_status st;
    *out = NULL;

    if (!spec->model || strcmp(spec->model, "gpt2") != 0)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: '%s', only byte-level BPE (gpt2) is supported", source,
                              keys->model, spec->model ? spec->model : "(missing)");
    if (!spec->pre)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: missing", source, keys->pre);
    const struct splash_tok_profile *profile = splash_tok_profile_find(spec->pre);
    if (!profile)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: unknown pre-tokenizer '%.40s' (supported: %s)", source,
                              keys->pre, spec->pre, splash_tok_profile_names());
    if (spec->add_bos)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: automatic BOS insertion is not supported", source,
                              keys->add_bos);
    if (spec->add_eos)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: automatic EOS insertion is not supported", source,
                              keys->add_eos);
    if (spec->n_tokens == 0 || spec->n_tokens >= INT32_MAX || !spec->tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %zu tokens", source, keys->tokens,
                              spec->n_tokens);
    if (!spec->types)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: missing", source, keys->types);
    if (spec->n_merges && !spec->merges)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: missing", source, keys->merges);

    struct splash_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", source);
    snprintf(tok->source, sizeof tok->source, "%s", source);
    tok->profile = profile;
    tok->n_tokens = spec->n_tokens;
    tok->bos = spec->bos;
    tok->eos = spec->eos;
    tok->pad = spec->pad;

    struct bytes_map map = {0};
    if ((st = check_id(tok, keys->bos, spec->bos, err)) ||
        (st = check_id(tok, keys->eos, spec->eos, err)) ||
        (st = check_id(tok, keys->pad, spec->pad, err)))
        goto out_destroy;
    if ((st = fill_tokens(tok, spec, keys, err)))
        goto out_destroy;
    if ((st = map_normal_tokens(tok, &map, keys, err)))
        goto out_free_map;
    if ((st = fill_merges(tok, spec, &map, keys, err)))
        goto out_free_map;
    if ((st = fill_specials(tok, err)))
        goto out_free_map;
    if ((st = splash_tok_regex_compile(tok, err)))
        goto out_free_map;
    free(map.slots);
    *out = tok;
    return SPLASH_OK;

out_free_map:
    free(map.slots);
out_destroy:
    splash_tokenizer_destroy(tok);
    return st;
}

void splash_tokenizer_destroy(struct splash_tokenizer *tok)
{
    if (!tok)
        return;
    for (int i = 0; i < SPLASH_TOK_MAX_SPLITS; i++)
        pcre2_code_free(tok->re[i]);
    free(tok->specials);
    free(tok->pairs);
    free(tok->types);
    free(tok->piece_off);
    free(tok->arena);
    free(tok);
}

/* ---- accessors ---------------------------------------------------------------- */

size_t splash_tokenizer_n_tokens(const struct splash_tokenizer *tok)
{
    return tok->n_tokens;
}

int32_t splash_tokenizer_bos(const struct splash_tokenizer *tok)
{
    return tok->bos;
}

int32_t splash_tokenizer_eos(const struct splash_tokenizer *tok)
{
    return tok->eos;
}

int32_t splash_tokenizer_pad(const struct splash_tokenizer *tok)
{
    return tok->pad;
}

const char *splash_tokenizer_pre(const struct splash_tokenizer *tok)
{
    return tok->profile->name;
}

int splash_tokenizer_token_type(const struct splash_tokenizer *tok, int32_t id)
{
    if (id < 0 || (size_t)id >= tok->n_tokens)
        return 0;
    return tok->types[id];
}

int32_t splash_tokenizer_find_special(const struct splash_tokenizer *tok, const char *text)
{
    size_t n = strlen(text);
    if (n == 0)
        return -1;
    unsigned char f = (unsigned char)text[0];
    for (uint32_t i = tok->first_start[f]; i < tok->first_start[f + 1]; i++) {
        const struct splash_tok_special *sp = &tok->specials[i];
        if (sp->len == n && memcmp(sp->text, text, n) == 0)
            return sp->id;
    }
    return -1;
}
