/* The matcher: one request's position in its grammar, token by token, and the
 * mask of the tokens it may take next. */
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"

#define HISTORY 64
#define MASK_CACHE 4

enum mode {
    MODE_START, /* first token; OPTIONAL reasoning may open <think> */
    MODE_THINK, /* inside the think block */
    MODE_GRAMMAR,
    MODE_STOPPED,
};

struct snapshot {
    uint32_t set;
    uint8_t mode;
    uint8_t pending; /* continuation bytes owed by the think text */
};

struct splash_grammar_matcher {
    const struct splash_grammar *g;
    const struct splash_grammar_vocab *v;
    struct gram_walk w;
    struct snapshot cur;
    struct snapshot hist[HISTORY];
    size_t n_hist, hist_head;
    /* masks per state, most recent first */
    uint32_t *mask_cache[MASK_CACHE];
    uint32_t mask_key[MASK_CACHE]; /* set id + 1 (0: empty slot) */
    /* scratch */
    uint32_t *state; /* per trie depth */
    uint32_t *path;
    uint32_t *nodes; /* the current set's nodes, copied */
    uint32_t cap_nodes;
};

enum splash_status splash_grammar_matcher_create(const struct splash_grammar *g,
                                                 const struct splash_grammar_vocab *v,
                                                 struct splash_grammar_matcher **out,
                                                 struct splash_err *err)
{
    struct splash_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "grammar matcher: out of memory");
    m->g = g;
    m->v = v;
    if (gram_walk_init(&m->w, g))
        goto nomem;
    m->state = malloc((v->trie.max_depth + 2) * sizeof *m->state);
    m->path = malloc((v->trie.max_depth + 2) * sizeof *m->path);
    for (int i = 0; i < MASK_CACHE; i++)
        if (!(m->mask_cache[i] = malloc(v->n_words * sizeof *m->mask_cache[i])))
            goto nomem;
    if (!m->state || !m->path)
        goto nomem;
    m->cur.set = gram_walk_start(&m->w);
    if (m->w.nomem)
        goto nomem;
    m->cur.mode = g->reasoning == SPLASH_GRAMMAR_REASONING_OPEN ? MODE_THINK : MODE_START;
    *out = m;
    return SPLASH_OK;
nomem:
    splash_grammar_matcher_destroy(m);
    return splash_err_set(err, SPLASH_ERR_NOMEM, "grammar matcher: out of memory");
}

void splash_grammar_matcher_destroy(struct splash_grammar_matcher *m)
{
    if (!m)
        return;
    gram_walk_free(&m->w);
    for (int i = 0; i < MASK_CACHE; i++)
        free(m->mask_cache[i]);
    free(m->state);
    free(m->path);
    free(m->nodes);
    free(m);
}

static int set_has_end(const struct gram_walk *w, uint32_t set)
{
    return w->set_n[set] && w->set_data[w->set_off[set]] == 0;
}

static int is_stop(const struct splash_grammar_vocab *v, int32_t id)
{
    return (v->stop_mask[id / 32] >> (id % 32)) & 1u;
}

static uint8_t utf8_pending(uint8_t pending, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (pending && (c & 0xc0) == 0x80)
            pending--;
        else if ((c & 0xe0) == 0xc0)
            pending = 1;
        else if ((c & 0xf0) == 0xe0)
            pending = 2;
        else if ((c & 0xf8) == 0xf0)
            pending = 3;
        else
            pending = 0;
    }
    return pending;
}

static void push_history(struct splash_grammar_matcher *m)
{
    m->hist[m->hist_head] = m->cur;
    m->hist_head = (m->hist_head + 1) % HISTORY;
    if (m->n_hist < HISTORY)
        m->n_hist++;
}

