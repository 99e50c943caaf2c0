/* The stack walker: interned stack nodes and state sets, and memoized byte
 * transitions between sets (internal.h "walker"). */
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"

static uint32_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

int gram_walk_init(struct gram_walk *w, const struct splash_grammar *g)
{
    memset(w, 0, sizeof *w);
    w->g = g;
    w->cap_nodes = 1024;
    w->node_pos = malloc(w->cap_nodes * sizeof *w->node_pos);
    w->node_parent = malloc(w->cap_nodes * sizeof *w->node_parent);
    w->node_ht_mask = 2047;
    w->node_ht = calloc(w->node_ht_mask + 1, sizeof *w->node_ht);
    w->cap_sets = 256;
    w->set_off = malloc(w->cap_sets * sizeof *w->set_off);
    w->set_n = malloc(w->cap_sets * sizeof *w->set_n);
    w->set_dense = calloc(w->cap_sets, sizeof *w->set_dense);
    w->set_hits = calloc(w->cap_sets, sizeof *w->set_hits);
    w->set_ht_mask = 511;
    w->set_ht = calloc(w->set_ht_mask + 1, sizeof *w->set_ht);
    w->cap_set_data = 1024;
    w->set_data = malloc(w->cap_set_data * sizeof *w->set_data);
    w->tr_mask = 1023;
    w->tr_key = malloc((w->tr_mask + 1) * sizeof *w->tr_key);
    w->tr_val = malloc((w->tr_mask + 1) * sizeof *w->tr_val);
    w->cap_out = 64;
    w->out = malloc(w->cap_out * sizeof *w->out);
    w->seen_mask = 255;
    w->seen = malloc((w->seen_mask + 1) * sizeof *w->seen);
    w->seen_gen = calloc(w->seen_mask + 1, sizeof *w->seen_gen);
    if (!w->node_pos || !w->node_parent || !w->node_ht || !w->set_off || !w->set_n ||
        !w->set_dense || !w->set_hits || !w->set_ht || !w->set_data || !w->tr_key || !w->tr_val ||
        !w->out || !w->seen || !w->seen_gen) {
        gram_walk_free(w);
        return -1;
    }
    memset(w->tr_key, 0xff, (w->tr_mask + 1) * sizeof *w->tr_key);
    /* node 0: the empty stack; set 0: the empty set */
    w->node_pos[0] = UINT32_MAX;
    w->node_parent[0] = 0;
    w->n_nodes = 1;
    w->set_off[0] = 0;
    w->set_n[0] = 0;
    w->n_sets = 1;
    return 0;
}

void gram_walk_free(struct gram_walk *w)
{
    free(w->node_pos);
    free(w->node_parent);
    free(w->node_ht);
    free(w->set_data);
    free(w->set_off);
    free(w->set_n);
    free(w->set_dense);
    free(w->set_hits);
    free(w->dense);
    free(w->set_ht);
    free(w->tr_key);
    free(w->tr_val);
    free(w->out);
    free(w->seen);
    free(w->seen_gen);
    memset(w, 0, sizeof *w);
}

/* ---- nodes ------------------------------------------------------------------------------ */

static uint32_t node_hash(uint32_t pos, uint32_t parent)
{
    return mix64(((uint64_t)pos << 32) | parent);
}

static int node_rehash(struct gram_walk *w)
{
    uint32_t size = 2 * (w->node_ht_mask + 1);
    uint32_t *ht = calloc(size, sizeof *ht);
    if (!ht)
        return -1;
    for (uint32_t i = 1; i < w->n_nodes; i++) {
        uint32_t k = node_hash(w->node_pos[i], w->node_parent[i]) & (size - 1);
        while (ht[k])
            k = (k + 1) & (size - 1);
        ht[k] = i;
    }
    free(w->node_ht);
    w->node_ht = ht;
    w->node_ht_mask = size - 1;
    return 0;
}

