/* The mask cache. For a top position (a stack's terminal, with nothing below
 * it), one walk of the vocabulary trie sorts every token into: accepted
 * whatever lies below, rejected whatever lies below, or able to run past the
 * top's rules, which only the real stack decides. The first two become a bitmap
 * or list; the last, whole trie subtrees, which the matcher walks each step
 * from its real stack. A state's mask is the union over its stacks. Rules that
 * loop by tail calls (string bodies, digits, raw text) keep nearly every token
 * in the first two groups, so a step costs an OR and a short walk.
 *
 * Entries live in the grammar, keyed by vocabulary and position; those whose
 * canonical text is short (string bodies, numbers, raw values: the costly
 * walks) are also kept in the vocabulary, keyed by that text, for every grammar
 * to share. */
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"

#define CANON_MAX 8192

struct cache_item {
    const struct splash_grammar_vocab *v;
    uint32_t *tops;
    uint32_t n_tops;
    uint32_t hash;
    struct gram_entry *e;
    int owned; /* else the vocabulary's shared table owns e */
};

struct gram_cache {
    struct cache_item *items;
    uint32_t n, cap;
    uint32_t *ht; /* item index + 1 */
    uint32_t ht_mask;
    struct gram_walk local; /* stacks rooted at nothing, for the precompute walks */
    int local_ok;
};

struct shared_item {
    unsigned char *key;
    size_t len;
    uint32_t hash;
    struct gram_entry *e;
};

struct gram_shared {
    struct shared_item *items;
    uint32_t n, cap;
    uint32_t *ht;
    uint32_t ht_mask;
};

static uint32_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

static void entry_free(struct gram_entry *e)
{
    if (!e)
        return;
    free(e->bits);
    free(e->list);
    free(e->rest);
    free(e);
}

void gram_cache_free(struct gram_cache *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->items[i].owned)
            entry_free(c->items[i].e);
        free(c->items[i].tops);
    }
    free(c->items);
    free(c->ht);
    if (c->local_ok)
        gram_walk_free(&c->local);
    free(c);
}

void gram_shared_free(struct gram_shared *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n; i++) {
        entry_free(s->items[i].e);
        free(s->items[i].key);
    }
    free(s->items);
    free(s->ht);
    free(s);
}

/* ---- the precompute walk ---------------------------------------------------------------- */

struct pre {
    const struct gram_trie *t;
    uint32_t *rest;
    uint32_t n_rest, cap_rest;
    int32_t *acc;
    uint32_t n_acc, cap_acc;
    int nomem;
};

/* Leaves the trie nodes [from, to) to the real stack. */
static void pre_rest(struct pre *p, uint32_t from, uint32_t to)
{
    if (from >= to)
        return;
    if (p->n_rest + 2 > p->cap_rest) {
        uint32_t cap = p->cap_rest ? 2 * p->cap_rest : 64;
        uint32_t *r = realloc(p->rest, cap * sizeof *r);
        if (!r) {
            p->nomem = 1;
            return;
        }
        p->rest = r;
        p->cap_rest = cap;
    }
    p->rest[p->n_rest++] = from;
    p->rest[p->n_rest++] = to;
}

static void pre_accept(struct pre *p, uint32_t node)
{
    const struct gram_trie *t = p->t;
    for (uint32_t k = t->tok_off[node]; k < t->tok_off[node + 1]; k++) {
        if (p->n_acc == p->cap_acc) {
            uint32_t cap = p->cap_acc ? 2 * p->cap_acc : 1024;
            int32_t *a = realloc(p->acc, cap * sizeof *a);
            if (!a) {
                p->nomem = 1;
                return;
            }
            p->acc = a;
            p->cap_acc = cap;
        }
        p->acc[p->n_acc++] = t->toks[k];
    }
}

static int set_has_end(const struct gram_walk *w, uint32_t set)
{
    return w->set_n[set] && w->set_data[w->set_off[set]] == 0;
}

