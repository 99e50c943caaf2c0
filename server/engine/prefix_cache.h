/* The in-memory prefix cache: restore points (a forked sequence holding a prompt
 * prefix's KV pages, shared copy-on-write, and its recurrent state) in a radix tree
 * over token ids. A request resumes from the deepest point along its prompt that its
 * prefill plan accepts. The cache owns its points' sequences and gives them back
 * through `drop`. */
#ifndef SPLASH_ENGINE_PREFIX_CACHE_H
#define SPLASH_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* What a point is, in the order eviction spares them (last goes last). */
enum splash_point_class {
    SPLASH_POINT_CHUNK = 0, /* a prefill chunk's end inside a turn */
    SPLASH_POINT_TURN = 1,  /* a turn boundary: just after the chat format's reuse token */
};

struct splash_prefix_cache;
struct splash_prefix_point;

struct splash_prefix_stats {
    uint64_t points, turn_points;    /* held now */
    uint64_t inserted, evicted;      /* since the start */
    uint64_t lookups, hits, hit_tokens;
};

struct splash_prefix_cache *splash_prefix_cache_create(void (*drop)(void *ctx, void *seq),
                                                       void *ctx);
/* Drops every point. */
void splash_prefix_cache_destroy(struct splash_prefix_cache *c);

/* The point at exactly tokens[0..n), or NULL. */
struct splash_prefix_point *splash_prefix_cache_find(struct splash_prefix_cache *c,
                                                     const int32_t *tokens, int32_t n);
/* The deepest point along tokens[0..n) whose length `accept` takes (NULL: any), or NULL;
 * counts a lookup, and a hit when found (marking the point used now). */
struct splash_prefix_point *splash_prefix_cache_lookup(struct splash_prefix_cache *c,
                                                       const int32_t *tokens, int32_t n,
                                                       int (*accept)(void *ctx, int32_t len),
                                                       void *ctx);
/* The length lookup would find, without counting a lookup or marking a use. */
int32_t splash_prefix_cache_peek(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n,
                                 int (*accept)(void *ctx, int32_t len), void *ctx);
/* Adds a point at tokens[0..n) holding seq (the cache owns it from then on); a point
 * already there is kept, marked used now, and seq dropped. -1: out of memory (seq is
 * still the caller's). */
int splash_prefix_cache_insert(struct splash_prefix_cache *c, const int32_t *tokens, int32_t n,
                               void *seq, enum splash_point_class cls);

void *splash_prefix_point_seq(const struct splash_prefix_point *p);
int32_t splash_prefix_point_tokens(const struct splash_prefix_point *p);

/* Marks a point whose copy the SSD tier holds (read back from it). */
void splash_prefix_point_set_copied(struct splash_prefix_point *p);

/* Drops the point eviction takes first: with an SSD tier (a spill set), those it holds a
 * copy of first; then chunk points before turn points, each the least recently used
 * first; the newest turn point (the one the latest conversation resumes from) only when
 * `all`. 0 when nothing could go. */
int splash_prefix_cache_evict_one(struct splash_prefix_cache *c, int all);

/* Evicts p as evict_one would (through the spill). */
void splash_prefix_cache_evict_point(struct splash_prefix_cache *c, struct splash_prefix_point *p);

/* Called with a point's tokens and sequence as eviction takes it, before it is dropped
 * (the SSD tier keeps a copy). Returns 1 when it took the sequence (a write in the
 * background destroys it once done), 0 when the cache drops it. */
typedef int (*splash_prefix_spill_fn)(void *ctx, const int32_t *tokens, int32_t n, void *seq,
                                      enum splash_point_class cls);
void splash_prefix_cache_set_spill(struct splash_prefix_cache *c, splash_prefix_spill_fn spill,
                                   void *ctx);

/* Write-ahead's rules (server.md "SSD cache") need when a point joined the cache and
 * whether the request that published it still runs: publish notes both (now on the
 * caller's clock; running: owner runs), request_ended clears `running` on every point
 * owner published. */
void splash_prefix_point_publish(struct splash_prefix_point *p, uint64_t owner, int running,
                                 double now);
void splash_prefix_cache_request_ended(struct splash_prefix_cache *c, uint64_t owner);
double splash_prefix_point_published(const struct splash_prefix_point *p);
int splash_prefix_point_running(const struct splash_prefix_point *p);

/* The newest turn point of at least min_tokens tokens with no copy on the SSD tier that
 * skip does not refuse (write-ahead's next candidate), or NULL. */
struct splash_prefix_point *splash_prefix_cache_uncopied(
    struct splash_prefix_cache *c, int32_t min_tokens,
    int (*skip)(void *ctx, const struct splash_prefix_point *p), void *ctx);
/* The turn points with no copy, one after another (p NULL: the first), NULL at the end. */
struct splash_prefix_point *splash_prefix_cache_next_uncopied(struct splash_prefix_cache *c,
                                                              const struct splash_prefix_point *p);
/* A point's tokens (malloc'ed, splash_prefix_point_tokens of them), or NULL. */
int32_t *splash_prefix_point_path(const struct splash_prefix_point *p);

void splash_prefix_cache_stats(const struct splash_prefix_cache *c,
                               struct splash_prefix_stats *s);

#endif
