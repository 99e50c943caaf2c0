/* The flat grammar: building, checking and laying out rules, and the canonical
 * text that lets grammars share mask pieces. */
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"

#define GRAM_DEFAULT_LIMIT (4u << 20)

/* ==== builder ============================================================================ */

void gram_builder_init(struct gram_builder *b)
{
    memset(b, 0, sizeof *b);
    b->limit_elems = GRAM_DEFAULT_LIMIT;
}

void gram_builder_free(struct gram_builder *b)
{
    free(b->elems);
    free(b->alt_start);
    free(b->alt_rule);
    free(b->classes);
    free(b->class_ht);
    memset(b, 0, sizeof *b);
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint32_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > UINT32_MAX / 2)
            return -1;
        c *= 2;
    }
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

uint32_t gram_rule_new(struct gram_builder *b)
{
    return b->n_rules++;
}

static uint32_t class_hash(const struct gram_class *c)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++)
        h = (h ^ c->w[i]) * 0xff51afd7ed558ccdull;
    return (uint32_t)(h >> 32);
}

uint32_t gram_class_add(struct gram_builder *b, const struct gram_class *c)
{
    if (b->nomem)
        return 0;
    if (2 * (b->n_classes + 1) > b->class_ht_mask) {
        uint32_t size = b->class_ht_mask ? 2 * (b->class_ht_mask + 1) : 256;
        uint32_t *ht = malloc((size_t)size * sizeof *ht);
        if (!ht) {
            b->nomem = 1;
            return 0;
        }
        memset(ht, 0xff, (size_t)size * sizeof *ht);
        for (uint32_t i = 0; i < b->n_classes; i++) {
            uint32_t k = class_hash(&b->classes[i]) & (size - 1);
            while (ht[k] != UINT32_MAX)
                k = (k + 1) & (size - 1);
            ht[k] = i;
        }
        free(b->class_ht);
        b->class_ht = ht;
        b->class_ht_mask = size - 1;
    }
    uint32_t k = class_hash(c) & b->class_ht_mask;
    while (b->class_ht[k] != UINT32_MAX) {
        if (!memcmp(&b->classes[b->class_ht[k]], c, sizeof *c))
            return b->class_ht[k];
        k = (k + 1) & b->class_ht_mask;
    }
    if (grow((void **)&b->classes, &b->cap_classes, b->n_classes + 1, sizeof *b->classes)) {
        b->nomem = 1;
        return 0;
    }
    b->classes[b->n_classes] = *c;
    b->class_ht[k] = b->n_classes;
    return b->n_classes++;
}

void gram_alt_add(struct gram_builder *b, uint32_t rule, const struct gram_seq *seq)
{
    if (b->nomem)
        return;
    if (b->n_elems + seq->n + 1 > b->limit_elems ||
        grow((void **)&b->elems, &b->cap_elems, b->n_elems + seq->n + 1, sizeof *b->elems) ||
        grow((void **)&b->alt_start, &b->cap_alts, b->n_alts + 1, sizeof *b->alt_start)) {
        b->nomem = 1;
        return;
    }
    /* alt_rule follows alt_start's capacity */
    uint32_t *ar = realloc(b->alt_rule, (size_t)b->cap_alts * sizeof *ar);
    if (!ar) {
        b->nomem = 1;
        return;
    }
    b->alt_rule = ar;
    if (seq->n)
        memcpy(b->elems + b->n_elems, seq->e, (size_t)seq->n * sizeof *seq->e);
    b->alt_start[b->n_alts] = b->n_elems;
    b->alt_rule[b->n_alts] = rule;
    b->n_alts++;
    b->n_elems += seq->n;
    b->elems[b->n_elems++] = (struct gram_elem){.kind = GE_END, .arg = 0};
}

void gram_seq_free(struct gram_seq *s)
{
    free(s->e);
    memset(s, 0, sizeof *s);
}

void gram_seq_reset(struct gram_seq *s)
{
    s->n = 0;
}

void gram_seq_push(struct gram_builder *b, struct gram_seq *s, enum gram_kind kind, uint32_t arg)
{
    if (b->nomem)
        return;
    if (grow((void **)&s->e, &s->cap, s->n + 1, sizeof *s->e)) {
        b->nomem = 1;
        return;
    }
    s->e[s->n++] = (struct gram_elem){.kind = kind, .arg = arg};
}

void gram_seq_class(struct gram_builder *b, struct gram_seq *s, const struct gram_class *c)
{
    gram_seq_push(b, s, GE_CLASS, gram_class_add(b, c));
}