uint32_t gram_walk_node(struct gram_walk *w, uint32_t pos, uint32_t parent)
{
    uint32_t k = node_hash(pos, parent) & w->node_ht_mask;
    for (uint32_t id; (id = w->node_ht[k]); k = (k + 1) & w->node_ht_mask)
        if (w->node_pos[id] == pos && w->node_parent[id] == parent)
            return id;
    if (w->n_nodes == w->cap_nodes) {
        uint32_t cap = w->cap_nodes * 2;
        uint32_t *p = realloc(w->node_pos, cap * sizeof *p);
        if (p)
            w->node_pos = p;
        uint32_t *q = realloc(w->node_parent, cap * sizeof *q);
        if (q)
            w->node_parent = q;
        if (!p || !q) {
            w->nomem = 1;
            return 0;
        }
        w->cap_nodes = cap;
    }
    uint32_t id = w->n_nodes++;
    w->node_pos[id] = pos;
    w->node_parent[id] = parent;
    w->node_ht[k] = id;
    if (2 * w->n_nodes > w->node_ht_mask && node_rehash(w))
        w->nomem = 1;
    return id;
}

/* ---- sets -------------------------------------------------------------------------------- */

static uint32_t set_hash(const uint32_t *nodes, uint32_t n)
{
    uint64_t h = n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ nodes[i]) * 0x9e3779b97f4a7c15ull;
    return mix64(h);
}

