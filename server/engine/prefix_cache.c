/* A radix tree of restore points over token ids (server/engine/prefix_cache.h). */
#include "server/engine/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

struct node {
    int32_t *label; /* the tokens of the edge from the parent */
    int32_t len;
    int32_t depth;  /* tokens from the root through this node */
    struct node *parent;
    struct node **kids;
    int32_t n_kids, cap_kids;
    struct splash_prefix_point *point;
};

struct splash_prefix_point {
    struct node *node;
    void *seq;
    enum splash_point_class cls;
    uint64_t used; /* the cache's clock when last inserted or hit */
    int copied;    /* the SSD tier holds a copy: it leaves memory without a write */
    double published; /* when it joined the cache (the caller's clock) */
    uint64_t owner;   /* the request that published it, while `running` */
    int running;
    struct splash_prefix_point *prev, *next;
};

struct splash_prefix_cache {
    struct node root;
    struct splash_prefix_point *points; /* every point, newest insert first */
    struct splash_prefix_point *newest_turn;
    uint64_t clock;
    void (*drop)(void *ctx, void *seq);
    void *drop_ctx;
    splash_prefix_spill_fn spill;
    void *spill_ctx;
    struct splash_prefix_stats stats;
};

void splash_prefix_cache_set_spill(struct splash_prefix_cache *c, splash_prefix_spill_fn spill,
                                   void *ctx)
{
    c->spill = spill;
    c->spill_ctx = ctx;
}

/* The tokens from the root to node n (malloc'ed, n->depth of them). */
static int32_t *path_tokens(const struct node *n)
{
    int32_t *t = malloc((size_t)(n->depth ? n->depth : 1) * sizeof *t);
    if (!t)
        return NULL;
    for (const struct node *at = n; at->parent; at = at->parent)
        memcpy(t + at->depth - at->len, at->label, (size_t)at->len * sizeof *t);
    return t;
}

struct splash_prefix_cache *splash_prefix_cache_create(void (*drop)(void *ctx, void *seq),
                                                       void *ctx)
{
    struct splash_prefix_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->drop = drop;
        c->drop_ctx = ctx;
    }
    return c;
}

static void free_tree(struct node *n)
{
    for (int32_t i = 0; i < n->n_kids; i++) {
        free_tree(n->kids[i]);
        free(n->kids[i]);
    }
    free(n->kids);
    free(n->label);
}

void splash_prefix_cache_destroy(struct splash_prefix_cache *c)
{
    if (!c)
        return;
    while (c->points) {
        struct splash_prefix_point *p = c->points;
        c->points = p->next;
        c->drop(c->drop_ctx, p->seq);
        free(p);
    }
    free_tree(&c->root);
    free(c);
}

static struct node *kid_starting(const struct node *n, int32_t token)
{
    for (int32_t i = 0; i < n->n_kids; i++)
        if (n->kids[i]->label[0] == token)
            return n->kids[i];
    return NULL;
}