void gram_seq_byte(struct gram_builder *b, struct gram_seq *s, unsigned char c)
{
    struct gram_class k = {{0}};
    k.w[c >> 6] |= 1ull << (c & 63);
    gram_seq_class(b, s, &k);
}

void gram_seq_lit(struct gram_builder *b, struct gram_seq *s, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        gram_seq_byte(b, s, (unsigned char)text[i]);
}

void gram_seq_ranges(struct gram_builder *b, struct gram_seq *s, const char *pairs)
{
    struct gram_class k = {{0}};
    for (const unsigned char *p = (const unsigned char *)pairs; p[0] && p[1]; p += 2)
        for (unsigned c = p[0]; c <= p[1]; c++)
            k.w[c >> 6] |= 1ull << (c & 63);
    gram_seq_class(b, s, &k);
}

uint32_t gram_rule_lit(struct gram_builder *b, const char *text, size_t len)
{
    struct gram_seq s = {0};
    uint32_t r = gram_rule_new(b);
    gram_seq_lit(b, &s, text, len);
    gram_alt_add(b, r, &s);
    gram_seq_free(&s);
    return r;
}

int gram_builder_from(struct gram_builder *b, const struct splash_grammar *g)
{
    gram_builder_init(b);
    for (uint32_t i = 0; i < g->n_classes; i++)
        if (gram_class_add(b, &g->classes[i]) != i)
            b->nomem = 1;
    b->n_rules = g->n_rules;
    struct gram_seq s = {0};
    for (uint32_t r = 0; r < g->n_rules && !b->nomem; r++)
        for (uint32_t a = 0; a < g->rules[r].n_alts; a++) {
            gram_seq_reset(&s);
            for (uint32_t p = g->alt_start[g->rules[r].first_alt + a]; g->elems[p].kind != GE_END;
                 p++)
                gram_seq_push(b, &s, g->elems[p].kind, g->elems[p].arg);
            gram_alt_add(b, r, &s);
        }
    gram_seq_free(&s);
    return b->nomem ? -1 : 0;
}

/* ==== finalize =========================================================================== */

static uint32_t add_sat(uint32_t a, uint32_t b)
{
    return (a == GRAM_INF || b == GRAM_INF || a + b < a) ? GRAM_INF : a + b;
}

/* Fewest bytes each rule can match (GRAM_INF: it never ends), by fixpoint. */
static void rule_min_len(const struct gram_builder *b, uint32_t *min_len)
{
    for (uint32_t r = 0; r < b->n_rules; r++)
        min_len[r] = GRAM_INF;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t a = 0; a < b->n_alts; a++) {
            uint32_t sum = 0;
            for (uint32_t p = b->alt_start[a]; b->elems[p].kind != GE_END && sum != GRAM_INF; p++)
                sum = add_sat(sum, b->elems[p].kind == GE_REF ? min_len[b->elems[p].arg] : 1);
            if (sum < min_len[b->alt_rule[a]]) {
                min_len[b->alt_rule[a]] = sum;
                changed = 1;
            }
        }
    }
}

/* Left recursion: a rule reaches itself through a prefix that can match nothing.
 * Edges r -> s where s is referenced at a point of r reachable without a byte;
 * a cycle among them is refused. Returns 1 (rule in *out_rule), 0, or -1 (memory). */
static int left_recursive(const struct splash_grammar *g, const uint32_t *min_len,
                          uint32_t *out_rule)
{
    uint32_t n = g->n_rules;
    uint32_t *edge_off = calloc((size_t)n + 1, sizeof *edge_off);
    uint32_t *edges = malloc((size_t)g->n_elems * sizeof *edges + 4);
    uint8_t *color = calloc((size_t)n + 1, 1);
    uint32_t *stack = malloc(((size_t)n + 1) * 2 * sizeof *stack);
    int found = -1;
    if (!edge_off || !edges || !color || !stack)
        goto out;
    uint32_t n_edges = 0;
    for (uint32_t r = 0; r < n; r++) {
        edge_off[r] = n_edges;
        for (uint32_t a = 0; a < g->rules[r].n_alts; a++)
            for (uint32_t p = g->alt_start[g->rules[r].first_alt + a]; g->elems[p].kind == GE_REF;
                 p++) {
                edges[n_edges++] = g->elems[p].arg;
                if (min_len[g->elems[p].arg] != 0)
                    break;
            }
    }
    edge_off[n] = n_edges;
    found = 0;
    for (uint32_t start = 0; start < n && !found; start++) {
        if (color[start])
            continue;
        uint32_t sp = 0;
        stack[sp++] = start;
        stack[sp++] = edge_off[start];
        color[start] = 1;
        while (sp) {
            uint32_t r = stack[sp - 2], e = stack[sp - 1];
            if (e == edge_off[r + 1]) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = e + 1;
            uint32_t s = edges[e];
            if (color[s] == 1) {
                found = 1;
                *out_rule = s;
                break;
            }
            if (color[s] == 0) {
                color[s] = 1;
                stack[sp++] = s;
                stack[sp++] = edge_off[s];
            }
        }
    }
out:
    free(stack);
    free(color);
    free(edges);
    free(edge_off);
    return found;
}

