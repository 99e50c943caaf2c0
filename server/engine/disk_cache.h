/* The prefix cache's SSD tier (server.md "SSD cache"): restore points memory gives up are
 * kept in two unlinked temporary files, one of KV pages and one of states, so their space
 * returns when the engine exits, and read back when a later prompt resumes from them.
 *
 * A point is a chain of whole KV pages plus one state record. Page i is keyed by its
 * parent page and its own page_tokens tokens (so by the prefix tokens[0..(i+1)*page_tokens))
 * and lives in a fixed-size slot of the pages file (a free list reuses slots); a page
 * already on the tier is not written again, and pages are counted by the points whose
 * chains hold them. The state record, keyed by the exact tokens[0..n), holds the family's
 * rest (header, partial last page, recurrent states): variable-size, placed in the states
 * file. A family that does not save in parts keeps its whole seq_save blob as the state
 * with an empty chain.
 *
 * The quota covers both files (freed room is returned to the volume). A full quota keeps
 * points whole: the oldest point goes (checkpoints first) with the pages only it held.
 * Each page record and each state carries a CRC-32 of its tokens and bytes: a point that
 * reads back other than written is dropped with a log line, never used, and a damaged page
 * drops every point whose chain holds it. A write budget (bytes a day) paces what is
 * written; a volume that refuses a write closes the tier for writes with one line, and
 * requests never see an error from it.
 *
 * Persistent (--persistent-cache): the files are named (persist_dir/pages, /states) and an
 * index (persist_dir/index, written whole and renamed into place after every change, the
 * files synced first) lists the pages and the points, so the next engine of the same
 * namespace takes them back: a point whose state record and tokens read back as written
 * and whose whole chain of pages does is kept, the bytes checked again when read; the
 * rest is skipped with a line. Other namespaces under the same root that no engine holds
 * count against the quota: they are removed, the least recently used first, before a point
 * of this one gives up room. */
#ifndef SPLASH_ENGINE_DISK_CACHE_H
#define SPLASH_ENGINE_DISK_CACHE_H

#include <jansson.h>
#include <stdint.h>

#include "splash/status.h"

struct splash_disk_cache;

struct splash_disk_opts {
    const char *dir;          /* where the temporary file goes ($TMPDIR or /tmp when NULL) */
    const char *persist_dir;  /* NULL, or the persistent cache's namespace directory: its
                                 entries are kept in data and listed in index there, taken
                                 back at the next open (see cache_namespace.h) */
    int64_t quota;            /* bytes of both files; -1: auto (server.md: a quarter of the
                                 volume's free space beyond its floor, at most 32 GiB) */
    uint64_t writes_per_day;  /* 0: no budget */
    uint64_t page_bytes;      /* a KV page (model_info.kv_page_bytes) when the family saves
                                 in parts, 0: every point is a whole blob */
    int32_t page_tokens;      /* the tokens of a page (model_info.kv_page_tokens) */
};

struct splash_disk_stats {
    uint64_t quota, used, entries;
    uint64_t writes, written_bytes, hits, read_bytes;
    uint64_t refused_room, refused_budget, corrupt;
    uint64_t budget_left;     /* bytes the budget allows now (0 without one) */
    int closed;               /* a write failed: no more writes */
    uint64_t taken_back;      /* entries a persistent open found intact */
    uint64_t pending;         /* writes queued or under way on the I/O thread */
    uint64_t pages, pages_bytes;   /* pages on the tier (slots in use) */
    uint64_t pages_shared;         /* page references a point found there, not written */
    uint64_t states, states_bytes; /* state records (one per point) */
};

/* Opens the tier; *out NULL (with the reason in why) where it stays off: quota 0, a
 * volume with no room beyond its floor under auto, or no file. */
enum splash_status splash_disk_cache_open(const struct splash_disk_opts *o,
                                          struct splash_disk_cache **out, char *why,
                                          size_t why_size);
void splash_disk_cache_close(struct splash_disk_cache *d);

/* Keeps blob as the restore point at tokens[0..n) (cls: enum splash_point_class) with an
 * empty chain, waiting for its write. 1 written (or already there), 0 not: larger than the
 * quota, the budget spent, the file closed. */
int splash_disk_cache_put(struct splash_disk_cache *d, const int32_t *tokens, int32_t n, int cls,
                          const void *blob, uint64_t size);
/* The same for size bytes produce hands, in order, to the write function it is given
 * (a piece at a time: no copy of the whole is made); produce returns nonzero, or hands
 * other than size bytes, and nothing is kept. */
typedef int (*splash_disk_produce_fn)(void *ctx,
                                      int (*write)(void *wctx, const void *bytes, size_t n),
                                      void *wctx);
int splash_disk_cache_put_with(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx);

/* A point in parts: its first n_pages whole pages (n_pages * page_tokens <= n), each of
 * opts.page_bytes bytes that page(ctx, i, ...) hands, and its rest of rest_size bytes that
 * rest(ctx, ...) hands. Pages already on the tier are not asked for. */
typedef int (*splash_disk_page_fn)(void *ctx, int64_t page,
                                   int (*write)(void *wctx, const void *bytes, size_t n),
                                   void *wctx);
struct splash_disk_parts {
    int64_t n_pages;
    splash_disk_page_fn page;
    uint64_t rest_size;
    splash_disk_produce_fn rest;
    void *ctx;
};
int splash_disk_cache_put_parts_with(struct splash_disk_cache *d, const int32_t *tokens,
                                     int32_t n, int cls, const struct splash_disk_parts *parts);