static struct gram_entry *precompute(struct gram_walk *w, const struct splash_grammar_vocab *v,
                                     const uint32_t *tops, uint32_t n_tops)
{
    const struct gram_trie *t = &v->trie;
    struct gram_entry *e = calloc(1, sizeof *e);
    uint32_t *nodes = malloc((n_tops + 1) * sizeof *nodes);
    uint32_t *state = malloc((t->max_depth + 2) * sizeof *state);
    uint8_t *exited = malloc(t->max_depth + 2);
    struct pre p = {.t = t};
    if (!e || !nodes || !state || !exited)
        goto fail;
    for (uint32_t i = 0; i < n_tops; i++)
        nodes[i] = gram_walk_node(w, tops[i], 0);
    state[0] = gram_walk_set(w, nodes, n_tops);
    exited[0] = 0;
    for (uint32_t i = 0; i < t->n && !p.nomem;) {
        uint32_t d = t->depth[i];
        uint32_t prev = state[d - 1];
        uint8_t ex = exited[d - 1] || set_has_end(w, prev);
        uint32_t s = gram_walk_byte(w, prev, t->byte[i]);
        if (w->nomem)
            goto fail;
        if (s == 0) {
            if (ex)
                pre_rest(&p, i, t->skip[i]);
            i = t->skip[i];
            continue;
        }
        pre_accept(&p, i);
        if (w->set_n[s] == 1 && set_has_end(w, s)) {
            /* the rules end here: whatever follows is the real stack's to judge */
            pre_rest(&p, i + 1, t->skip[i]);
            i = t->skip[i];
            continue;
        }
        state[d] = s;
        exited[d] = ex;
        i++;
    }
    if (p.nomem)
        goto fail;
    e->rest = p.rest;
    e->n_rest = p.n_rest / 2;
    /* a bitmap once a list would be larger */
    if ((size_t)p.n_acc * 32 > (size_t)v->n_tokens) {
        e->bits = calloc(v->n_words, sizeof *e->bits);
        if (!e->bits) {
            p.rest = NULL;
            goto fail;
        }
        for (uint32_t k = 0; k < p.n_acc; k++)
            e->bits[p.acc[k] / 32] |= 1u << (p.acc[k] % 32);
        free(p.acc);
    } else {
        e->list = p.acc;
        e->n_list = p.n_acc;
    }
    free(nodes);
    free(state);
    free(exited);
    return e;
fail:
    free(p.rest);
    free(p.acc);
    free(nodes);
    free(state);
    free(exited);
    entry_free(e);
    return NULL;
}

/* ---- tables ------------------------------------------------------------------------------ */

static int cache_rehash(struct gram_cache *c)
{
    uint32_t size = c->ht_mask ? 2 * (c->ht_mask + 1) : 64;
    uint32_t *ht = calloc(size, sizeof *ht);
    if (!ht)
        return -1;
    for (uint32_t i = 0; i < c->n; i++) {
        uint32_t k = c->items[i].hash & (size - 1);
        while (ht[k])
            k = (k + 1) & (size - 1);
        ht[k] = i + 1;
    }
    free(c->ht);
    c->ht = ht;
    c->ht_mask = size - 1;
    return 0;
}

static int shared_rehash(struct gram_shared *s)
{
    uint32_t size = s->ht_mask ? 2 * (s->ht_mask + 1) : 64;
    uint32_t *ht = calloc(size, sizeof *ht);
    if (!ht)
        return -1;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t k = s->items[i].hash & (size - 1);
        while (ht[k])
            k = (k + 1) & (size - 1);
        ht[k] = i + 1;
    }
    free(s->ht);
    s->ht = ht;
    s->ht_mask = size - 1;
    return 0;
}

static struct gram_entry *shared_find(struct gram_shared *s, const unsigned char *key, size_t len,
                                      uint32_t hash)
{
    if (!s || !s->ht)
        return NULL;
    for (uint32_t k = hash & s->ht_mask, i; (i = s->ht[k]); k = (k + 1) & s->ht_mask) {
        struct shared_item *it = &s->items[i - 1];
        if (it->hash == hash && it->len == len && !memcmp(it->key, key, len))
            return it->e;
    }
    return NULL;
}

/* Takes e into the vocabulary's table; returns the entry to use (an earlier
 * equal one wins and e is freed), or NULL when it could not be stored. */