enum splash_status gram_finalize(struct gram_builder *b, uint32_t root, const char *what,
                                 struct splash_grammar **out, struct splash_err *err)
{
    enum splash_status st = SPLASH_ERR_NOMEM;
    struct splash_grammar *g = NULL;
    uint32_t *min_len = NULL, *order = NULL;
    if (b->nomem) {
        if (b->n_elems + 64 > b->limit_elems)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: the grammar is too large",
                                  what);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", what);
    }
    min_len = malloc((size_t)(b->n_rules + 1) * sizeof *min_len);
    order = malloc((size_t)(b->n_alts + 1) * sizeof *order);
    g = calloc(1, sizeof *g);
    if (!min_len || !order || !g)
        goto fail;
    rule_min_len(b, min_len);
    if (root >= b->n_rules || min_len[root] == GRAM_INF) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: no finite output matches it", what);
        goto fail;
    }
    /* keep the alternatives that can end, grouped by rule in insertion order */
    uint32_t n_keep = 0, n_elems = 0;
    uint32_t *count = calloc(b->n_rules + 1, sizeof *count);
    if (!count)
        goto fail;
    for (uint32_t a = 0; a < b->n_alts; a++) {
        uint32_t sum = 0, len = 0;
        for (uint32_t p = b->alt_start[a]; b->elems[p].kind != GE_END; p++, len++)
            sum = add_sat(sum, b->elems[p].kind == GE_REF ? min_len[b->elems[p].arg] : 1);
        if (sum == GRAM_INF) {
            order[a] = UINT32_MAX;
            continue;
        }
        order[a] = len;
        count[b->alt_rule[a]]++;
        n_keep++;
        n_elems += len + 1;
    }
    g->n_rules = b->n_rules;
    g->n_alts = n_keep;
    g->n_elems = n_elems;
    g->n_classes = b->n_classes;
    g->rules = calloc(b->n_rules + 1, sizeof *g->rules);
    g->alt_start = malloc((size_t)(n_keep + 1) * sizeof *g->alt_start);
    g->elems = malloc((size_t)(n_elems + 1) * sizeof *g->elems);
    g->classes = malloc((size_t)(b->n_classes + 1) * sizeof *g->classes);
    g->min_suffix = malloc((size_t)(n_elems + 1) * sizeof *g->min_suffix);
    if (!g->rules || !g->alt_start || !g->elems || !g->classes || !g->min_suffix) {
        free(count);
        goto fail;
    }
    if (b->n_classes)
        memcpy(g->classes, b->classes, (size_t)b->n_classes * sizeof *g->classes);
    uint32_t acc = 0;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        g->rules[r].first_alt = acc;
        g->rules[r].n_alts = 0;
        acc += count[r];
    }
    free(count);
    /* place each kept alternative: walk rules in order, alternatives in insertion order */
    uint32_t *fill = calloc(b->n_rules + 1, sizeof *fill);
    uint32_t *alt_len = malloc((size_t)(n_keep + 1) * sizeof *alt_len);
    uint32_t *alt_src = malloc((size_t)(n_keep + 1) * sizeof *alt_src);
    if (!fill || !alt_len || !alt_src) {
        free(fill);
        free(alt_len);
        free(alt_src);
        goto fail;
    }
    for (uint32_t a = 0; a < b->n_alts; a++) {
        if (order[a] == UINT32_MAX)
            continue;
        uint32_t r = b->alt_rule[a];
        uint32_t slot = g->rules[r].first_alt + fill[r]++;
        alt_src[slot] = b->alt_start[a];
        alt_len[slot] = order[a];
    }
    uint32_t pos = 0;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        g->rules[r].n_alts = fill[r];
        for (uint32_t k = 0; k < fill[r]; k++) {
            uint32_t slot = g->rules[r].first_alt + k;
            g->alt_start[slot] = pos;
            memcpy(g->elems + pos, b->elems + alt_src[slot],
                   (size_t)(alt_len[slot] + 1) * sizeof *g->elems);
            pos += alt_len[slot] + 1;
        }
    }
    free(fill);
    free(alt_len);
    free(alt_src);
    /* suffix lengths, right to left within each alternative */
    for (uint32_t a = 0; a < g->n_alts; a++) {
        uint32_t end = g->alt_start[a];
        while (g->elems[end].kind != GE_END)
            end++;
        uint32_t sum = 0;
        g->min_suffix[end] = 0;
        for (uint32_t p = end; p > g->alt_start[a]; p--) {
            const struct gram_elem *e = &g->elems[p - 1];
            sum = add_sat(sum, e->kind == GE_REF ? min_len[e->arg] : 1);
            g->min_suffix[p - 1] = sum;
        }
    }
    g->root = root;
    g->think_open = g->think_close = -1;
    uint32_t lr;
    int rec = left_recursive(g, min_len, &lr);
    if (rec < 0)
        goto fail;
    if (rec) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                            "%s: a reference cycle that matches no text (rule %u)", what, lr);
        goto fail;
    }
    pthread_mutex_init(&g->lock, NULL);
    free(min_len);
    free(order);
    *out = g;
    return SPLASH_OK;
