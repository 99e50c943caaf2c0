/* Encoding: UTF-8 check, added tokens, NFC, then the profile's splits and BPE. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "server/text/tokenizer/internal.h"

enum splash_status splash_tok_buf_push(struct splash_token_buf *buf, int32_t id,
                                       struct splash_err *err)
{
    if (buf->n == buf->cap) {
        size_t cap = buf->cap ? 2 * buf->cap : 64;
        int32_t *ids = realloc(buf->ids, cap * sizeof *ids);
        if (!ids)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %zu token ids", cap);
        buf->ids = ids;
        buf->cap = cap;
    }
    buf->ids[buf->n++] = id;
    return SPLASH_OK;
}

void splash_token_buf_free(struct splash_token_buf *buf)
{
    free(buf->ids);
    buf->ids = NULL;
    buf->n = buf->cap = 0;
}

/* Offset of the first byte that does not start a valid UTF-8 character, or len. */
static size_t utf8_invalid_at(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = splash_tok_utf8_seq(s + i, len - i, &cp);
        if (k == 0)
            return i;
        i += k;
    }
    return len;
}

/* Code points below U+0300 neither combine nor compose with a predecessor, so
 * text whose bytes are all below 0xCC (the lead byte of U+0300) is already NFC. */
static int may_change_under_nfc(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)text[i] >= 0xCC)
            return 1;
    }
    return 0;
}

static enum splash_status encode_run(const struct splash_tokenizer *tok,
                                     struct splash_tok_scratch *s, const char *text, size_t len,
                                     struct splash_token_buf *out, struct splash_err *err)
{
    if (len == 0)
        return SPLASH_OK;
    if (!tok->profile->nfc || !may_change_under_nfc(text, len))
        return splash_tok_pretokenize_bpe(tok, s, text, len, out, err);

    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (n < 0)
        return splash_err_set(err,
                              n == UTF8PROC_ERROR_NOMEM ? SPLASH_ERR_NOMEM : SPLASH_ERR_INVALID,
                              "NFC normalization failed: %s", utf8proc_errmsg(n));
    enum splash_status st =
        splash_tok_pretokenize_bpe(tok, s, (const char *)nfc, (size_t)n, out, err);
    free(nfc);
    return st;
}

/* The longest added token allowed here that the text spells at pos, or NULL. */
static const struct splash_tok_special *special_at(const struct splash_tokenizer *tok,
                                                   const char *text, size_t len, size_t pos,
                                                   unsigned flags)
{
    unsigned char f = (unsigned char)text[pos];
    for (uint32_t i = tok->first_start[f]; i < tok->first_start[f + 1]; i++) {
        const struct splash_tok_special *sp = &tok->specials[i];
        if (sp->control && !(flags & SPLASH_TOKENIZE_PARSE_SPECIAL))
            continue;
        if (sp->len <= len - pos && memcmp(text + pos, sp->text, sp->len) == 0)
            return sp;
    }
    return NULL;
}

enum splash_status splash_tok_scratch_init(const struct splash_tokenizer *tok,
                                           struct splash_tok_scratch *s, struct splash_err *err)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < tok->profile->n_splits; i++) {
        s->md[i] = pcre2_match_data_create_from_pattern(tok->re[i], NULL);
        if (!s->md[i]) {
            splash_tok_scratch_free(s);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for regex match data");
        }
    }
    return SPLASH_OK;
}

void splash_tok_scratch_free(struct splash_tok_scratch *s)
{
    for (int i = 0; i < SPLASH_TOK_MAX_SPLITS; i++)
        pcre2_match_data_free(s->md[i]);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit_stack);
    free(s->sym_id);
    free(s->sym_prev);
    free(s->sym_next);
    free(s->heap);
    memset(s, 0, sizeof *s);
}

enum splash_status splash_tokenizer_encode(const struct splash_tokenizer *tok, const char *text,
                                           size_t len, unsigned flags,
                                           struct splash_token_buf *out, struct splash_err *err)
{
    size_t bad = utf8_invalid_at(text, len);
    if (bad < len)
        return splash_err_set(err, SPLASH_ERR_INVALID, "text is not valid UTF-8 at byte %zu", bad);

    struct splash_tok_scratch s;
    size_t n_before = out->n;
    enum splash_status st = splash_tok_scratch_init(tok, &s, err);
    if (st)
        return st;

    size_t run = 0, pos = 0;
    while (pos < len) {
        unsigned char f = (unsigned char)text[pos];
        const struct splash_tok_special *sp = NULL;
        if (tok->first_start[f] != tok->first_start[f + 1])
            sp = special_at(tok, text, len, pos, flags);
        if (!sp) {
            pos++;
            continue;
        }
        if ((st = encode_run(tok, &s, text + run, pos - run, out, err)) ||
            (st = splash_tok_buf_push(out, sp->id, err)))
            goto out_free_scratch;
        pos += sp->len;
        run = pos;
    }
    st = encode_run(tok, &s, text + run, len - run, out, err);

out_free_scratch:
    splash_tok_scratch_free(&s);
    if (st)
        out->n = n_before;
    return st;
}
