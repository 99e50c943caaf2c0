/* The SSD tier's table of KV pages (server/engine/disk_pages.h). */
#include "server/engine/disk_pages.h"

#include <stdlib.h>
#include <string.h>

void disk_pages_init(struct disk_pages *p, int32_t page_tokens, uint64_t page_bytes,
                     uint64_t header_bytes)
{
    *p = (struct disk_pages){.page_tokens = page_tokens, .page_bytes = page_bytes,
                             .free_head = -1};
    p->slot_bytes = page_bytes ? header_bytes + (uint64_t)page_tokens * sizeof(int32_t) +
                                     page_bytes
                               : 0;
}

void disk_pages_free(struct disk_pages *p)
{
    for (int64_t s = 0; s < p->n_slots; s++)
        free(p->pg[s].tokens);
    free(p->pg);
    free(p->bucket);
    p->pg = NULL;
    p->bucket = NULL;
}

uint64_t disk_pages_key(uint64_t parent_key, const int32_t *tokens, int32_t n)
{
    /* FNV-1a over the parent's key and the tokens, then a final mix: a bucket index, the
     * tokens themselves are compared on a match */
    uint64_t h = 1469598103934665603ull ^ parent_key;
    const unsigned char *b = (const unsigned char *)tokens;
    for (size_t i = 0; i < (size_t)n * sizeof *tokens; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h ? h : 1;
}

static uint64_t bucket_of(const struct disk_pages *p, uint64_t key)
{
    return key & (p->n_buckets - 1);
}

int64_t disk_pages_find(const struct disk_pages *p, int64_t parent, uint64_t key,
                        const int32_t *tokens)
{
    if (!p->n_buckets)
        return -1;
    for (int64_t s = p->bucket[bucket_of(p, key)]; s >= 0; s = p->pg[s].next) {
        const struct disk_page *g = &p->pg[s];
        if (g->key == key && g->parent == parent &&
            !memcmp(g->tokens, tokens, (size_t)p->page_tokens * sizeof *tokens))
            return s;
    }
    return -1;
}

static void unhash(struct disk_pages *p, int64_t slot)
{
    for (int64_t *at = &p->bucket[bucket_of(p, p->pg[slot].key)]; *at >= 0;
         at = &p->pg[*at].next)
        if (*at == slot) {
            *at = p->pg[slot].next;
            p->pg[slot].next = -1;
            return;
        }
}

static void hash_in(struct disk_pages *p, int64_t slot)
{
    uint64_t b = bucket_of(p, p->pg[slot].key);
    p->pg[slot].next = p->bucket[b];
    p->bucket[b] = slot;
}

/* Twice the buckets before there are more pages than buckets. */
static int grow_buckets(struct disk_pages *p)
{
    if ((uint64_t)p->live + 1 <= p->n_buckets)
        return 0;
    uint64_t n = p->n_buckets ? 2 * p->n_buckets : 64;
    int64_t *b = malloc(n * sizeof *b);
    if (!b)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        b[i] = -1;
    free(p->bucket);
    p->bucket = b;
    p->n_buckets = n;
    for (int64_t s = 0; s < p->n_slots; s++)
        if (p->pg[s].state == DISK_PAGE_PENDING || p->pg[s].state == DISK_PAGE_OK)
            hash_in(p, s);
    return 0;
}

/* Slots up to and including slot exist (the new ones free). */
static int reach(struct disk_pages *p, int64_t slot)
{
    if (slot >= p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        while (cap <= slot)
            cap *= 2;
        struct disk_page *pg = realloc(p->pg, (size_t)cap * sizeof *pg);
        if (!pg)
            return -1;
        p->pg = pg;
        p->cap = cap;
    }
    for (; p->n_slots <= slot; p->n_slots++) {
        p->pg[p->n_slots] = (struct disk_page){.state = DISK_PAGE_FREE, .next = p->free_head};
        p->free_head = p->n_slots;
    }
    return 0;
}

static void take_free(struct disk_pages *p, int64_t slot)
{
    for (int64_t *at = &p->free_head; *at >= 0; at = &p->pg[*at].next)
        if (*at == slot) {
            *at = p->pg[slot].next;
            return;
        }
}

int64_t disk_pages_add(struct disk_pages *p, int64_t slot, int64_t parent, uint64_t key,
                       const int32_t *tokens, int state)
{
    int32_t *copy = malloc((size_t)p->page_tokens * sizeof *copy);
    if (!copy)
        return -1;
    if (slot < 0)
        slot = p->free_head >= 0 ? p->free_head : p->n_slots;
    if (reach(p, slot) || p->pg[slot].state != DISK_PAGE_FREE || grow_buckets(p)) {
        free(copy);
        return -1;
    }
    take_free(p, slot);
    memcpy(copy, tokens, (size_t)p->page_tokens * sizeof *copy);
    p->pg[slot] = (struct disk_page){.key = key, .parent = parent, .tokens = copy, .refs = 1,
                                     .state = state, .next = -1};
    p->live++;
    hash_in(p, slot);
    return slot;
}

void disk_pages_mark_bad(struct disk_pages *p, int64_t slot)
{
    struct disk_page *g = &p->pg[slot];
    if (g->state == DISK_PAGE_PENDING || g->state == DISK_PAGE_OK)
        unhash(p, slot);
    g->state = DISK_PAGE_BAD;
}

int disk_pages_release(struct disk_pages *p, int64_t slot)
{
    struct disk_page *g = &p->pg[slot];
    if (g->refs && --g->refs)
        return 0;
    if (g->state == DISK_PAGE_PENDING || g->state == DISK_PAGE_OK)
        unhash(p, slot);
    free(g->tokens);
    *g = (struct disk_page){.state = DISK_PAGE_FREE, .next = p->free_head};
    p->free_head = slot;
    p->live--;
    return 1;
}
