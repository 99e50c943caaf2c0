/* The SSD tier's table of KV pages (server/engine/disk_cache.h): page i of a restore point
 * is keyed by its parent (the slot of page i-1, -1 for page 0) and its own page_tokens
 * tokens, that is by the prefix tokens[0..(i+1)*page_tokens), so points that begin alike
 * hold the same pages. Each page is a slot of the pages file, counted by the points whose
 * chains hold it; its slot is free again when the last one lets go. In memory only: the
 * tier writes, reads and checks the slots. Not thread-safe (the tier's lock guards it). */
#ifndef SPLASH_ENGINE_DISK_PAGES_H
#define SPLASH_ENGINE_DISK_PAGES_H

#include <stdint.h>

enum disk_page_state {
    DISK_PAGE_FREE,    /* the slot holds nothing */
    DISK_PAGE_PENDING, /* its write is queued or under way */
    DISK_PAGE_OK,      /* written (or taken back) and not seen damaged */
    DISK_PAGE_BAD      /* damaged or never written: never read, gone once unheld */
};

struct disk_page {
    uint64_t key;        /* the chain's hash: the parent's key and the page's tokens */
    int64_t parent;      /* the parent's slot, -1 for a chain's first page */
    int32_t *tokens;     /* its page_tokens tokens */
    uint32_t crc_tokens, crc_bytes;
    uint32_t refs;       /* chains (restore points) that hold it */
    int state;           /* enum disk_page_state */
    int64_t next;        /* the next slot in its hash bucket, or in the free list */
};

struct disk_pages {
    int32_t page_tokens;
    uint64_t page_bytes;  /* the family's KV page (model_info.kv_page_bytes) */
    uint64_t slot_bytes;  /* a slot: record header, tokens, page bytes */
    struct disk_page *pg;
    int64_t n_slots, cap; /* slots the file has used so far (its extent), allocated */
    int64_t free_head;    /* free slots below n_slots, -1 none */
    int64_t *bucket;
    uint64_t n_buckets;   /* a power of two */
    int64_t live;         /* slots not free */
};

void disk_pages_init(struct disk_pages *p, int32_t page_tokens, uint64_t page_bytes,
                     uint64_t header_bytes);
void disk_pages_free(struct disk_pages *p);

/* The key of a page whose parent has parent_key (0 for a chain's first page). */
uint64_t disk_pages_key(uint64_t parent_key, const int32_t *tokens, int32_t n);

/* The slot of the page (parent, tokens) that is pending or written, or -1. */
int64_t disk_pages_find(const struct disk_pages *p, int64_t parent, uint64_t key,
                        const int32_t *tokens);

/* A new page (one reference) at a free slot, or at slot when slot >= 0 (taken back from a
 * persistent index: it must be free); -1 when memory or that slot is refused. */
int64_t disk_pages_add(struct disk_pages *p, int64_t slot, int64_t parent, uint64_t key,
                       const int32_t *tokens, int state);

/* The page is bad: no new chain finds it (those holding it keep it until they let go). */
void disk_pages_mark_bad(struct disk_pages *p, int64_t slot);

/* One reference fewer; 1 when that freed the slot. */
int disk_pages_release(struct disk_pages *p, int64_t slot);

#endif