static int set_rehash(struct gram_walk *w)
{
    uint32_t size = 2 * (w->set_ht_mask + 1);
    uint32_t *ht = calloc(size, sizeof *ht);
    if (!ht)
        return -1;
    for (uint32_t i = 1; i < w->n_sets; i++) {
        uint32_t k = set_hash(w->set_data + w->set_off[i], w->set_n[i]) & (size - 1);
        while (ht[k])
            k = (k + 1) & (size - 1);
        ht[k] = i;
    }
    free(w->set_ht);
    w->set_ht = ht;
    w->set_ht_mask = size - 1;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

uint32_t gram_walk_set(struct gram_walk *w, uint32_t *nodes, uint32_t n)
{
    if (n == 0)
        return 0;
    if (n > 1) {
        qsort(nodes, n, sizeof *nodes, cmp_u32);
        uint32_t k = 1;
        for (uint32_t i = 1; i < n; i++)
            if (nodes[i] != nodes[k - 1])
                nodes[k++] = nodes[i];
        n = k;
    }
    uint32_t h = set_hash(nodes, n);
    uint32_t k = h & w->set_ht_mask;
    for (uint32_t id; (id = w->set_ht[k]); k = (k + 1) & w->set_ht_mask)
        if (w->set_n[id] == n && !memcmp(w->set_data + w->set_off[id], nodes, n * sizeof *nodes))
            return id;
    if (w->n_set_data + n > w->cap_set_data) {
        size_t cap = w->cap_set_data * 2;
        while (cap < w->n_set_data + n)
            cap *= 2;
        uint32_t *d = realloc(w->set_data, cap * sizeof *d);
        if (!d) {
            w->nomem = 1;
            return 0;
        }
        w->set_data = d;
        w->cap_set_data = cap;
    }
    if (w->n_sets == w->cap_sets) {
        uint32_t cap = w->cap_sets * 2;
        uint32_t *o = realloc(w->set_off, cap * sizeof *o);
        if (o)
            w->set_off = o;
        uint32_t *c = realloc(w->set_n, cap * sizeof *c);
        if (c)
            w->set_n = c;
        uint32_t *dn = realloc(w->set_dense, cap * sizeof *dn);
        if (dn)
            w->set_dense = dn;
        uint32_t *h = realloc(w->set_hits, cap * sizeof *h);
        if (h)
            w->set_hits = h;
        if (!o || !c || !dn || !h) {
            w->nomem = 1;
            return 0;
        }
        w->cap_sets = cap;
    }
    uint32_t id = w->n_sets++;
    w->set_dense[id] = 0;
    w->set_hits[id] = 0;
    memcpy(w->set_data + w->n_set_data, nodes, n * sizeof *nodes);
    w->set_off[id] = (uint32_t)w->n_set_data;
    w->set_n[id] = n;
    w->n_set_data += n;
    w->set_ht[k] = id;
    if (2 * w->n_sets > w->set_ht_mask && set_rehash(w))
        w->nomem = 1;
    return id;
}

/* ---- closure ------------------------------------------------------------------------------ */

static void out_push(struct gram_walk *w, uint32_t node)
{
    if (w->n_out == w->cap_out) {
        uint32_t *o = realloc(w->out, 2 * w->cap_out * sizeof *o);
        if (!o) {
            w->nomem = 1;
            return;
        }
        w->out = o;
        w->cap_out *= 2;
    }
    w->out[w->n_out++] = node;
}

/* Marks (pos, parent) seen in this transition; 1 when it already was. */
static int seen_mark(struct gram_walk *w, uint32_t pos, uint32_t parent, uint32_t *count)
{
    uint64_t key = ((uint64_t)pos << 32) | parent;
    if (2 * (*count + 1) > w->seen_mask) {
        uint32_t size = 2 * (w->seen_mask + 1);
        uint64_t *s = malloc(size * sizeof *s);
        uint32_t *gen = calloc(size, sizeof *gen);
        if (!s || !gen) {
            free(s);
            free(gen);
            w->nomem = 1;
            return 1;
        }
        for (uint32_t i = 0; i <= w->seen_mask; i++)
            if (w->seen_gen[i] == w->gen) {
                uint32_t k = mix64(w->seen[i]) & (size - 1);
                while (gen[k] == w->gen)
                    k = (k + 1) & (size - 1);
                s[k] = w->seen[i];
                gen[k] = w->gen;
            }
        free(w->seen);
        free(w->seen_gen);
        w->seen = s;
        w->seen_gen = gen;
        w->seen_mask = size - 1;
    }
    uint32_t k = mix64(key) & w->seen_mask;
    while (w->seen_gen[k] == w->gen) {
        if (w->seen[k] == key)
            return 1;
        k = (k + 1) & w->seen_mask;
    }
    w->seen[k] = key;
    w->seen_gen[k] = w->gen;
    (*count)++;
    return 0;
}

/* Every stack that reaches a byte or token element from position pos under parent. */
static void closure(struct gram_walk *w, uint32_t pos, uint32_t parent, uint32_t *count)
{
    const struct splash_grammar *g = w->g;
    for (;;) {
        if (w->nomem || seen_mark(w, pos, parent, count))
            return;
        const struct gram_elem *e = &g->elems[pos];
        switch (e->kind) {
        case GE_CLASS:
        case GE_TOKEN:
            out_push(w, gram_walk_node(w, pos, parent));
            return;
        case GE_END:
            if (parent == 0) {
                out_push(w, 0);
                return;
            }
            pos = w->node_pos[parent];
            parent = w->node_parent[parent];
            continue;
        default: {
            const struct gram_rule *r = &g->rules[e->arg];
            uint32_t np =
                g->elems[pos + 1].kind == GE_END ? parent : gram_walk_node(w, pos + 1, parent);
            for (uint32_t a = 0; a < r->n_alts; a++)
                closure(w, g->alt_start[r->first_alt + a], np, count);
            return;
        }
        }
    }
}

static void begin(struct gram_walk *w)
{
    w->n_out = 0;
    if (++w->gen == 0) {
        memset(w->seen_gen, 0, (w->seen_mask + 1) * sizeof *w->seen_gen);
        w->gen = 1;
    }
}

uint32_t gram_walk_start(struct gram_walk *w)
{
    const struct gram_rule *r = &w->g->rules[w->g->root];
    uint32_t count = 0;
    begin(w);
    for (uint32_t a = 0; a < r->n_alts; a++)
        closure(w, w->g->alt_start[r->first_alt + a], 0, &count);
    return gram_walk_set(w, w->out, w->n_out);
}

static uint32_t tr_find(const struct gram_walk *w, uint64_t key, uint32_t *slot)
{
    uint32_t k = mix64(key) & w->tr_mask;
    while (w->tr_key[k] != UINT64_MAX) {
        if (w->tr_key[k] == key) {
            *slot = k;
            return 1;
        }
        k = (k + 1) & w->tr_mask;
    }
    *slot = k;
    return 0;
}

static void tr_insert(struct gram_walk *w, uint64_t key, uint32_t val)
{
    if (2 * (w->n_tr + 1) > w->tr_mask) {
        uint32_t size = 2 * (w->tr_mask + 1);
        uint64_t *keys = malloc(size * sizeof *keys);
        uint32_t *vals = malloc(size * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return; /* the memo is only a cache */
        }
        memset(keys, 0xff, size * sizeof *keys);
        for (uint32_t i = 0; i <= w->tr_mask; i++)
            if (w->tr_key[i] != UINT64_MAX) {
                uint32_t k = mix64(w->tr_key[i]) & (size - 1);
                while (keys[k] != UINT64_MAX)
                    k = (k + 1) & (size - 1);
                keys[k] = w->tr_key[i];
                vals[k] = w->tr_val[i];
            }
        free(w->tr_key);
        free(w->tr_val);
        w->tr_key = keys;
        w->tr_val = vals;
        w->tr_mask = size - 1;
    }
    uint32_t slot;
    if (!tr_find(w, key, &slot)) {
        w->tr_key[slot] = key;
        w->tr_val[slot] = val;
        w->n_tr++;
    }
}

/* The set after byte b, computed. */
static uint32_t step_byte(struct gram_walk *w, uint32_t set, unsigned b)
{
    const struct splash_grammar *g = w->g;
    uint32_t count = 0;
    begin(w);
    uint32_t n = w->set_n[set];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t node = w->set_data[w->set_off[set] + i];
        if (node == 0)
            continue;
        uint32_t pos = w->node_pos[node];
        const struct gram_elem *e = &g->elems[pos];
        if (e->kind == GE_CLASS && gram_class_has(&g->classes[e->arg], b))
            closure(w, pos + 1, w->node_parent[node], &count);
    }
    uint32_t next = gram_walk_set(w, w->out, w->n_out);
    return w->nomem ? 0 : next;
}