static struct gram_entry *shared_put(struct splash_grammar_vocab *v, const unsigned char *key,
                                     size_t len, uint32_t hash, struct gram_entry *e)
{
    struct gram_entry *got = NULL;
    pthread_mutex_lock(&v->lock);
    if (!v->shared && !(v->shared = calloc(1, sizeof *v->shared)))
        goto out;
    struct gram_shared *s = v->shared;
    if ((got = shared_find(s, key, len, hash))) {
        entry_free(e);
        goto out;
    }
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 32;
        struct shared_item *items = realloc(s->items, cap * sizeof *items);
        if (!items)
            goto out;
        s->items = items;
        s->cap = cap;
    }
    if (2 * (s->n + 1) > s->ht_mask && shared_rehash(s))
        goto out;
    unsigned char *k = malloc(len);
    if (!k)
        goto out;
    memcpy(k, key, len);
    s->items[s->n] = (struct shared_item){k, len, hash, e};
    uint32_t slot = hash & s->ht_mask;
    while (s->ht[slot])
        slot = (slot + 1) & s->ht_mask;
    s->ht[slot] = ++s->n;
    got = e;
out:
    pthread_mutex_unlock(&v->lock);
    return got;
}

const struct gram_entry *gram_cache_get(const struct splash_grammar *cg,
                                        const struct splash_grammar_vocab *cv, const uint32_t *tops,
                                        uint32_t n_tops)
{
    /* the cache is the one mutable part of a grammar and a vocabulary, under their locks */
    struct splash_grammar *g = (struct splash_grammar *)cg;
    struct splash_grammar_vocab *v = (struct splash_grammar_vocab *)cv;
    uint64_t seed = (uint64_t)(uintptr_t)v;
    uint32_t hash = hash_bytes(tops, n_tops * sizeof *tops, seed);
    struct gram_entry *e = NULL;
    pthread_mutex_lock(&g->lock);
    if (!g->cache && !(g->cache = calloc(1, sizeof *g->cache)))
        goto out;
    struct gram_cache *c = g->cache;
    if (c->ht)
        for (uint32_t k = hash & c->ht_mask, i; (i = c->ht[k]); k = (k + 1) & c->ht_mask) {
            struct cache_item *it = &c->items[i - 1];
            if (it->hash == hash && it->v == v && it->n_tops == n_tops &&
                !memcmp(it->tops, tops, n_tops * sizeof *tops)) {
                e = it->e;
                goto out;
            }
        }
    /* a grammar-independent piece another grammar may have computed */
    unsigned char canon[CANON_MAX];
    size_t clen = gram_canonical(g, tops, n_tops, canon, sizeof canon);
    uint32_t chash = clen ? hash_bytes(canon, clen, 0) : 0;
    int owned = 1;
    if (clen) {
        pthread_mutex_lock(&v->lock);
        e = shared_find(v->shared, canon, clen, chash);
        pthread_mutex_unlock(&v->lock);
        owned = 0;
    }
    if (!e) {
        if (!c->local_ok) {
            if (gram_walk_init(&c->local, g))
                goto out;
            c->local_ok = 1;
        }
        e = precompute(&c->local, v, tops, n_tops);
        if (!e)
            goto out;
        if (clen) {
            struct gram_entry *kept = shared_put(v, canon, clen, chash, e);
            if (kept)
                e = kept;
            else
                owned = 1;
        }
    }
    uint32_t *key = malloc((n_tops + 1) * sizeof *key);
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 32;
        struct cache_item *items = realloc(c->items, cap * sizeof *items);
        if (items) {
            c->items = items;
            c->cap = cap;
        }
    }
    if (!key || c->n == c->cap || (2 * (c->n + 1) > c->ht_mask && cache_rehash(c))) {
        /* not kept: the caller uses it once, then it leaks unless owned elsewhere */
        free(key);
        if (owned) {
            entry_free(e);
            e = NULL;
        }
        goto out;
    }
    memcpy(key, tops, n_tops * sizeof *key);
    c->items[c->n] = (struct cache_item){v, key, n_tops, hash, e, owned};
    uint32_t slot = hash & c->ht_mask;
    while (c->ht[slot])
        slot = (slot + 1) & c->ht_mask;
    c->ht[slot] = ++c->n;
out:
    pthread_mutex_unlock(&g->lock);
    return e;
}
