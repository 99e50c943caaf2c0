/* Decoding ids to bytes, whole or streamed a token at a time. */
#include <stdlib.h>
#include <string.h>

#include "server/text/tokenizer/internal.h"

void splash_tok_bytes_free(struct splash_tok_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static enum splash_status bytes_append(struct splash_tok_bytes *b, const void *p, size_t n,
                                       struct splash_err *err)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %zu bytes of text",
                                  cap);
        b->data = data;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return SPLASH_OK;
}

const char *splash_tokenizer_piece(const struct splash_tokenizer *tok, int32_t id,
                                   unsigned flags, size_t *len)
{
    *len = 0;
    if (id < 0 || (size_t)id >= tok->n_tokens)
        return NULL;
    const char *p = tok->arena + tok->piece_off[id];
    switch (tok->types[id]) {
    case SPLASH_TOKEN_NORMAL:
    case SPLASH_TOKEN_USER_DEFINED:
        break;
    case SPLASH_TOKEN_CONTROL:
    case SPLASH_TOKEN_UNKNOWN:
        if (!(flags & SPLASH_DETOK_SPECIAL))
            return p;
        break;
    default: /* unused, byte: nothing a gpt2 vocabulary renders */
        return p;
    }
    *len = tok->piece_off[id + 1] - tok->piece_off[id];
    return p;
}

enum splash_status splash_tokenizer_decode(const struct splash_tokenizer *tok, const int32_t *ids,
                                           size_t n, unsigned flags, struct splash_tok_bytes *out,
                                           struct splash_err *err)
{
    enum splash_status st = bytes_append(out, "", 0, err);
    for (size_t i = 0; i < n && !st; i++) {
        size_t len;
        const char *p = splash_tokenizer_piece(tok, ids[i], flags, &len);
        if (!p)
            return splash_err_set(err, SPLASH_ERR_INVALID, "token id %d at %zu is not in the "
                                  "vocabulary (%zu tokens)", (int)ids[i], i, tok->n_tokens);
        st = bytes_append(out, p, len, err);
    }
    return st;
}

/* ---- streaming ------------------------------------------------------------------ */

void splash_detok_stream_init(struct splash_detok_stream *s, const struct splash_tokenizer *tok,
                              unsigned flags)
{
    memset(s, 0, sizeof *s);
    s->tok = tok;
    s->flags = flags;
}

/* The length a UTF-8 lead byte announces (2..4), or 0 for anything else. */
static size_t lead_len(unsigned char c)
{
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0;
}

/* How many trailing bytes of p[0..n) are an unfinished character: a lead byte
 * followed by fewer continuation bytes than it announces. */
static size_t unfinished_tail(const unsigned char *p, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = p[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        size_t want = lead_len(c);
        return want > back ? back : 0;
    }
    return 0;
}

enum splash_status splash_detok_stream_push(struct splash_detok_stream *s, int32_t id,
                                            struct splash_tok_bytes *out, struct splash_err *err)
{
    size_t len;
    const char *p = splash_tokenizer_piece(s->tok, id, s->flags, &len);
    if (!p)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "token id %d is not in the vocabulary (%zu tokens)", (int)id,
                              s->tok->n_tokens);
    /* joined = held bytes + piece; everything but an unfinished tail goes out,
     * and the tail lies within joined's last three bytes */
    size_t total = s->n_held + len;
    size_t k = total < 3 ? total : 3;
    unsigned char last[3];
    for (size_t j = 0; j < k; j++) {
        size_t t = total - k + j;
        last[j] = t < s->n_held ? s->held[t] : (unsigned char)p[t - s->n_held];
    }
    size_t n_tail = unfinished_tail(last, k);
    unsigned char tail[3];
    memcpy(tail, last + k - n_tail, n_tail);
    size_t emit = total - n_tail;
    enum splash_status st = SPLASH_OK;
    size_t from_held = emit < s->n_held ? emit : s->n_held;
    if ((st = bytes_append(out, s->held, from_held, err)))
        return st;
    if (emit > s->n_held && (st = bytes_append(out, p, emit - s->n_held, err)))
        return st;
    if (emit == 0 && (st = bytes_append(out, "", 0, err)))
        return st;
    memcpy(s->held, tail, n_tail);
    s->n_held = n_tail;
    return SPLASH_OK;
}

enum splash_status splash_detok_stream_flush(struct splash_detok_stream *s,
                                             struct splash_tok_bytes *out, struct splash_err *err)
{
    enum splash_status st = bytes_append(out, s->held, s->n_held, err);
    s->n_held = 0;
    return st;
}