#define DENSE_AFTER 16 /* lookups before a set gets a direct row */

static uint32_t dense_row(struct gram_walk *w, uint32_t set)
{
    if (w->n_dense == w->cap_dense) {
        size_t cap = w->cap_dense ? 2 * w->cap_dense : 64;
        uint32_t *d = realloc(w->dense, cap * 256 * sizeof *d);
        if (!d)
            return 0;
        w->dense = d;
        w->cap_dense = cap;
    }
    memset(w->dense + w->n_dense * 256, 0xff, 256 * sizeof *w->dense);
    w->set_dense[set] = (uint32_t)++w->n_dense;
    return w->set_dense[set];
}

uint32_t gram_walk_byte(struct gram_walk *w, uint32_t set, unsigned b)
{
    if (set == 0)
        return 0;
    uint32_t row = w->set_dense[set];
    if (!row && ++w->set_hits[set] >= DENSE_AFTER)
        row = dense_row(w, set);
    if (row) {
        uint32_t v = w->dense[(size_t)(row - 1) * 256 + b];
        if (v != UINT32_MAX)
            return v;
        uint64_t key = ((uint64_t)set << 8) | b;
        uint32_t slot;
        uint32_t next = tr_find(w, key, &slot) ? w->tr_val[slot] : step_byte(w, set, b);
        if (!w->nomem)
            w->dense[(size_t)(row - 1) * 256 + b] = next;
        return next;
    }
    uint64_t key = ((uint64_t)set << 8) | b;
    uint32_t slot;
    if (tr_find(w, key, &slot))
        return w->tr_val[slot];
    uint32_t next = step_byte(w, set, b);
    if (!w->nomem)
        tr_insert(w, key, next);
    return next;
}

uint32_t gram_walk_token(struct gram_walk *w, uint32_t set, int32_t id)
{
    const struct splash_grammar *g = w->g;
    uint32_t count = 0;
    begin(w);
    uint32_t n = w->set_n[set];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t node = w->set_data[w->set_off[set] + i];
        if (node == 0)
            continue;
        uint32_t pos = w->node_pos[node];
        const struct gram_elem *e = &g->elems[pos];
        if (e->kind == GE_TOKEN && (int32_t)e->arg == id)
            closure(w, pos + 1, w->node_parent[node], &count);
    }
    return gram_walk_set(w, w->out, w->n_out);
}