/* The same from memory: n_pages pages laid end to end, then the rest. */
int splash_disk_cache_put_pages(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                int cls, const void *pages, int64_t n_pages, const void *rest,
                                uint64_t rest_size);

/* The same in the background: the entry's place is taken now (within the quota, older
 * entries making room) and its bytes written by the tier's I/O thread, which calls produce
 * there (what produce reads must stay as it is until done); the entry is read only once
 * its write is done. done(done_ctx, ok) is called on the caller's thread by a later
 * splash_disk_cache_reap. 1 queued (done will be called), 0 not (an entry already there
 * or being written, no room, the budget spent, the file closed: done is not called).
 * expendable: a copy ahead of need, which splash_disk_cache_give_up_expendable stops. */
typedef void (*splash_disk_done_fn)(void *ctx, int ok);
int splash_disk_cache_put_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                int cls, uint64_t size, splash_disk_produce_fn produce, void *ctx,
                                splash_disk_done_fn done, void *done_ctx, int expendable);
/* The same for a point in parts: the pages its chain finds on the tier are held for it
 * at once (a write that fails drops every point counting on a page it was to write). */
int splash_disk_cache_put_parts_async(struct splash_disk_cache *d, const int32_t *tokens,
                                      int32_t n, int cls, const struct splash_disk_parts *parts,
                                      splash_disk_done_fn done, void *done_ctx, int expendable);
/* The expendable writes (copies ahead of need) give up: those queued at once, the one
 * under way at its next piece; then reaps. Returns how many were reaped. */
int splash_disk_cache_give_up_expendable(struct splash_disk_cache *d);
/* The point at exactly tokens[0..n), read and checked by the I/O thread (ahead of queued
 * writes): got(ctx, tokens, n, buf, n_pages, rest_size, cls) is called by a later reap
 * with buf (malloc'ed, the callback's) holding its n_pages pages end to end, then its rest
 * of rest_size bytes; or buf NULL when the point is gone, or damaged (then logged and
 * dropped, with every point holding a damaged page). 1 queued, 0 no such point. */
typedef void (*splash_disk_read_fn)(void *ctx, const int32_t *tokens, int32_t n, void *buf,
                                    int64_t n_pages, uint64_t rest_size, int cls);
int splash_disk_cache_get_async(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                splash_disk_read_fn got, void *ctx);

/* Calls done (got) for the writes (reads) that ended since the last reap; returns how
 * many. */
int splash_disk_cache_reap(struct splash_disk_cache *d);
/* Writes queued, under way, or ended and not reaped yet. */
int splash_disk_cache_pending(struct splash_disk_cache *d);
/* Waits up to seconds for the queue to empty (cancel: queued writes give up and the one
 * under way stops at its next piece), then reaps. 1 when it emptied. */
int splash_disk_cache_wait(struct splash_disk_cache *d, double seconds, int cancel);

/* 1 when an entry holds exactly tokens[0..n), written or being written (marked used now). */
int splash_disk_cache_has(struct splash_disk_cache *d, const int32_t *tokens, int32_t n);

/* The deepest entry along tokens[0..n) whose length accept takes (NULL: any); 0 none. */
int32_t splash_disk_cache_peek(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                               int (*accept)(void *ctx, int32_t len), void *ctx);

/* The point at exactly tokens[0..n) read now, as get_async's buf (malloc'ed, *n_pages,
 * *rest_size, *cls set), each part checked against its checksum; NULL when there is none,
 * or it is corrupt or cut short (then logged and dropped). */
void *splash_disk_cache_get_parts(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                                  int64_t *n_pages, uint64_t *rest_size, int *cls);
/* The same, *size the bytes of pages and rest together (a whole blob's, without pages). */
void *splash_disk_cache_get(struct splash_disk_cache *d, const int32_t *tokens, int32_t n,
                            uint64_t *size, int *cls);

void splash_disk_cache_stats(const struct splash_disk_cache *d, struct splash_disk_stats *s);
/* /status's disk block ({"enabled": false, "why": ...} for a NULL tier). */
json_t *splash_disk_cache_status(const struct splash_disk_cache *d, const char *why);

/* The probation rule (server.md "Persistent cache"): a persistent open begins its first
 * minute on probation and begins empty after two starts in a row failed within theirs
 * (an open never marked passed counts as failed: a crash), or one whose engine failed.
 * passed: the minute is over, or the engine stops cleanly within it; failed: the engine
 * reports its own failure, so the next start begins empty. No-ops without persistence. */
void splash_disk_cache_probation_passed(struct splash_disk_cache *d);
void splash_disk_cache_failed(struct splash_disk_cache *d);

/* 1 for a persistent cache's files (persist_dir). */
int splash_disk_cache_persistent(const struct splash_disk_cache *d);
/* The directory its files are in. */
const char *splash_disk_cache_dir(const struct splash_disk_cache *d);

/* The files' descriptors and a point's places in them, for tests that damage them: the
 * states file and the state record's offset, the pages file and the offset of page `page`
 * of the point's chain (-1: none). */
int splash_disk_cache_fd(const struct splash_disk_cache *d);
int64_t splash_disk_cache_offset(const struct splash_disk_cache *d, const int32_t *tokens,
                                 int32_t n);
int splash_disk_cache_pages_fd(const struct splash_disk_cache *d);
int64_t splash_disk_cache_page_offset(const struct splash_disk_cache *d, const int32_t *tokens,
                                      int32_t n, int64_t page);

#endif
