/* Pre-tokenizer profiles (regex splits, PCRE2 with Unicode properties) and
 * byte-level BPE over each pre-token. */
#include <stdlib.h>
#include <string.h>

#include "server/text/tokenizer/internal.h"

/* ---- profiles ----------------------------------------------------------------- */

/* Qwen2/Qwen3's split as their tokenizer.json states it. */
#define QWEN2_SPLIT                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"                \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Qwen3.5's: combining marks join the letter runs and leave the punctuation runs. */
#define QWEN35_SPLIT                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"        \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Flint's three splits (models.md): digits in runs of up to three, runs of Han
 * and kana, then o200k's pattern (case-aware words keeping their contraction). */
#define FLINT_DIGITS "\\p{N}{1,3}"
#define FLINT_HAN_KANA "[\\p{Han}\\p{Hiragana}\\p{Katakana}]+"
#define O200K_SPLIT                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"                      \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                      \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"                     \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                      \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const struct splash_tok_profile profiles[] = {
    {.name = "qwen2", .nfc = 1, .n_splits = 1, .patterns = {QWEN2_SPLIT}},
    {.name = "qwen35", .nfc = 1, .n_splits = 1, .patterns = {QWEN35_SPLIT}},
    {.name = "flint",
     .nfc = 0,
     .n_splits = 3,
     .patterns = {FLINT_DIGITS, FLINT_HAN_KANA, O200K_SPLIT}},
    /* gpt-oss's o200k_harmony (llama.cpp's "gpt-4o"): o200k's split alone, no normalizer */
    {.name = "gpt-4o", .nfc = 0, .n_splits = 1, .patterns = {O200K_SPLIT}},
};

#define N_PROFILES (sizeof profiles / sizeof profiles[0])

const struct splash_tok_profile *splash_tok_profile_find(const char *name)
{
    for (size_t i = 0; i < N_PROFILES; i++) {
        if (strcmp(profiles[i].name, name) == 0)
            return &profiles[i];
    }
    return NULL;
}

const struct splash_tok_profile *splash_tok_profile_match(int n, const char *const *patterns)
{
    for (size_t i = 0; i < N_PROFILES; i++) {
        const struct splash_tok_profile *p = &profiles[i];
        if (p->n_splits != n)
            continue;
        int same = 1;
        for (int j = 0; j < n && same; j++)
            same = strcmp(p->patterns[j], patterns[j]) == 0;
        if (same)
            return p;
    }
    return NULL;
}

const char *splash_tok_profile_names(void)
{
    return "qwen2, qwen35, flint";
}

enum splash_status splash_tok_regex_compile(struct splash_tokenizer *tok, struct splash_err *err)
{
    const struct splash_tok_profile *p = tok->profile;
    for (int i = 0; i < p->n_splits; i++) {
        int code;
        PCRE2_SIZE at;
        tok->re[i] = pcre2_compile((PCRE2_SPTR)p->patterns[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
        if (!tok->re[i]) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(code, msg, sizeof msg);
            return splash_err_set(err, SPLASH_ERR_INTERNAL,
                                  "pre-tokenizer %s: split %d at %zu: %s", p->name, i, (size_t)at,
                                  (const char *)msg);
        }
        /* without JIT (not built, or no executable memory) matching still works */
        (void)pcre2_jit_compile(tok->re[i], PCRE2_JIT_COMPLETE);
    }
    return SPLASH_OK;
}

/* ---- BPE ---------------------------------------------------------------------- */

static int heap_less(const struct splash_tok_heap_item *a, const struct splash_tok_heap_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct splash_tok_scratch *s, struct splash_tok_heap_item it)
{
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&it, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = it;
}

static struct splash_tok_heap_item heap_pop(struct splash_tok_scratch *s)
{
    struct splash_tok_heap_item top = s->heap[0];
    struct splash_tok_heap_item last = s->heap[--s->heap_n];
    size_t n = s->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!heap_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0)
        s->heap[i] = last;
    return top;
}

/* Queues the merge of the symbol at pos with its successor, if there is one. */
static void push_pair(const struct splash_tokenizer *tok, struct splash_tok_scratch *s,
                      int32_t pos)
{
    if (pos < 0)
        return;
    int32_t next = s->sym_next[pos];
    if (next < 0)
        return;
    struct splash_tok_heap_item it = {.pos = pos, .left = s->sym_id[pos], .right = s->sym_id[next]};
    if (splash_tok_pair_find(tok, it.left, it.right, &it.rank, &it.result))
        heap_push(s, it);
}

static enum splash_status scratch_reserve(struct splash_tok_scratch *s, size_t n,
                                          struct splash_err *err)
{
    if (n <= s->sym_cap)
        return SPLASH_OK;
    size_t cap = s->sym_cap ? s->sym_cap : 64;
    while (cap < n)
        cap *= 2;
    if (cap > INT32_MAX / 4)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "pre-token of %zu bytes is too long", n);
    int32_t *id = realloc(s->sym_id, cap * sizeof *id);
    if (id)
        s->sym_id = id;
    int32_t *prev = realloc(s->sym_prev, cap * sizeof *prev);
    if (prev)
        s->sym_prev = prev;
    int32_t *next = realloc(s->sym_next, cap * sizeof *next);
    if (next)
        s->sym_next = next;
    struct splash_tok_heap_item *heap = realloc(s->heap, 3 * cap * sizeof *heap);
    if (heap)
        s->heap = heap;
    if (!id || !prev || !next || !heap)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for a %zu-byte pre-token", n);
    s->sym_cap = cap;
    s->heap_cap = 3 * cap;
    return SPLASH_OK;
}

