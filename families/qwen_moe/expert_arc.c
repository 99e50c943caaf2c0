/* Adaptive replacement over an expert store's slots (see expert_arc.h). */
#include "families/qwen_moe/expert_arc.h"

#include <stdlib.h>

int es_arc_init(struct es_arc *a, int32_t n_slots, int32_t n_keys)
{
    *a = (struct es_arc){.c = n_slots, .n_keys = n_keys};
    a->node = malloc((size_t)(n_keys > 0 ? n_keys : 1) * sizeof *a->node);
    a->free_slots = malloc((size_t)(n_slots > 0 ? n_slots : 1) * sizeof *a->free_slots);
    if (!a->node || !a->free_slots) {
        es_arc_free(a);
        return -1;
    }
    for (int32_t k = 0; k < n_keys; k++)
        a->node[k] = (struct es_arc_node){.prev = -1, .next = -1, .list = ES_ARC_NONE, .slot = -1};
    for (int i = 0; i < 4; i++)
        a->head[i] = a->tail[i] = -1;
    /* slot 0 handed out first */
    for (int32_t s = 0; s < n_slots; s++)
        a->free_slots[s] = n_slots - 1 - s;
    a->n_free = n_slots;
    return 0;
}

void es_arc_free(struct es_arc *a)
{
    free(a->node);
    free(a->free_slots);
    a->node = NULL;
    a->free_slots = NULL;
}

static void unlink_key(struct es_arc *a, int32_t k)
{
    struct es_arc_node *n = &a->node[k];
    if (n->list == ES_ARC_NONE)
        return;
    if (n->prev >= 0)
        a->node[n->prev].next = n->next;
    else
        a->head[n->list] = n->next;
    if (n->next >= 0)
        a->node[n->next].prev = n->prev;
    else
        a->tail[n->list] = n->prev;
    a->len[n->list]--;
    n->prev = n->next = -1;
    n->list = ES_ARC_NONE;
}

/* k becomes the most recent of list l */
static void push_front(struct es_arc *a, int32_t k, int32_t l)
{
    unlink_key(a, k);
    struct es_arc_node *n = &a->node[k];
    n->list = l;
    n->prev = -1;
    n->next = a->head[l];
    if (a->head[l] >= 0)
        a->node[a->head[l]].prev = k;
    else
        a->tail[l] = k;
    a->head[l] = k;
    a->len[l]++;
}

void es_arc_touch(struct es_arc *a, int32_t key, int again)
{
    int32_t l = a->node[key].list;
    if (l != ES_ARC_T1 && l != ES_ARC_T2)
        return;
    push_front(a, key, again ? ES_ARC_T2 : l);
}

/* The least recent key of resident list l that is not pinned, or -1. */
static int32_t lru_unpinned(const struct es_arc *a, int32_t l, int (*pinned)(void *, int32_t),
                            void *ctx)
{
    for (int32_t k = a->tail[l]; k >= 0; k = a->node[k].prev)
        if (!pinned || !pinned(ctx, k))
            return k;
    return -1;
}

/* ARC's REPLACE: a victim from T1 when T1 is over its target (or at it, for a key coming
 * back from B2), else from T2; the other list when the chosen one has only pinned keys.
 * The victim moves to its ghost list; returns its key or -1. */
static int32_t replace(struct es_arc *a, int from_b2, int (*pinned)(void *, int32_t), void *ctx)
{
    int t1_first = a->len[ES_ARC_T1] > 0 &&
                   (a->len[ES_ARC_T1] > a->p || (from_b2 && a->len[ES_ARC_T1] == a->p));
    int32_t first = t1_first ? ES_ARC_T1 : ES_ARC_T2, second = t1_first ? ES_ARC_T2 : ES_ARC_T1;
    int32_t l = first, v = lru_unpinned(a, first, pinned, ctx);
    if (v < 0) {
        l = second;
        v = lru_unpinned(a, second, pinned, ctx);
    }
    if (v < 0)
        return -1;
    push_front(a, v, l == ES_ARC_T1 ? ES_ARC_B1 : ES_ARC_B2);
    a->free_slots[a->n_free++] = a->node[v].slot;
    a->node[v].slot = -1;
    return v;
}