static int32_t common(const int32_t *a, const int32_t *b, int32_t n)
{
    int32_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Calls visit for each node whose whole path is a prefix of tokens[0..n), root first. */
static struct node *walk(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n,
                         void (*visit)(void *ctx, struct node *nd), void *ctx)
{
    struct node *nd = &c->root;
    while (nd->depth < n) {
        struct node *k = kid_starting(nd, tokens[nd->depth]);
        if (!k || k->len > n - nd->depth ||
            common(k->label, tokens + nd->depth, k->len) < k->len)
            break;
        nd = k;
        if (visit)
            visit(ctx, nd);
    }
    return nd;
}

struct splash_prefix_point *splash_prefix_cache_find(struct splash_prefix_cache *c,
                                                     const int32_t *tokens, int32_t n)
{
    struct node *nd = walk(c, tokens, n, NULL, NULL);
    return nd->depth == n ? nd->point : NULL;
}

struct deepest {
    int (*accept)(void *ctx, int32_t len);
    void *ctx;
    struct splash_prefix_point *best;
};

static void take_deepest(void *ctx, struct node *nd)
{
    struct deepest *d = ctx;
    if (nd->point && (!d->accept || d->accept(d->ctx, nd->depth)))
        d->best = nd->point;
}

struct splash_prefix_point *splash_prefix_cache_lookup(struct splash_prefix_cache *c,
                                                       const int32_t *tokens, int32_t n,
                                                       int (*accept)(void *ctx, int32_t len),
                                                       void *ctx)
{
    struct deepest d = {.accept = accept, .ctx = ctx};
    walk(c, tokens, n, take_deepest, &d);
    c->stats.lookups++;
    if (d.best) {
        c->stats.hits++;
        c->stats.hit_tokens += (uint64_t)d.best->node->depth;
        d.best->used = ++c->clock;
    }
    return d.best;
}

int32_t splash_prefix_cache_peek(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n,
                                 int (*accept)(void *ctx, int32_t len), void *ctx)
{
    struct deepest d = {.accept = accept, .ctx = ctx};
    walk(c, tokens, n, take_deepest, &d);
    return d.best ? d.best->node->depth : 0;
}

static int add_kid(struct node *parent, struct node *kid)
{
    if (parent->n_kids == parent->cap_kids) {
        int32_t cap = parent->cap_kids ? 2 * parent->cap_kids : 2;
        struct node **k = realloc(parent->kids, (size_t)cap * sizeof *k);
        if (!k)
            return -1;
        parent->kids = k;
        parent->cap_kids = cap;
    }
    parent->kids[parent->n_kids++] = kid;
    kid->parent = parent;
    return 0;
}

static void remove_kid(struct node *parent, struct node *kid)
{
    for (int32_t i = 0; i < parent->n_kids; i++)
        if (parent->kids[i] == kid) {
            parent->kids[i] = parent->kids[--parent->n_kids];
            return;
        }
}

static struct node *new_node(const int32_t *label, int32_t len, int32_t depth)
{
    struct node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->label = malloc((size_t)len * sizeof *n->label);
    if (!n->label) {
        free(n);
        return NULL;
    }
    memcpy(n->label, label, (size_t)len * sizeof *label);
    n->len = len;
    n->depth = depth;
    return n;
}

/* Splits k's edge after m tokens; returns the new node in between. */
static struct node *split(struct node *k, int32_t m)
{
    struct node *parent = k->parent;
    struct node *mid = new_node(k->label, m, parent->depth + m);
    int32_t *rest = malloc((size_t)(k->len - m) * sizeof *rest);
    if (!mid || !rest) {
        if (mid)
            free(mid->label);
        free(mid);
        free(rest);
        return NULL;
    }
    memcpy(rest, k->label + m, (size_t)(k->len - m) * sizeof *rest);
    if (add_kid(mid, k)) {
        free(mid->label);
        free(mid);
        free(rest);
        return NULL;
    }
    for (int32_t i = 0; i < parent->n_kids; i++)
        if (parent->kids[i] == k)
            parent->kids[i] = mid;
    mid->parent = parent;
    free(k->label);
    k->label = rest;
    k->len -= m;
    return mid;
}

static struct node *node_at(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n)
{
    struct node *nd = walk(c, tokens, n, NULL, NULL);
    if (nd->depth == n)
        return nd;
    struct node *k = kid_starting(nd, tokens[nd->depth]);
    if (k) {
        int32_t room = n - nd->depth < k->len ? n - nd->depth : k->len;
        int32_t m = common(k->label, tokens + nd->depth, room);
        if (!(nd = split(k, m)))
            return NULL;
        if (nd->depth == n)
            return nd;
    }
    struct node *leaf = new_node(tokens + nd->depth, n - nd->depth, n);
    if (!leaf || add_kid(nd, leaf)) {
        if (leaf)
            free(leaf->label);
        free(leaf);
        return NULL;
    }
    return leaf;
}

int splash_prefix_cache_insert(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n,
                               void *seq, enum splash_point_class cls)
{
    if (n <= 0)
        return -1;
    struct node *nd = node_at(c, tokens, n);
    if (!nd)
        return -1;
    if (nd->point) {
        nd->point->used = ++c->clock;
        if (cls > nd->point->cls)
            nd->point->cls = cls;
        c->drop(c->drop_ctx, seq);
        return 0;
    }
    struct splash_prefix_point *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->node = nd;
    p->seq = seq;
    p->cls = cls;
    p->used = ++c->clock;
    p->next = c->points;
    if (c->points)
        c->points->prev = p;
    c->points = p;
    nd->point = p;
    if (cls == SPLASH_POINT_TURN)
        c->newest_turn = p;
    c->stats.inserted++;
    return 0;
}

/* Removes nodes nothing needs any more from nd upward, and joins a pointless node with
 * its only child. */
static void prune(struct node *nd)
{
    while (nd->parent && !nd->point && nd->n_kids == 0) {
        struct node *parent = nd->parent;
        remove_kid(parent, nd);
        free(nd->kids);
        free(nd->label);
        free(nd);
        nd = parent;
    }
    if (nd->parent && !nd->point && nd->n_kids == 1) {
        struct node *k = nd->kids[0];
        int32_t *label = malloc((size_t)(nd->len + k->len) * sizeof *label);
        if (!label)
            return; /* the tree stays correct unjoined */
        memcpy(label, nd->label, (size_t)nd->len * sizeof *label);
        memcpy(label + nd->len, k->label, (size_t)k->len * sizeof *label);
        free(k->label);
        k->label = label;
        k->len += nd->len;
        struct node *parent = nd->parent;
        for (int32_t i = 0; i < parent->n_kids; i++)
            if (parent->kids[i] == nd)
                parent->kids[i] = k;
        k->parent = parent;
        free(nd->kids);
        free(nd->label);
        free(nd);
    }
}

static void point_remove(struct splash_prefix_cache *c, struct splash_prefix_point *p,
                         int seq_taken)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        c->points = p->next;
    if (p->next)
        p->next->prev = p->prev;
    if (c->newest_turn == p)
        c->newest_turn = NULL;
    p->node->point = NULL;
    prune(p->node);
    if (!seq_taken)
        c->drop(c->drop_ctx, p->seq);
    free(p);
    c->stats.evicted++;
}