fail:
    if (st == SPLASH_ERR_NOMEM)
        splash_err_set(err, st, "%s: out of memory", what);
    if (g) {
        free(g->rules);
        free(g->alt_start);
        free(g->elems);
        free(g->classes);
        free(g->min_suffix);
        free(g);
    }
    free(min_len);
    free(order);
    return st;
}

void splash_grammar_destroy(struct splash_grammar *g)
{
    if (!g)
        return;
    gram_cache_free(g->cache);
    pthread_mutex_destroy(&g->lock);
    free(g->rules);
    free(g->alt_start);
    free(g->elems);
    free(g->classes);
    free(g->min_suffix);
    free(g);
}

/* ==== canonical text ===================================================================== */

struct canon {
    unsigned char *buf;
    size_t n, size;
    uint32_t *rules; /* rule ids in discovery order */
    uint32_t n_rules, cap;
};

static int canon_put(struct canon *c, const void *p, size_t n)
{
    if (c->n + n > c->size)
        return -1;
    memcpy(c->buf + c->n, p, n);
    c->n += n;
    return 0;
}

static int canon_rule_id(struct canon *c, uint32_t rule, uint32_t *id)
{
    for (uint32_t i = 0; i < c->n_rules; i++)
        if (c->rules[i] == rule) {
            *id = i;
            return 0;
        }
    if (c->n_rules == c->cap)
        return -1;
    c->rules[c->n_rules] = rule;
    *id = c->n_rules++;
    return 0;
}

/* One alternative's rest from p, GE_END included. */
static int canon_suffix(const struct splash_grammar *g, struct canon *c, uint32_t p)
{
    for (;; p++) {
        const struct gram_elem *e = &g->elems[p];
        unsigned char k = (unsigned char)e->kind;
        if (canon_put(c, &k, 1))
            return -1;
        if (e->kind == GE_END)
            return 0;
        if (e->kind == GE_CLASS) {
            if (canon_put(c, &g->classes[e->arg], sizeof g->classes[e->arg]))
                return -1;
        } else if (e->kind == GE_TOKEN) {
            uint32_t v = e->arg;
            if (canon_put(c, &v, 4))
                return -1;
        } else {
            uint32_t id;
            if (canon_rule_id(c, e->arg, &id) || canon_put(c, &id, 4))
                return -1;
        }
    }
}

size_t gram_canonical(const struct splash_grammar *g, const uint32_t *tops, size_t n_tops,
                      unsigned char *buf, size_t size)
{
    uint32_t rules[256];
    struct canon c = {.buf = buf, .size = size, .rules = rules, .cap = 256};
    for (size_t i = 0; i < n_tops; i++)
        if (canon_suffix(g, &c, tops[i]))
            return 0;
    for (uint32_t i = 0; i < c.n_rules; i++) {
        const struct gram_rule *r = &g->rules[c.rules[i]];
        unsigned char mark = 0xfe;
        if (canon_put(&c, &mark, 1))
            return 0;
        for (uint32_t a = 0; a < r->n_alts; a++)
            if (canon_suffix(g, &c, g->alt_start[r->first_alt + a]))
                return 0;
    }
    return c.n;
}
