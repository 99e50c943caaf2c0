/* The vocabulary index: every non-special token's bytes in a depth-first trie,
 * built once per tokenizer, and the masks that need no grammar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"
#include "server/text/grammar/mask_impl.h"
#include "server/text/grammar/trie_build.h"
#include "core/host_impl.h"
#include "server/text/tokenizer/tokenizer.h"

/* ---- trie building ------------------------------------------------------------------------ */

void gram_trie_free(struct gram_trie *t)
{
    free(t->byte);
    free(t->depth);
    free(t->skip);
    free(t->parent);
    free(t->tok_off);
    free(t->toks);
    memset(t, 0, sizeof *t);
}

void trie_build_init(struct trie_build *tb)
{
    memset(tb, 0, sizeof *tb);
}

void trie_build_free(struct trie_build *tb)
{
    gram_trie_free(&tb->t);
    memset(tb, 0, sizeof *tb);
}

static int tb_grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int trie_build_node(struct trie_build *tb, uint8_t byte, uint32_t depth)
{
    struct gram_trie *t = &tb->t;
    if (tb_grow((void **)&t->byte, &tb->cap_byte, t->n + 1, 1) ||
        tb_grow((void **)&t->depth, &tb->cap_depth, t->n + 1, sizeof *t->depth) ||
        tb_grow((void **)&t->tok_off, &tb->cap_off, t->n + 2, sizeof *t->tok_off))
        return -1;
    t->byte[t->n] = byte;
    t->depth[t->n] = (uint16_t)depth;
    t->tok_off[t->n] = tb->n_toks;
    t->n++;
    if (depth > t->max_depth)
        t->max_depth = depth;
    return 0;
}

int trie_build_token(struct trie_build *tb, int32_t id)
{
    if (tb_grow((void **)&tb->t.toks, &tb->cap_toks, tb->n_toks + 1, sizeof *tb->t.toks))
        return -1;
    tb->t.toks[tb->n_toks++] = id;
    return 0;
}

int trie_build_finish(struct trie_build *tb, struct gram_trie *out)
{
    struct gram_trie *t = &tb->t;
    t->skip = malloc(((size_t)t->n + 1) * sizeof *t->skip);
    t->parent = malloc(((size_t)t->n + 1) * sizeof *t->parent);
    uint32_t *stack = malloc(((size_t)t->max_depth + 2) * sizeof *stack);
    if (!t->skip || !t->parent || !stack) {
        free(stack);
        return -1;
    }
    if (!t->tok_off && !(t->tok_off = malloc(sizeof *t->tok_off))) {
        free(stack);
        return -1;
    }
    t->tok_off[t->n] = tb->n_toks;
    uint32_t sp = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        while (sp && t->depth[stack[sp - 1]] >= t->depth[i])
            t->skip[stack[--sp]] = i;
        t->parent[i] = sp ? stack[sp - 1] : UINT32_MAX;
        stack[sp++] = i;
    }
    while (sp)
        t->skip[stack[--sp]] = t->n;
    free(stack);
    *out = *t;
    memset(tb, 0, sizeof *tb);
    return 0;
}

/* ---- vocabulary ------------------------------------------------------------------------------ */

struct piece_ref {
    const unsigned char *p;
    uint32_t len;
    int32_t id;
};