enum splash_status splash_tok_bpe(const struct splash_tokenizer *tok, struct splash_tok_scratch *s,
                                  const unsigned char *bytes, size_t len,
                                  struct splash_token_buf *out, struct splash_err *err)
{
    enum splash_status st;
    if (len == 0)
        return SPLASH_OK;
    if (len == 1)
        return splash_tok_buf_push(out, tok->byte_id[bytes[0]], err);
    if ((st = scratch_reserve(s, len, err)))
        return st;

    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++) {
        s->sym_id[i] = tok->byte_id[bytes[i]];
        s->sym_prev[i] = i - 1;
        s->sym_next[i] = i + 1 < n ? i + 1 : -1;
    }
    s->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        push_pair(tok, s, i);

    /* Lowest rank first, leftmost among equals; entries made stale by an
     * earlier merge no longer match their symbols and are dropped. */
    while (s->heap_n > 0) {
        struct splash_tok_heap_item it = heap_pop(s);
        int32_t pos = it.pos, next = s->sym_next[pos];
        if (s->sym_id[pos] != it.left || next < 0 || s->sym_id[next] != it.right)
            continue;
        s->sym_id[pos] = it.result;
        s->sym_id[next] = -1;
        int32_t after = s->sym_next[next];
        s->sym_next[pos] = after;
        if (after >= 0)
            s->sym_prev[after] = pos;
        push_pair(tok, s, s->sym_prev[pos]);
        push_pair(tok, s, pos);
    }
    for (int32_t i = 0; i >= 0; i = s->sym_next[i]) {
        if ((st = splash_tok_buf_push(out, s->sym_id[i], err)))
            return st;
    }
    return SPLASH_OK;
}

/* ---- regex splits --------------------------------------------------------------- */

static int match_at(const struct splash_tokenizer *tok, struct splash_tok_scratch *s, int level,
                    const char *text, size_t len, size_t pos)
{
    int rc = pcre2_match(tok->re[level], (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK,
                         s->md[level], s->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !s->jit_stack) {
        /* A long run of one class can outgrow the JIT's default 32 KiB stack. */
        s->jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        if (!s->mctx)
            s->mctx = pcre2_match_context_create(NULL);
        if (!s->jit_stack || !s->mctx)
            return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
        rc = pcre2_match(tok->re[level], (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK,
                         s->md[level], s->mctx);
    }
    return rc;
}

static enum splash_status split_level(const struct splash_tokenizer *tok,
                                      struct splash_tok_scratch *s, int level, const char *text,
                                      size_t len, splash_tok_piece_fn fn, void *ctx,
                                      struct splash_err *err)
{
    enum splash_status st;
    if (len == 0)
        return SPLASH_OK;
    if (level == tok->profile->n_splits)
        return fn(ctx, text, len, err);

    size_t pos = 0, last = 0;
    while (pos < len) {
        int rc = match_at(tok, s, level, text, len, pos);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return splash_err_set(err, SPLASH_ERR_INTERNAL, "pre-tokenizer %s: split %d: %s",
                                  tok->profile->name, level, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md[level]);
        size_t ms = ov[0], me = ov[1];
        if (ms > last &&
            (st = split_level(tok, s, level + 1, text + last, ms - last, fn, ctx, err)))
            return st;
        if (me > ms) {
            if ((st = split_level(tok, s, level + 1, text + ms, me - ms, fn, ctx, err)))
                return st;
            pos = last = me;
        } else {
            /* an empty match: step over one character, which joins the next gap */
            last = ms;
            pos = ms + 1;
            while (pos < len && ((unsigned char)text[pos] & 0xC0) == 0x80)
                pos++;
        }
    }
    return split_level(tok, s, level + 1, text + last, len - last, fn, ctx, err);
}

enum splash_status splash_tok_split(const struct splash_tokenizer *tok,
                                    struct splash_tok_scratch *s, const char *text, size_t len,
                                    splash_tok_piece_fn fn, void *ctx, struct splash_err *err)
{
    return split_level(tok, s, 0, text, len, fn, ctx, err);
}

struct bpe_sink {
    const struct splash_tokenizer *tok;
    struct splash_tok_scratch *s;
    struct splash_token_buf *out;
};

static enum splash_status bpe_piece(void *ctx, const char *piece, size_t len,
                                    struct splash_err *err)
{
    struct bpe_sink *sink = ctx;
    return splash_tok_bpe(sink->tok, sink->s, (const unsigned char *)piece, len, sink->out, err);
}

enum splash_status splash_tok_pretokenize_bpe(const struct splash_tokenizer *tok,
                                              struct splash_tok_scratch *s, const char *text,
                                              size_t len, struct splash_token_buf *out,
                                              struct splash_err *err)
{
    struct bpe_sink sink = {.tok = tok, .s = s, .out = out};
    return split_level(tok, s, 0, text, len, bpe_piece, &sink, err);
}
