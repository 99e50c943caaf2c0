/* The engine's side of prefix caching: the memory every sequence's caches may hold
 * (the memory plan's KV and states), restore points taken and resumed through the
 * family's forks, and eviction in server.md's order (cached prefixes first). */
#ifndef SPLASH_ENGINE_ENGINE_CACHE_H
#define SPLASH_ENGINE_ENGINE_CACHE_H

#include <jansson.h>
#include <stdint.h>

#include "server/engine/disk_cache.h"
#include "server/engine/prefill_plan.h"
#include "server/engine/prefix_cache.h"
#include "splash/family.h"

/* Chunk points of one prompt at least this far apart; turn points always. */
#define SPLASH_CHECKPOINT_SPACING 1024
/* Turn points kept for the last this many boundaries of a prompt (the next turn
 * resumes from the last; an edit or a retry from one shortly before). */
#define SPLASH_TURN_POINTS 8
/* Write-ahead (server.md "SSD cache"): without the persistent cache, turn points at least
 * this deep are copied to the SSD tier only while a reclaim has reached a point with no
 * copy within the last RECENT seconds, DELAY seconds after their publication once their
 * request has ended; with it, every turn point DELAY seconds after its publication,
 * running or not. This many writes at a time. */
#define SPLASH_WRITE_AHEAD_MIN_TOKENS 2048
#define SPLASH_WRITE_AHEAD_DELAY_S 10.0
#define SPLASH_WRITE_AHEAD_RECENT_S 60.0
#define SPLASH_WRITE_AHEAD_IN_FLIGHT 1
/* Memory that only eviction's writes under way hold returns as they end; after this long
 * they give up instead (the points leave memory uncopied: a request is not held up by a
 * slow volume). */
#define SPLASH_SPILL_WAIT_S 2.0

/* What the engine keeps beside each restore point (the draft's context there): kept as a
 * point of tokens[0..n) holding `point` joins the cache, dropped as it goes; bytes, what
 * all of it holds, counts in the pool beside the sequences' caches. */
struct splash_point_hooks {
    void (*kept)(void *ctx, void *point, const int32_t *tokens, int32_t n);
    void (*dropped)(void *ctx, void *point);
    uint64_t (*bytes)(void *ctx);
    void *ctx;
};

struct splash_engine_cache {
    const struct splash_family_plugin *fam;
    void *model;
    struct splash_prefix_cache *points; /* NULL: no prefix cache (the family cannot fork) */
    uint64_t pool;                      /* bytes every sequence's caches may hold */
    uint64_t page_bytes;                /* one page of every attention layer */
    int32_t page_tokens;
    uint64_t state_bytes;               /* one sequence's recurrent state */
    uint64_t kv_bytes_per_token;
    uint64_t prefilled, reused;         /* prompt tokens computed, and taken from the cache */
    uint64_t peak;                      /* the most the caches held after a step */
    struct splash_disk_cache *disk;     /* the SSD tier, NULL: off (disk_why says why) */
    int parts;                          /* the family saves in parts: points go to the tier
                                           as chains of KV pages and a rest */
    int ahead_in_flight;                /* write-ahead copies queued or under way */
    int reading;                        /* a point is being read back */
    uint64_t read_counted;              /* the engine's estimate when it was asked for */
    void *read_seq;                     /* the point read back last, until resumed from */
    int32_t unread_n;                   /* the point that could not be read back last */
    uint32_t unread_crc;
    uint64_t written_ahead;             /* and written */
    uint64_t room_waits;                /* makings of room that waited on the tier's writes */
    double ahead_delay;                 /* SPLASH_WRITE_AHEAD_DELAY_S (tests shorten it) */
    double reclaimed_at;                /* when eviction last took a point with no copy */
    int reclaimed;                      /* it has since the start */
    double started;                     /* the engine's start, for the probation minute */
    int probation_over;
    uint64_t publisher;                 /* the request whose points are being kept now, */
    int publishing;                     /* while set */
    char disk_why[256];
    struct splash_point_hooks hooks; /* zero: none */
};

/* pool: the plan's KV and state bytes. Caching is off where the family cannot fork
 * (a plugin older than ABI 1.2) or `off` is set. disk (NULL: none) opens the SSD tier,
 * where the family saves sequences (ABI 1.3): points eviction takes go there. */
void splash_ecache_init(struct splash_engine_cache *c, const struct splash_family_plugin *fam,
                        void *model, const struct splash_model_info *info, uint64_t pool,
                        int off, const struct splash_disk_opts *disk);