static int cmp_piece(const void *a, const void *b)
{
    const struct piece_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

#define GRAM_MAX_PIECE 4096

enum splash_status splash_grammar_vocab_create_raw(size_t n_tokens, const char *const *pieces,
                                                   const size_t *lens, const uint8_t *special,
                                                   const int32_t *stops, size_t n_stops,
                                                   struct splash_grammar_vocab **out,
                                                   struct splash_err *err)
{
    if (n_tokens == 0 || n_tokens > (1u << 30))
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar vocabulary: %zu tokens", n_tokens);
    struct splash_grammar_vocab *v = calloc(1, sizeof *v);
    struct piece_ref *refs = malloc(n_tokens * sizeof *refs);
    struct trie_build tb;
    trie_build_init(&tb);
    if (!v || !refs)
        goto nomem;
    v->n_tokens = (uint32_t)n_tokens;
    v->n_words = (uint32_t)((n_tokens + 31) / 32);
    v->special = calloc(n_tokens, 1);
    v->stop_mask = calloc(v->n_words, sizeof *v->stop_mask);
    v->free_mask = malloc(v->n_words * sizeof *v->free_mask);
    v->stops = malloc((n_stops + 1) * sizeof *v->stops);
    if (!v->special || !v->stop_mask || !v->free_mask || !v->stops)
        goto nomem;
    size_t total = 0;
    for (size_t i = 0; i < n_tokens; i++)
        total += pieces[i] && lens[i] <= GRAM_MAX_PIECE ? lens[i] : 0;
    v->bytes = malloc(total + 1);
    v->off = malloc((n_tokens + 1) * sizeof *v->off);
    if (!v->bytes || !v->off || total > UINT32_MAX)
        goto nomem;
    total = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        v->off[i] = (uint32_t)total;
        if (pieces[i] && lens[i] <= GRAM_MAX_PIECE) {
            memcpy(v->bytes + total, pieces[i], lens[i]);
            total += lens[i];
        }
    }
    v->off[n_tokens] = (uint32_t)total;
    size_t n_refs = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        v->special[i] = special ? (special[i] != 0) : 0;
        if (v->special[i] || !pieces[i] || lens[i] == 0 || lens[i] > GRAM_MAX_PIECE)
            continue;
        refs[n_refs++] =
            (struct piece_ref){(const unsigned char *)pieces[i], (uint32_t)lens[i], (int32_t)i};
    }
    qsort(refs, n_refs, sizeof *refs, cmp_piece);
    /* depth-first layout: a token's new nodes are its bytes past the common prefix
     * with the previous token (sorted order puts a prefix before its extensions) */
    for (size_t i = 0; i < n_refs; i++) {
        uint32_t lcp = 0;
        if (i) {
            uint32_t m = refs[i - 1].len < refs[i].len ? refs[i - 1].len : refs[i].len;
            while (lcp < m && refs[i - 1].p[lcp] == refs[i].p[lcp])
                lcp++;
        }
        for (uint32_t d = lcp; d < refs[i].len; d++)
            if (trie_build_node(&tb, refs[i].p[d], d + 1))
                goto nomem;
        if (trie_build_token(&tb, refs[i].id))
            goto nomem;
    }
    if (trie_build_finish(&tb, &v->trie))
        goto nomem;
    for (uint32_t w = 0; w < v->n_words; w++)
        v->free_mask[w] = UINT32_MAX;
    if (n_tokens % 32)
        v->free_mask[v->n_words - 1] = (1u << (n_tokens % 32)) - 1;
    for (size_t i = 0; i < n_stops; i++) {
        if (stops[i] < 0 || (size_t)stops[i] >= n_tokens)
            continue;
        v->stops[v->n_stops++] = stops[i];
        v->stop_mask[stops[i] / 32] |= 1u << (stops[i] % 32);
        v->free_mask[stops[i] / 32] &= ~(1u << (stops[i] % 32));
    }
    pthread_mutex_init(&v->lock, NULL);
    free(refs);
    *out = v;
    return SPLASH_OK;
nomem:
    trie_build_free(&tb);
    free(refs);
    if (v) {
        gram_trie_free(&v->trie);
        free(v->special);
        free(v->bytes);
        free(v->off);
        free(v->stop_mask);
        free(v->free_mask);
        free(v->stops);
        free(v);
    }
    return splash_err_set(err, SPLASH_ERR_NOMEM, "grammar vocabulary: out of memory");
}

enum splash_status splash_grammar_vocab_create(const struct splash_tokenizer *tok,
                                               const int32_t *stops, size_t n_stops,
                                               struct splash_grammar_vocab **out,
                                               struct splash_err *err)
{
    size_t n = splash_tokenizer_n_tokens(tok);
    const char **pieces = malloc((n + 1) * sizeof *pieces);
    size_t *lens = malloc((n + 1) * sizeof *lens);
    uint8_t *special = malloc(n + 1);
    enum splash_status st;
    if (!pieces || !lens || !special) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "grammar vocabulary: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        int type = splash_tokenizer_token_type(tok, (int32_t)i);
        special[i] = type != SPLASH_TOKEN_NORMAL && type != SPLASH_TOKEN_BYTE;
        pieces[i] = splash_tokenizer_piece(tok, (int32_t)i, 0, &lens[i]);
    }
    st = splash_grammar_vocab_create_raw(n, pieces, lens, special, stops, n_stops, out, err);
out:
    free(pieces);
    free(lens);
    free(special);
    return st;
}

void splash_grammar_vocab_destroy(struct splash_grammar_vocab *v)
{
    if (!v)
        return;
    gram_shared_free(v->shared);
    pthread_mutex_destroy(&v->lock);
    gram_trie_free(&v->trie);
    free(v->special);
    free(v->bytes);
    free(v->off);
    free(v->stop_mask);
    free(v->free_mask);
    free(v->stops);
    free(v);
}

size_t splash_grammar_vocab_n_tokens(const struct splash_grammar_vocab *v)
{
    return v->n_tokens;
}

size_t splash_grammar_mask_words(const struct splash_grammar_vocab *v)
{
    return v->n_words;
}

void splash_grammar_mask_apply(const uint32_t *mask, size_t n_mask_tokens, float *logits,
                               size_t n_logits)
{
    size_t n = n_mask_tokens < n_logits ? n_mask_tokens : n_logits;
    size_t i = 0;
#if defined(__x86_64__)
    if (splash_cpu_features() & SPLASH_CPU_AVX2) {
        gram_mask_apply_avx2(mask, logits, n / 32);
        i = n / 32 * 32;
    }
#endif
    for (; i + 32 <= n; i += 32) {
        uint32_t w = mask[i / 32];
        if (w == UINT32_MAX)
            continue;
        for (size_t k = 0; k < 32; k++)
            if (!((w >> k) & 1u))
                logits[i + k] = -INFINITY;
    }
    for (; i < n; i++)
        if (!((mask[i / 32] >> (i % 32)) & 1u))
            logits[i] = -INFINITY;
    for (; i < n_logits; i++)
        logits[i] = -INFINITY;
}