enum splash_status splash_grammar_matcher_accept_token(struct splash_grammar_matcher *m, int32_t id,
                                                       struct splash_err *err)
{
    const struct splash_grammar_vocab *v = m->v;
    const struct splash_grammar *g = m->g;
    if (id < 0 || (uint32_t)id >= v->n_tokens)
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar: token %d is out of the vocabulary",
                              (int)id);
    struct snapshot next = m->cur;
    switch (m->cur.mode) {
    case MODE_STOPPED:
        return splash_err_set(err, SPLASH_ERR_INVALID, "grammar: token %d after the stop", (int)id);
    case MODE_THINK:
        if (is_stop(v, id))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "grammar: stop token %d inside the think block", (int)id);
        if (id == g->think_close) {
            if (m->cur.pending)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "grammar: </think> inside a UTF-8 character");
            next.mode = MODE_GRAMMAR;
        } else if (v->special[id]) {
            next.pending = 0;
        } else {
            next.pending =
                utf8_pending(m->cur.pending, v->bytes + v->off[id], v->off[id + 1] - v->off[id]);
        }
        break;
    case MODE_START:
        if (g->reasoning == SPLASH_GRAMMAR_REASONING_OPTIONAL && id == g->think_open) {
            next.mode = MODE_THINK;
            next.pending = 0;
            break;
        }
        /* fall through */
    case MODE_GRAMMAR:
        next.mode = MODE_GRAMMAR;
        if (is_stop(v, id)) {
            if (!set_has_end(&m->w, m->cur.set))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "grammar: stop token %d before the output is complete",
                                      (int)id);
            next.mode = MODE_STOPPED;
            break;
        }
        uint32_t s = m->cur.set;
        if (v->special[id]) {
            s = gram_walk_token(&m->w, s, id);
        } else {
            uint32_t end = v->off[id + 1];
            if (end == v->off[id])
                s = 0;
            for (uint32_t k = v->off[id]; k < end && s; k++)
                s = gram_walk_byte(&m->w, s, v->bytes[k]);
        }
        if (m->w.nomem)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "grammar: out of memory");
        if (s == 0)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "grammar: token %d does not continue the output", (int)id);
        next.set = s;
        break;
    }
    push_history(m);
    m->cur = next;
    return SPLASH_OK;
}

size_t splash_grammar_matcher_rollback(struct splash_grammar_matcher *m, size_t n)
{
    size_t done = 0;
    while (done < n && m->n_hist) {
        m->hist_head = (m->hist_head + HISTORY - 1) % HISTORY;
        m->cur = m->hist[m->hist_head];
        m->n_hist--;
        done++;
    }
    return done;
}

int splash_grammar_matcher_is_complete(const struct splash_grammar_matcher *m)
{
    return (m->cur.mode == MODE_GRAMMAR || m->cur.mode == MODE_START) &&
           set_has_end(&m->w, m->cur.set);
}

int splash_grammar_matcher_is_stopped(const struct splash_grammar_matcher *m)
{
    return m->cur.mode == MODE_STOPPED;
}

int splash_grammar_matcher_in_thinking(const struct splash_grammar_matcher *m)
{
    return m->cur.mode == MODE_THINK;
}

int splash_grammar_matcher_thinking_at_char_boundary(const struct splash_grammar_matcher *m)
{
    return m->cur.mode == MODE_THINK && m->cur.pending == 0;
}

size_t splash_grammar_matcher_distance(const struct splash_grammar_matcher *m)
{
    if (m->cur.mode == MODE_THINK)
        return SIZE_MAX;
    if (m->cur.mode == MODE_STOPPED)
        return 0;
    const struct gram_walk *w = &m->w;
    uint32_t n;
    const uint32_t *nodes = gram_walk_set_nodes(w, m->cur.set, &n);
    size_t best = SIZE_MAX;
    for (uint32_t i = 0; i < n; i++) {
        size_t d = 0;
        for (uint32_t node = nodes[i]; node; node = w->node_parent[node])
            d += m->g->min_suffix[w->node_pos[node]];
        if (d < best)
            best = d;
    }
    return best;
}

/* ---- masks -------------------------------------------------------------------------------- */

static void set_bit(uint32_t *mask, int32_t id)
{
    mask[id / 32] |= 1u << (id % 32);
}

/* Walks the trie ranges an entry leaves to the real stack, from set s (the
 * stack alone), setting the bits of the tokens that it takes whole. */
static void walk_rest(struct splash_grammar_matcher *m, const struct gram_entry *e, uint32_t s,
                      uint32_t *mask)
{
    const struct gram_trie *t = &m->v->trie;
    uint32_t *state = m->state;
    uint32_t *path = m->path;
    uint32_t last_parent = UINT32_MAX - 1;
    state[0] = s;
    for (uint32_t r = 0; r < e->n_rest; r++) {
        uint32_t from = e->rest[2 * r], to = e->rest[2 * r + 1];
        uint32_t d = t->depth[from];
        /* the state above the range: along its path from the root */
        if (t->parent[from] != last_parent) {
            last_parent = t->parent[from];
            uint32_t k = d - 1;
            for (uint32_t a = last_parent; a != UINT32_MAX; a = t->parent[a])
                path[--k] = a;
            for (k = 1; k < d && state[k - 1]; k++)
                state[k] = gram_walk_byte(&m->w, state[k - 1], t->byte[path[k - 1]]);
            if (k < d)
                state[d - 1] = 0;
        }
        if (state[d - 1] == 0)
            continue;
        for (uint32_t i = from; i < to;) {
            uint32_t di = t->depth[i];
            uint32_t next = gram_walk_byte(&m->w, state[di - 1], t->byte[i]);
            if (next == 0) {
                i = t->skip[i];
                continue;
            }
            state[di] = next;
            for (uint32_t k = t->tok_off[i]; k < t->tok_off[i + 1]; k++)
                set_bit(mask, t->toks[k]);
            i++;
        }
        /* the range's walk overwrote the states below d - 1: the next range recomputes */
        last_parent = UINT32_MAX - 1;
    }
}