void splash_ecache_free(struct splash_engine_cache *c);

/* Bytes the caches hold now; `counted` is the engine's own estimate for a family that
 * does not report them. */
uint64_t splash_ecache_used(const struct splash_engine_cache *c, uint64_t counted);
/* The most a lane of n tokens at pos0 adds (a new sequence's state when fresh). */
uint64_t splash_ecache_lane_need(const struct splash_engine_cache *c, int32_t pos0, int32_t n,
                                 int fresh);
/* Evicts restore points until need more bytes fit the pool; the newest turn point goes
 * too when `all` (a request's start or growth; a new point never takes it). 1 when
 * they fit. */
int splash_ecache_make_room(struct splash_engine_cache *c, uint64_t counted, uint64_t need,
                            int all);

/* 1 when the plan's prompt must wait: a deeper point than memory holds is on the SSD
 * tier and is being read back by the tier's I/O thread (loaded as a memory point between
 * steps, a damaged one skipped), or another read is under way. 0: resume now. */
int splash_ecache_prefetch(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                           uint64_t counted);
/* 1 while a read back is under way. */
int splash_ecache_reading(const struct splash_engine_cache *c);

/* A sequence for the plan's prompt: forked from the deepest restore point in memory the
 * plan accepts, leaving at least one token to compute, or fresh (*from_disk 1 when the
 * point was read back for it). *cached gets its tokens. */
enum splash_status splash_ecache_resume(struct splash_engine_cache *c,
                                        const struct splash_prefill_plan *plan, void **seq,
                                        int32_t *cached, int *from_disk, uint64_t counted,
                                        struct splash_err *err);

/* The tokens splash_ecache_resume would take from the cache now (memory or SSD). */
int32_t splash_ecache_peek(struct splash_engine_cache *c, const struct splash_prefill_plan *plan);

/* Takes a restore point of seq (which holds plan->tokens[0..pos)) where the rules above
 * want one; last_point is the request's previous point, updated. Points give way to
 * memory: one the pool cannot hold is not kept. */
void splash_ecache_capture(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                           int32_t pos, void *seq, int32_t n_boundaries_after, int32_t *last_point,
                           uint64_t counted);

/* Restore points at the run ends of one call but its last (family ABI 1.3), which the
 * family takes within the step: flags[k] is set (1 + the point's class) where the rules
 * above want one and memory holds it beside `need`, the bytes the step's lanes take.
 * last_point is updated. Returns how many are asked for. */
int32_t splash_ecache_run_points(struct splash_engine_cache *c,
                                 const struct splash_prefill_plan *plan, int32_t pos,
                                 const int32_t *ends, int32_t n, uint8_t *flags,
                                 int32_t *last_point, uint64_t counted, uint64_t need);
/* Keeps the points the step made at the flagged run ends (forks[k], NULL where none). */
void splash_ecache_keep_runs(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                             const int32_t *ends, int32_t n, const uint8_t *flags, void **forks);

/* A clean stop of a persistent cache: every restore point memory holds is queued for the
 * SSD tier (the newest turn point last), and written for at most `seconds`. */
void splash_ecache_flush(struct splash_engine_cache *c, double seconds);

/* Between steps: the SSD tier's ended writes give their sequences back, and the newest
 * turn point without a copy is queued for one (write-ahead) while memory runs short
 * (always for a persistent cache), so eviction later finds it copied and waits on no
 * write. */
void splash_ecache_tick(struct splash_engine_cache *c, uint64_t counted);

/* A persistent cache's probation (server.md "Persistent cache"): a start's first minute
 * ends on a tick at or past it; a clean stop (splash_ecache_flush) passes it too; failed:
 * the engine reports its own failure, so the next start begins empty. */
#define SPLASH_PROBATION_S 60.0
void splash_ecache_failed(struct splash_engine_cache *c);

/* The request id ended: the points it published may be copied ahead (write-ahead's
 * "after its request ended"). */
void splash_ecache_request_ended(struct splash_engine_cache *c, uint64_t id);

/* How long an idle engine may wait for a frame before the next tick: -1 (as long as it
 * takes) unless the SSD tier has writes under way or a point falls due for write-ahead. */
int splash_ecache_idle_wait_ms(struct splash_engine_cache *c);

/* Notes the bytes held after a step (status: bytes_peak). */
void splash_ecache_note(struct splash_engine_cache *c, uint64_t counted);

/* /status: the cache's points, bytes, hits and tokens. */
json_t *splash_ecache_status(const struct splash_engine_cache *c, uint64_t counted);

#endif
