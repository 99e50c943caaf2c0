/* The SSD tier's insides (server/engine/disk_cache.h), shared by its files and by no one
 * else: the records at the front of each page slot and state, a restore point's entry, a
 * job for the I/O thread, the tier itself, and the helpers its files call one another by.
 * Each helper's comment, at its definition, says whether it runs with d->mu held. */
#ifndef SPLASH_ENGINE_DISK_CACHE_INTERNAL_H
#define SPLASH_ENGINE_DISK_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <zlib.h>

#include "server/engine/disk_cache.h"
#include "server/engine/disk_pages.h"

#define STATE_MAGIC "SPLSTAT2"
#define PAGE_MAGIC "SPLPAGE2"

/* Before each state's tokens and bytes in the states file: what the index expects. */
struct state_record {
    char magic[8];
    int32_t n_tokens, n_pages;
    uint64_t size;
    uint32_t crc_tokens, crc_blob;
};

/* At the front of each slot of the pages file, before the page's tokens and bytes. */
struct page_record {
    char magic[8];
    uint64_t key;
    int64_t parent;
    uint32_t crc_tokens, crc_bytes;
};

/* A restore point: its chain of pages (slots of the pages file, page i holding tokens
 * [i * page_tokens, (i + 1) * page_tokens)) and its state record (the family's rest, or
 * its whole seq_save blob with an empty chain) in the states file. */
struct entry {
    int32_t *tokens;
    int32_t n;
    int cls;
    uint64_t off, span; /* its state record's place: record, tokens, bytes */
    uint64_t size;      /* the state's bytes */
    uint32_t crc_tokens, crc_blob;
    int64_t n_pages;
    int64_t *chain;     /* the slots of its pages */
    uint64_t used;      /* the tier's clock at its write or last read */
    uint64_t id;
    int pending;        /* its write is queued or under way: not read, not moved */
    int reading;        /* reads queued or under way: not given up for room */
    int doomed;         /* a page of its chain went bad while it was written or read:
                           dropped once that ends */
};

/* A page a job writes or reads, as the page table expects it. */
struct page_check {
    int64_t index; /* in the point's chain */
    int64_t slot, parent;
    uint64_t key;
    uint32_t crc_tokens, crc_bytes;
};

/* A write for the I/O thread (the new pages of a point's chain, then its state), or a
 * read of a point's pages and state, checked. */
struct job {
    struct job *next;
    int read;
    uint64_t id, off, size, span;
    uint32_t crc_tokens, crc_blob;
    int cls;
    struct page_check *pages; /* a write's new pages, or a read's whole chain */
    int64_t n_checks, n_pages;
    int64_t bad_page;         /* a read's: the chain's page found damaged, -1 none */
    uint64_t written;         /* a write's bytes on the disk */
    char *buf;                /* a read's pages then state, once checked */
    const char *fault;        /* a read's, NULL: as written */
    splash_disk_read_fn got;  /* a read's, on the engine's thread at a reap */
    int32_t *tokens;
    int32_t n;
    struct splash_disk_parts parts;
    splash_disk_done_fn done; /* on the engine's thread, at a reap */
    void *done_ctx;
    int ok;
    int expendable;           /* a copy ahead of need: given up when memory is short */
    _Atomic int cancel;
};

struct splash_disk_cache {
    int fd;            /* the states file */
    int pages_fd;      /* the pages file */
    char dir[512];
    char persist[512]; /* the namespace directory, "" for temporary files */
    uint64_t quota;    /* both files */
    struct disk_pages pg;
    uint64_t states_bytes;
    struct entry *e;
    size_t n, cap;
    uint64_t clock;
    /* the write budget: a bucket of a quarter of a day's bytes, filled at the daily rate */
    uint64_t per_day;
    double bucket, bucket_at;
    struct splash_disk_stats st;
    /* the I/O thread: writes and the persistent index leave the engine's step thread */
    pthread_t io;
    int io_started;
    pthread_mutex_t mu;                /* everything above, and the queues */
    pthread_cond_t work, idle;
    struct job *queue, *queue_tail, *done;
    int busy, stop, index_dirty;
    _Atomic int cancel;                /* queued and running writes give up */
    _Atomic int stop_expendable;       /* the write under way gives up if expendable */
    int busy_expendable;
    uint64_t next_id;
    double slow_piece;                 /* test hook: seconds each piece's write takes */
    uint64_t others;                   /* persistent: the bytes of the other namespaces
                                          nobody holds, which count against the quota */
    int failed_starts;                 /* persistent: the starts before this one that failed
                                          on probation, in a row */
    int started_empty;                 /* and this start began empty for them */
    int on_probation;                  /* this start's first minute is not over */
};

static inline double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline uint64_t used_bytes(const struct splash_disk_cache *d)
{
    return (uint64_t)d->pg.live * d->pg.slot_bytes + d->states_bytes;
}

static inline uint32_t crc_of(const void *bytes, size_t n)
{
    return (uint32_t)crc32_z(0, (const Bytef *)bytes, (z_size_t)n);
}

static inline uint64_t slot_at(const struct splash_disk_cache *d, int64_t slot)
{
    return (uint64_t)slot * d->pg.slot_bytes;
}

/* disk_cache.c: lookups */
struct entry *disk_cache_by_id(struct splash_disk_cache *d, uint64_t id);
int disk_cache_readable(const struct splash_disk_cache *d, const struct entry *x);
struct entry *disk_cache_find_any(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                  int pending);
struct entry *disk_cache_find(struct splash_disk_cache *d, const int32_t *tokens, int32_t n);

/* disk_cache_file.c: whole reads and writes at an offset (0, or -1 cut short / refused) */
void disk_cache_punch(int fd, uint64_t off, uint64_t len);
int disk_cache_write_all(int fd, const void *buf, size_t len, uint64_t off);
int disk_cache_read_all(int fd, void *buf, size_t len, uint64_t off);

/* disk_cache_room.c: points and pages leaving, the room a write takes, the write budget */
void disk_cache_release_page(struct splash_disk_cache *d, int64_t slot);
void disk_cache_drop(struct splash_disk_cache *d, struct entry *x);
size_t disk_cache_page_gone(struct splash_disk_cache *d, int64_t slot);
int64_t disk_cache_gap(struct splash_disk_cache *d, uint64_t span);
struct entry *disk_cache_victim(struct splash_disk_cache *d);
int disk_cache_budget_allows(struct splash_disk_cache *d, uint64_t span);

/* disk_cache_index.c: the persistent index */
void disk_cache_save_index(struct splash_disk_cache *d);
void disk_cache_write_index(struct splash_disk_cache *d);
void disk_cache_take_back(struct splash_disk_cache *d);

/* disk_cache_probation.c */
void disk_cache_probation_start(struct splash_disk_cache *d);

/* disk_cache_write.c: a point's write, on the I/O thread, and its end */
int disk_cache_run_job(struct splash_disk_cache *d, struct job *j);
void disk_cache_finish(struct splash_disk_cache *d, struct job *j, int fault, int err);

/* disk_cache_read.c: a point's read, checked, and its end */
struct job *disk_cache_read_job(struct splash_disk_cache *d, struct entry *x);
void disk_cache_run_read(struct splash_disk_cache *d, struct job *j);
void disk_cache_finish_read(struct splash_disk_cache *d, struct job *j);

/* disk_cache_io.c: the I/O thread */
void *disk_cache_io_main(void *arg);
void disk_cache_free_job(struct job *j);

#endif
