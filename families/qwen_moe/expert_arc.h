/* Adaptive replacement (ARC, Megiddo and Modha) over the slots of one expert store mix:
 * keys are (layer, expert) pairs numbered 0..n_keys, each resident key holds one slot.
 * Two resident lists, T1 (seen once lately) and T2 (seen again), and their ghosts B1
 * and B2 (keys recently evicted from each) steer the target size p of T1. Decode steps
 * count as "seen again" (the experts decoding routes again stay); a prompt's accesses
 * never promote, so its experts pass through T1 and go first. Keys pinned by the
 * caller (the experts the current layer routes) are never chosen as victims. */
#ifndef SPLASH_FAMILIES_QWEN_MOE_EXPERT_ARC_H
#define SPLASH_FAMILIES_QWEN_MOE_EXPERT_ARC_H

#include <stdint.h>

enum { ES_ARC_T1 = 0, ES_ARC_T2 = 1, ES_ARC_B1 = 2, ES_ARC_B2 = 3, ES_ARC_NONE = 4 };

struct es_arc_node {
    int32_t prev, next; /* toward the MRU end / the LRU end; -1 at the ends */
    int32_t list;       /* ES_ARC_* */
    int32_t slot;       /* resident: its slot; else -1 */
};

struct es_arc {
    int32_t c;       /* slots */
    int32_t p;       /* target size of T1 */
    int32_t n_keys;
    struct es_arc_node *node;
    int32_t head[4], tail[4], len[4]; /* head: most recent; tail: least recent */
    int32_t *free_slots;
    int32_t n_free;
};

/* 0, or -1 when out of memory. */
int es_arc_init(struct es_arc *a, int32_t n_slots, int32_t n_keys);
void es_arc_free(struct es_arc *a);

/* key's slot, or -1 when it is not resident. */
static inline int32_t es_arc_slot(const struct es_arc *a, int32_t key)
{
    return a->node[key].slot;
}

/* A hit: key (resident) becomes the most recent of T2 (again = 1: a decode step) or of
 * the list it is in. */
void es_arc_touch(struct es_arc *a, int32_t key, int again);

/* A miss: key (not resident) gets a slot, a free one or the victim's; *evicted gets the
 * victim's key or -1. pinned(ctx, k) keeps key k from being a victim. Returns the slot,
 * or -1 when every resident key is pinned. */
int32_t es_arc_admit(struct es_arc *a, int32_t key, int again, int (*pinned)(void *ctx, int32_t k),
                     void *ctx, int32_t *evicted);

/* key leaves the cache (its slot's contents are not to be trusted): the slot is free. */
void es_arc_drop(struct es_arc *a, int32_t key);

/* Elastic chunks (expert_store.c): the ARC's victim, as a miss would choose it with
 * nothing pinned, goes to its ghost list and frees its slot; returns its key or -1. */
int32_t es_arc_evict(struct es_arc *a);
/* A free slot below lim, taken from the free slots, or -1. */
int32_t es_arc_take_free_below(struct es_arc *a, int32_t lim);
/* Resident key moves to slot (just taken from the free slots); its old slot is free. */
void es_arc_move(struct es_arc *a, int32_t key, int32_t slot);
/* The cache's slots become 0..c (c at most es_arc_init's n_slots): free slots at or
 * above c are forgotten (the caller emptied them first), new ones below c are free, and
 * the target and the ghost lists shrink with c. */
void es_arc_set_slots(struct es_arc *a, int32_t c);

#endif