/* Drops the least recent ghost of list l. */
static void drop_ghost(struct es_arc *a, int32_t l)
{
    if (a->tail[l] >= 0)
        unlink_key(a, a->tail[l]);
}

int32_t es_arc_admit(struct es_arc *a, int32_t key, int again, int (*pinned)(void *ctx, int32_t k),
                     void *ctx, int32_t *evicted)
{
    struct es_arc_node *n = &a->node[key];
    int32_t l = n->list, dest = ES_ARC_T1;
    *evicted = -1;
    if (again && l == ES_ARC_B1) {
        /* B1 hit: T1 was too small */
        int32_t d = a->len[ES_ARC_B1] ? a->len[ES_ARC_B2] / a->len[ES_ARC_B1] : 1;
        a->p = a->p + (d > 1 ? d : 1) < a->c ? a->p + (d > 1 ? d : 1) : a->c;
        dest = ES_ARC_T2;
    } else if (again && l == ES_ARC_B2) {
        /* B2 hit: T2 was too small */
        int32_t d = a->len[ES_ARC_B2] ? a->len[ES_ARC_B1] / a->len[ES_ARC_B2] : 1;
        a->p = a->p - (d > 1 ? d : 1) > 0 ? a->p - (d > 1 ? d : 1) : 0;
        dest = ES_ARC_T2;
    } else {
        /* a new key (or a prompt's access to a ghost): the directory keeps |T1|+|B1| <= c
         * and everything <= 2c */
        unlink_key(a, key);
        if (a->len[ES_ARC_T1] + a->len[ES_ARC_B1] >= a->c && a->len[ES_ARC_B1] > 0)
            drop_ghost(a, ES_ARC_B1);
        else if (a->len[0] + a->len[1] + a->len[2] + a->len[3] >= 2 * a->c &&
                 a->len[ES_ARC_B2] > 0)
            drop_ghost(a, ES_ARC_B2);
    }
    if (a->n_free == 0) {
        *evicted = replace(a, l == ES_ARC_B2, pinned, ctx);
        if (*evicted < 0)
            return -1;
    }
    int32_t slot = a->free_slots[--a->n_free];
    push_front(a, key, dest);
    n->slot = slot;
    return slot;
}

void es_arc_drop(struct es_arc *a, int32_t key)
{
    struct es_arc_node *n = &a->node[key];
    if (n->slot >= 0) {
        a->free_slots[a->n_free++] = n->slot;
        n->slot = -1;
    }
    unlink_key(a, key);
}

int32_t es_arc_evict(struct es_arc *a)
{
    return replace(a, 0, NULL, NULL);
}

int32_t es_arc_take_free_below(struct es_arc *a, int32_t lim)
{
    for (int32_t i = a->n_free - 1; i >= 0; i--)
        if (a->free_slots[i] < lim) {
            int32_t slot = a->free_slots[i];
            a->free_slots[i] = a->free_slots[--a->n_free];
            return slot;
        }
    return -1;
}

void es_arc_move(struct es_arc *a, int32_t key, int32_t slot)
{
    a->free_slots[a->n_free++] = a->node[key].slot;
    a->node[key].slot = slot;
}

void es_arc_set_slots(struct es_arc *a, int32_t c)
{
    int32_t n = 0;
    for (int32_t i = 0; i < a->n_free; i++)
        if (a->free_slots[i] < c)
            a->free_slots[n++] = a->free_slots[i];
    a->n_free = n;
    /* the new slots, the lowest handed out first */
    for (int32_t s = c - 1; s >= a->c; s--)
        a->free_slots[a->n_free++] = s;
    a->c = c;
    if (a->p > c)
        a->p = c;
    while (a->len[ES_ARC_T1] + a->len[ES_ARC_B1] > c && a->len[ES_ARC_B1] > 0)
        drop_ghost(a, ES_ARC_B1);
    while (a->len[0] + a->len[1] + a->len[2] + a->len[3] > 2 * c && a->len[ES_ARC_B2] > 0)
        drop_ghost(a, ES_ARC_B2);
}