int splash_prefix_cache_evict_one(struct splash_prefix_cache *c, int all)
{
    /* with an SSD tier, points that leave memory at once (a copy is there) go before
     * those that first need a write (server.md "admission and eviction") */
    struct splash_prefix_point *victim = NULL;
    for (struct splash_prefix_point *p = c->points; p; p = p->next) {
        if (p == c->newest_turn && !all)
            continue;
        int at_once = c->spill ? p->copied : 0, v_at_once = victim && c->spill ? victim->copied : 0;
        if (!victim || at_once > v_at_once ||
            (at_once == v_at_once &&
             (p->cls < victim->cls || (p->cls == victim->cls && p->used < victim->used))))
            victim = p;
    }
    if (!victim)
        return 0;
    splash_prefix_cache_evict_point(c, victim);
    return 1;
}

void splash_prefix_cache_evict_point(struct splash_prefix_cache *c, struct splash_prefix_point *p)
{
    int taken = 0;
    if (c->spill) { /* the tier keeps it (a copy already there costs no write) */
        int32_t *t = path_tokens(p->node);
        if (t)
            taken = c->spill(c->spill_ctx, t, p->node->depth, p->seq, p->cls);
        free(t);
    }
    point_remove(c, p, taken);
}

void *splash_prefix_point_seq(const struct splash_prefix_point *p)
{
    return p->seq;
}

int32_t splash_prefix_point_tokens(const struct splash_prefix_point *p)
{
    return p->node->depth;
}

void splash_prefix_cache_stats(const struct splash_prefix_cache *c, struct splash_prefix_stats *s)
{
    *s = c->stats;
    s->points = s->turn_points = 0;
    for (const struct splash_prefix_point *p = c->points; p; p = p->next) {
        s->points++;
        s->turn_points += p->cls == SPLASH_POINT_TURN;
    }
}

void splash_prefix_point_set_copied(struct splash_prefix_point *p)
{
    p->copied = 1;
}

void splash_prefix_point_publish(struct splash_prefix_point *p, uint64_t owner, int running,
                                 double now)
{
    p->published = now;
    p->owner = owner;
    p->running = running;
}

void splash_prefix_cache_request_ended(struct splash_prefix_cache *c, uint64_t owner)
{
    for (struct splash_prefix_point *p = c->points; p; p = p->next)
        if (p->running && p->owner == owner)
            p->running = 0;
}

double splash_prefix_point_published(const struct splash_prefix_point *p)
{
    return p->published;
}

int splash_prefix_point_running(const struct splash_prefix_point *p)
{
    return p->running;
}

struct splash_prefix_point *splash_prefix_cache_uncopied(
    struct splash_prefix_cache *c, int32_t min_tokens,
    int (*skip)(void *ctx, const struct splash_prefix_point *p), void *ctx)
{
    struct splash_prefix_point *best = NULL;
    for (struct splash_prefix_point *p = c->points; p; p = p->next) {
        if (p->cls != SPLASH_POINT_TURN || p->copied || p->node->depth < min_tokens ||
            (best && p->used <= best->used))
            continue;
        if (!skip || !skip(ctx, p))
            best = p;
    }
    return best;
}

struct splash_prefix_point *splash_prefix_cache_next_uncopied(struct splash_prefix_cache *c,
                                                              const struct splash_prefix_point *p)
{
    for (p = p ? p->next : c->points; p; p = p->next)
        if (p->cls == SPLASH_POINT_TURN && !p->copied)
            return (struct splash_prefix_point *)p;
    return NULL;
}

int32_t *splash_prefix_point_path(const struct splash_prefix_point *p)
{
    return path_tokens(p->node);
}