static int grow_nodes(struct splash_grammar_matcher *m, uint32_t n)
{
    if (n <= m->cap_nodes)
        return 0;
    uint32_t *a = realloc(m->nodes, n * sizeof *a);
    if (!a)
        return -1;
    m->nodes = a;
    m->cap_nodes = n;
    return 0;
}

/* The grammar's mask for the current set (stops where it is complete). */
static void grammar_mask(struct splash_grammar_matcher *m, uint32_t *mask)
{
    const struct splash_grammar *g = m->g;
    const struct splash_grammar_vocab *v = m->v;
    struct gram_walk *w = &m->w;
    uint32_t set = m->cur.set;
    /* a recent state: the same mask */
    for (int i = 0; i < MASK_CACHE; i++)
        if (m->mask_key[i] == set + 1) {
            memcpy(mask, m->mask_cache[i], v->n_words * sizeof *mask);
            return;
        }
    memset(mask, 0, v->n_words * sizeof *mask);
    uint32_t n;
    const uint32_t *nodes = gram_walk_set_nodes(w, set, &n);
    if (grow_nodes(m, n + 1))
        return;
    /* copy: the walks below may move the set storage */
    uint32_t *all = m->nodes;
    memcpy(all, nodes, n * sizeof *all);
    int complete = 0;
    /* the stacks one by one: what a set allows is the union of what its stacks
     * allow, each one cache entry (its top alone) plus a walk of the tokens that
     * run past its top's rules */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t node = all[i];
        if (node == 0) {
            complete = 1;
            continue;
        }
        uint32_t pos = w->node_pos[node];
        const struct gram_elem *el = &g->elems[pos];
        if (el->kind == GE_TOKEN) {
            set_bit(mask, (int32_t)el->arg);
            continue;
        }
        const struct gram_entry *e = gram_cache_get(g, v, &pos, 1);
        if (!e)
            continue;
        if (e->bits)
            for (uint32_t k = 0; k < v->n_words; k++)
                mask[k] |= e->bits[k];
        else
            for (uint32_t k = 0; k < e->n_list; k++)
                set_bit(mask, e->list[k]);
        if (e->n_rest) {
            uint32_t one = node;
            walk_rest(m, e, gram_walk_set(w, &one, 1), mask);
        }
    }
    if (complete)
        for (size_t k = 0; k < v->n_stops; k++)
            set_bit(mask, v->stops[k]);
    /* remember it, evicting the oldest */
    uint32_t *slot = m->mask_cache[MASK_CACHE - 1];
    memmove(m->mask_cache + 1, m->mask_cache, (MASK_CACHE - 1) * sizeof *m->mask_cache);
    memmove(m->mask_key + 1, m->mask_key, (MASK_CACHE - 1) * sizeof *m->mask_key);
    m->mask_cache[0] = slot;
    m->mask_key[0] = w->nomem ? 0 : set + 1;
    memcpy(slot, mask, v->n_words * sizeof *mask);
}

void splash_grammar_matcher_fill_mask(struct splash_grammar_matcher *m, uint32_t *mask)
{
    const struct splash_grammar_vocab *v = m->v;
    const struct splash_grammar *g = m->g;
    switch (m->cur.mode) {
    case MODE_STOPPED:
        memset(mask, 0, v->n_words * sizeof *mask);
        return;
    case MODE_THINK:
        memcpy(mask, v->free_mask, v->n_words * sizeof *mask);
        /* a budget's forced end, and the model's, close the block between characters */
        if (m->cur.pending && g->think_close >= 0)
            mask[g->think_close / 32] &= ~(1u << (g->think_close % 32));
        return;
    case MODE_START:
        grammar_mask(m, mask);
        if (g->reasoning == SPLASH_GRAMMAR_REASONING_OPTIONAL && g->think_open >= 0)
            set_bit(mask, g->think_open);
        return;
    case MODE_GRAMMAR:
        grammar_mask(m, mask);
        return;
    }
}
