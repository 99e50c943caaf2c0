/* The engine's prefix caching and memory room (server/engine/engine_cache.h). */
#include "server/engine/engine_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "core/family.h"
#include "core/host_impl.h"

static double mono_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void drop_seq(void *ctx, void *seq)
{
    struct splash_engine_cache *c = ctx;
    if (c->hooks.dropped)
        c->hooks.dropped(c->hooks.ctx, seq);
    splash_family_seq_destroy(c->fam, c->model, seq);
}

/* A write to the SSD tier in the background: it owns seq (a point eviction handed over,
 * or a fork of a point written ahead) until its write ends. */
struct saving {
    struct splash_engine_cache *c;
    void *seq;
    int32_t *tokens; /* write-ahead: the point to mark copied (NULL: an eviction's) */
    int32_t n;
};

static int save_into(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                     void *wctx)
{
    struct saving *sv = ctx;
    struct splash_err err;
    return splash_family_seq_save(sv->c->fam, sv->c->model, sv->seq, write, wctx, &err) !=
           SPLASH_OK;
}

/* On the engine's thread once the write ended: the sequence goes, and a point written
 * ahead is marked copied (it leaves memory without a write). */
static void saved(void *ctx, int ok)
{
    struct saving *sv = ctx;
    struct splash_engine_cache *c = sv->c;
    struct splash_prefix_point *p =
        ok && sv->tokens && c->points ? splash_prefix_cache_find(c->points, sv->tokens, sv->n)
                                      : NULL;
    if (p)
        splash_prefix_point_set_copied(p);
    if (sv->tokens) {
        c->ahead_in_flight--;
        c->written_ahead += ok;
    }
    splash_family_seq_destroy(c->fam, c->model, sv->seq);
    free(sv->tokens);
    free(sv);
}

/* A family that saves in parts: page i of the sequence, and its rest. */
static int save_page_into(void *ctx, int64_t page,
                          int (*write)(void *wctx, const void *bytes, size_t n), void *wctx)
{
    struct saving *sv = ctx;
    struct splash_err err;
    return splash_family_seq_save_page(sv->c->fam, sv->c->model, sv->seq, page, write, wctx,
                                       &err) != SPLASH_OK;
}

static int save_rest_into(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                          void *wctx)
{
    struct saving *sv = ctx;
    struct splash_err err;
    return splash_family_seq_save_rest(sv->c->fam, sv->c->model, sv->seq, write, wctx, &err) !=
           SPLASH_OK;
}

/* Queues seq's bytes as the point at tokens[0..n): its whole pages (those the tier has
 * already are not written again) and its rest, or the whole seq_save blob for a family
 * that does not save in parts; 1 when the write took seq. */
static int queue_save(struct splash_engine_cache *c, const int32_t *tokens, int32_t n, void *seq,
                      enum splash_point_class cls, int ahead)
{
    struct saving *sv = calloc(1, sizeof *sv);
    struct splash_disk_parts parts = {.ctx = sv};
    if (c->parts) {
        parts.n_pages = n / c->page_tokens;
        parts.page = save_page_into;
        parts.rest_size = splash_family_seq_rest_bytes(c->fam, c->model, n);
        parts.rest = save_rest_into;
    } else {
        parts.rest_size = splash_family_seq_saved_bytes(c->fam, c->model, n);
        parts.rest = save_into;
    }
    if (!parts.rest_size || !sv) {
        free(sv);
        return 0;
    }
    *sv = (struct saving){.c = c, .seq = seq, .n = n};
    if (ahead && !(sv->tokens = malloc((size_t)n * sizeof *tokens))) {
        free(sv);
        return 0;
    }
    if (ahead)
        memcpy(sv->tokens, tokens, (size_t)n * sizeof *tokens);
    if (!splash_disk_cache_put_parts_async(c->disk, tokens, n, (int)cls, &parts, saved, sv,
                                           ahead)) {
        free(sv->tokens);
        free(sv);
        return 0;
    }
    if (ahead)
        c->ahead_in_flight++;
    return 1;
}

/* Eviction's copy of a restore point on the SSD tier, as the family saves it, straight
 * into the file a page at a time by the tier's I/O thread: eviction hands the point's
 * sequence over and goes on (its memory returns when the write ends). */
static int spill(void *ctx, const int32_t *tokens, int32_t n, void *seq,
                 enum splash_point_class cls)
{
    struct splash_engine_cache *c = ctx;
    if (splash_disk_cache_has(c->disk, tokens, n))
        return 0; /* read back from it, or written before: no second write */
    /* a reclaim reached a point with no copy: write-ahead starts (for a minute) */
    c->reclaimed = 1;
    c->reclaimed_at = mono_seconds();
    if (!queue_save(c, tokens, n, seq, cls, 0))
        return 0;
    /* the point leaves the cache now, not when its write ends: what the engine kept beside
     * it (the draft's context) goes with it, before the sequence's address can be reused */
    if (c->hooks.dropped)
        c->hooks.dropped(c->hooks.ctx, seq);
    return 1;
}

void splash_ecache_init(struct splash_engine_cache *c, const struct splash_family_plugin *fam,
                        void *model, const struct splash_model_info *info, uint64_t pool, int off,
                        const struct splash_disk_opts *disk)
{
    *c = (struct splash_engine_cache){.fam = fam, .model = model, .pool = pool};
    c->page_tokens = info->kv_page_tokens > 0 ? info->kv_page_tokens : 1;
    c->page_bytes = info->kv_page_bytes ? info->kv_page_bytes
                                        : info->kv_bytes_per_token * (uint64_t)c->page_tokens;
    c->state_bytes = info->state_bytes_per_seq;
    c->kv_bytes_per_token = info->kv_bytes_per_token;
    c->ahead_delay = SPLASH_WRITE_AHEAD_DELAY_S;
    c->started = mono_seconds();
    /* tests only: the publication delay in ms */
    const char *delay = getenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    if (delay && *delay)
        c->ahead_delay = strtod(delay, NULL) / 1000.0;
    if (!off && splash_family_can_fork(fam))
        c->points = splash_prefix_cache_create(drop_seq, c);
    snprintf(c->disk_why, sizeof c->disk_why, "--max-cache-disk 0");
    if (!c->points)
        snprintf(c->disk_why, sizeof c->disk_why, "no prefix cache");
    else if (!splash_family_can_save(fam))
        snprintf(c->disk_why, sizeof c->disk_why, "family plugin %s does not save sequences",
                 fam->header.name);
    else if (disk) {
        /* a family that saves in parts keeps each KV page once for every point along it */
        struct splash_disk_opts o = *disk;
        c->parts = splash_family_saves_parts(fam) && info->kv_page_bytes &&
                   info->kv_page_tokens > 0;
        /* tests and bench-cache only: whole seq_save blobs, as for a family without parts */
        const char *whole = getenv("SPLASH_TEST_DISK_WHOLE");
        if (whole && !strcmp(whole, "1"))
            c->parts = 0;
        o.page_bytes = c->parts ? info->kv_page_bytes : 0;
        o.page_tokens = c->parts ? info->kv_page_tokens : 0;
        if (splash_disk_cache_open(&o, &c->disk, c->disk_why, sizeof c->disk_why) == SPLASH_OK &&
            c->disk)
            splash_prefix_cache_set_spill(c->points, spill, c);
    }
}

void splash_ecache_free(struct splash_engine_cache *c)
{
    /* the tier first: its writes give up and hand their sequences back */
    splash_disk_cache_close(c->disk);
    c->disk = NULL;
    splash_prefix_cache_destroy(c->points);
    c->points = NULL;
}

uint64_t splash_ecache_used(const struct splash_engine_cache *c, uint64_t counted)
{
    return splash_family_cache_bytes(c->fam, c->model, counted) +
           (c->hooks.bytes ? c->hooks.bytes(c->hooks.ctx) : 0);
}

uint64_t splash_ecache_lane_need(const struct splash_engine_cache *c, int32_t pos0, int32_t n,
                                 int fresh)
{
    int64_t t = c->page_tokens;
    int64_t pages = ((int64_t)pos0 + n + t - 1) / t - ((int64_t)pos0 + t - 1) / t;
    if (pos0 % t)
        pages++; /* the page it appends into may be shared: copied first */
    return (uint64_t)pages * c->page_bytes + (fresh ? c->state_bytes : 0);
}

int splash_ecache_make_room(struct splash_engine_cache *c, uint64_t counted, uint64_t need,
                            int all)
{
    splash_disk_cache_reap(c->disk); /* writes that ended give their sequences back */
    double until = 0;
    for (;;) {
        uint64_t used = splash_ecache_used(c, counted);
        if (used + need <= c->pool)
            return 1;
        if (c->points && splash_prefix_cache_evict_one(c->points, all))
            continue;
        /* nothing left to evict but sequences the tier is still writing: copies ahead
         * of need give up at once (their points leave memory without waiting for
         * them); an eviction's own copies return their memory as each write ends, and
         * past the time give up too rather than a request failing */
        if (c->ahead_in_flight && splash_disk_cache_give_up_expendable(c->disk))
            continue;
        if (!splash_disk_cache_pending(c->disk))
            return 0;
        if (!until) {
            until = mono_seconds() + SPLASH_SPILL_WAIT_S;
            c->room_waits++;
        }
        splash_disk_cache_wait(c->disk, 0.05, mono_seconds() > until);
    }
}

static int plan_accepts(void *ctx, int32_t len)
{
    const struct splash_prefill_plan *plan = ctx;
    return splash_plan_is_cut(plan, len);
}

/* A sequence from what the tier read back: its pages and rest (a family in parts), or
 * its whole blob. */
static enum splash_status load_read(struct splash_engine_cache *c, const char *buf,
                                    int64_t n_pages, uint64_t rest_size, void **seq,
                                    struct splash_err *err)
{
    if (!c->parts)
        return splash_family_seq_load(c->fam, c->model, buf, rest_size, seq, err);
    const void **pages = malloc((size_t)(n_pages ? n_pages : 1) * sizeof *pages);
    if (!pages)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "no memory for %lld page pointers",
                              (long long)n_pages);
    for (int64_t i = 0; i < n_pages; i++)
        pages[i] = buf + (size_t)i * c->page_bytes;
    enum splash_status st =
        splash_family_seq_load_parts(c->fam, c->model, pages, n_pages,
                                     buf + (size_t)n_pages * c->page_bytes, rest_size, seq, err);
    free(pages);
    return st;
}

/* A point the SSD tier read back (bytes, NULL: it could not), on the engine's thread:
 * loaded as a restore point in memory, within the plan as for any point (a start may
 * take every cached prefix); one that cannot be is not read again for the request
 * waiting on it. */
static void read_back(void *ctx, const int32_t *tokens, int32_t n, void *buf, int64_t n_pages,
                      uint64_t rest_size, int cls)
{
    struct splash_engine_cache *c = ctx;
    c->reading = 0;
    void *seq = NULL;
    struct splash_err err;
    int ok = 0;
    uint64_t pages = (uint64_t)n_pages * c->page_bytes;
    if (!buf)
        ok = 0; /* damaged (logged by the tier) or gone */
    else if (!splash_ecache_make_room(c, c->read_counted, pages + rest_size, 1))
        ok = 0;
    else if (load_read(c, buf, n_pages, rest_size, &seq, &err) != SPLASH_OK)
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · the entry of %d tokens is skipped: %s", n,
                   err.msg);
    else if (splash_prefix_cache_insert(c->points, tokens, n, seq,
                                        cls == SPLASH_POINT_CHUNK ? SPLASH_POINT_CHUNK
                                                                  : SPLASH_POINT_TURN))
        splash_family_seq_destroy(c->fam, c->model, seq);
    else
        ok = 1;
    struct splash_prefix_point *p = ok ? splash_prefix_cache_find(c->points, tokens, n) : NULL;
    if (p) {
        splash_prefix_point_set_copied(p);
        c->read_seq = splash_prefix_point_seq(p);
    } else {
        c->unread_n = n;
        c->unread_crc = (uint32_t)crc32(0, (const Bytef *)tokens, (uInt)((size_t)n * sizeof *tokens));
    }
    free(buf);
}

/* The deepest point on the SSD tier the plan accepts, unless it is the one that could
 * not be read back last. */
static int32_t disk_depth(struct splash_engine_cache *c, const struct splash_prefill_plan *plan)
{
    int32_t disk = splash_disk_cache_peek(c->disk, plan->tokens, plan->n - 1, plan_accepts,
                                          (void *)plan);
    if (disk && disk == c->unread_n &&
        (uint32_t)crc32(0, (const Bytef *)plan->tokens, (uInt)((size_t)disk * sizeof(int32_t))) ==
            c->unread_crc)
        return 0;
    return disk;
}

int splash_ecache_prefetch(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                           uint64_t counted)
{
    if (!c->disk || !c->points)
        return 0;
    if (c->reading)
        return 1; /* one read at a time: the next request waits its turn */
    int32_t mem = splash_prefix_cache_peek(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                           (void *)plan);
    int32_t disk = disk_depth(c, plan);
    if (disk <= mem)
        return 0;
    c->read_counted = counted;
    if (!splash_disk_cache_get_async(c->disk, plan->tokens, disk, read_back, c))
        return 0;
    c->reading = 1;
    return 1;
}

int splash_ecache_reading(const struct splash_engine_cache *c)
{
    return c->reading;
}

enum splash_status splash_ecache_resume(struct splash_engine_cache *c,
                                        const struct splash_prefill_plan *plan, void **seq,
                                        int32_t *cached, int *from_disk, uint64_t counted,
                                        struct splash_err *err)
{
    *cached = 0;
    *from_disk = 0;
    struct splash_prefix_point *p =
        c->points ? splash_prefix_cache_lookup(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                               (void *)plan)
                  : NULL;
    if (p) {
        void *src = splash_prefix_point_seq(p);
        int32_t n = splash_prefix_point_tokens(p);
        if (splash_family_seq_fork(c->fam, c->model, src, n, seq, err) == SPLASH_OK) {
            *cached = n;
            *from_disk = src == c->read_seq; /* the point prefetch read back */
            if (*from_disk)
                c->read_seq = NULL;
            return SPLASH_OK;
        }
    }
    return splash_family_seq_create(c->fam, c->model, seq, err);
}

int32_t splash_ecache_peek(struct splash_engine_cache *c, const struct splash_prefill_plan *plan)
{
    if (!c->points)
        return 0;
    int32_t mem = splash_prefix_cache_peek(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                           (void *)plan);
    int32_t disk = c->disk ? disk_depth(c, plan) : 0;
    return disk > mem ? disk : mem;
}

/* The class of point the rules want at pos (a cut of the plan), or -1. */
static int wants(const struct splash_prefill_plan *plan, int32_t pos, int32_t n_boundaries_after,
                 int32_t last_point)
{
    /* a prompt that ends at a turn boundary (FLINT's ends with its reuse token,
     * <|assistant|>) is resumed there by the next turn */
    int at_end = pos == plan->n && splash_plan_is_boundary(plan, pos);
    if (!splash_plan_is_cut(plan, pos) && !at_end)
        return -1;
    if (splash_plan_is_boundary(plan, pos) && n_boundaries_after < SPLASH_TURN_POINTS)
        return SPLASH_POINT_TURN;
    return pos - last_point >= SPLASH_CHECKPOINT_SPACING ? SPLASH_POINT_CHUNK : -1;
}

/* What a point at pos costs: a state and, mid-page, the copy of the page either side
 * appends into. */
static uint64_t point_bytes(const struct splash_engine_cache *c, int32_t pos)
{
    return c->state_bytes + (pos % c->page_tokens ? c->page_bytes : 0);
}

static void keep(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                 int32_t pos, void *point, int cls)
{
    if (splash_prefix_cache_insert(c->points, plan->tokens, pos, point,
                                   cls == SPLASH_POINT_TURN ? SPLASH_POINT_TURN
                                                            : SPLASH_POINT_CHUNK)) {
        splash_family_seq_destroy(c->fam, c->model, point);
        return;
    }
    /* a point already there kept its own sequence and dropped this one */
    struct splash_prefix_point *p = splash_prefix_cache_find(c->points, plan->tokens, pos);
    if (p && splash_prefix_point_seq(p) == point)
        splash_prefix_point_publish(p, c->publisher, c->publishing, mono_seconds());
    if (c->hooks.kept && p && splash_prefix_point_seq(p) == point)
        c->hooks.kept(c->hooks.ctx, point, plan->tokens, pos);
}

void splash_ecache_capture(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                           int32_t pos, void *seq, int32_t n_boundaries_after, int32_t *last_point,
                           uint64_t counted)
{
    int cls = c->points ? wants(plan, pos, n_boundaries_after, *last_point) : -1;
    if (cls < 0)
        return;
    if (splash_prefix_cache_find(c->points, plan->tokens, pos)) {
        *last_point = pos;
        return;
    }
    if (!splash_ecache_make_room(c, counted, point_bytes(c, pos), 0))
        return;
    void *point;
    struct splash_err err;
    if (splash_family_seq_fork(c->fam, c->model, seq, pos, &point, &err) != SPLASH_OK)
        return;
    keep(c, plan, pos, point, cls);
    *last_point = pos;
}

int32_t splash_ecache_run_points(struct splash_engine_cache *c,
                                 const struct splash_prefill_plan *plan, int32_t pos,
                                 const int32_t *ends, int32_t n, uint8_t *flags,
                                 int32_t *last_point, uint64_t counted, uint64_t need)
{
    memset(flags, 0, (size_t)n);
    if (!c->points)
        return 0;
    int32_t after = 0, wanted = 0;
    for (int32_t p = pos + 1; p < plan->n; p++)
        after += splash_plan_is_boundary(plan, p);
    int32_t at = pos;
    for (int32_t k = 0; k + 1 < n; k++) {
        for (; at < ends[k]; at++)
            after -= splash_plan_is_boundary(plan, at + 1);
        int cls = wants(plan, ends[k], after, *last_point);
        if (cls < 0)
            continue;
        if (splash_prefix_cache_find(c->points, plan->tokens, ends[k])) {
            *last_point = ends[k];
            continue;
        }
        /* the step's own pages first: a point memory cannot hold is not taken */
        need += point_bytes(c, ends[k]);
        if (!splash_ecache_make_room(c, counted, need, 0))
            break;
        flags[k] = (uint8_t)(1 + cls);
        *last_point = ends[k];
        wanted++;
    }
    return wanted;
}

void splash_ecache_keep_runs(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                             const int32_t *ends, int32_t n, const uint8_t *flags, void **forks)
{
    for (int32_t k = 0; k < n; k++)
        if (flags[k] && forks[k])
            keep(c, plan, ends[k], forks[k], flags[k] - 1);
}

void splash_ecache_note(struct splash_engine_cache *c, uint64_t counted)
{
    uint64_t used = splash_ecache_used(c, counted);
    if (used > c->peak)
        c->peak = used;
}

json_t *splash_ecache_status(const struct splash_engine_cache *c, uint64_t counted)
{
    struct splash_prefix_stats s = {0};
    if (c->points)
        splash_prefix_cache_stats(c->points, &s);
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:o}",
                     "enabled", c->points != NULL, "points", (json_int_t)s.points, "turn_points",
                     (json_int_t)s.turn_points, "inserted", (json_int_t)s.inserted, "evicted",
                     (json_int_t)s.evicted, "lookups", (json_int_t)s.lookups, "hits",
                     (json_int_t)s.hits, "cached_tokens", (json_int_t)c->reused,
                     "prefilled_tokens", (json_int_t)c->prefilled, "written_ahead",
                     (json_int_t)c->written_ahead, "writing_ahead",
                     (json_int_t)c->ahead_in_flight, "room_waits", (json_int_t)c->room_waits,
                     "bytes_used",
                     (json_int_t)splash_ecache_used(c, counted), "bytes_peak",
                     (json_int_t)c->peak, "bytes_limit", (json_int_t)c->pool, "disk",
                     splash_disk_cache_status(c->disk, c->disk_why));
}

static int point_on_disk(struct splash_engine_cache *c, const struct splash_prefix_point *p)
{
    int32_t *t = splash_prefix_point_path(p);
    int has = !t || splash_disk_cache_has(c->disk, t, splash_prefix_point_tokens(p));
    free(t);
    return has;
}

static int on_disk(void *ctx, const struct splash_prefix_point *p)
{
    return point_on_disk(ctx, p);
}

/* Write-ahead's rules for p (server.md "SSD cache"): when it falls due (its publication
 * plus the delay), or -1 when it never does as things stand: without the persistent
 * cache, a point under the minimum, one whose request still runs, or any while no reclaim
 * reached a point with no copy within the last minute. */
static double due_at(const struct splash_engine_cache *c, const struct splash_prefix_point *p,
                     double now)
{
    if (!splash_disk_cache_persistent(c->disk) &&
        (!c->reclaimed || now - c->reclaimed_at > SPLASH_WRITE_AHEAD_RECENT_S ||
         splash_prefix_point_tokens(p) < SPLASH_WRITE_AHEAD_MIN_TOKENS ||
         splash_prefix_point_running(p)))
        return -1;
    return splash_prefix_point_published(p) + c->ahead_delay;
}

/* Refuses a point not due now, or copied already. */
static int not_due(void *ctx, const struct splash_prefix_point *p)
{
    struct splash_engine_cache *c = ctx;
    double at = due_at(c, p, mono_seconds());
    return at < 0 || at > mono_seconds() || point_on_disk(c, p);
}

void splash_ecache_request_ended(struct splash_engine_cache *c, uint64_t id)
{
    if (c->points)
        splash_prefix_cache_request_ended(c->points, id);
}

void splash_ecache_flush(struct splash_engine_cache *c, double seconds)
{
    double until = mono_seconds() + seconds;
    /* every point is queued, the turn points newest first (what the next turn resumes
     * from), then the others; the I/O thread has what is left of the time, and what it
     * has not written by then gives up */
    struct splash_prefix_point *p;
    while (c->points && (p = splash_prefix_cache_uncopied(c->points, 1, on_disk, c)) &&
           mono_seconds() < until)
        splash_prefix_cache_evict_point(c->points, p);
    while (c->points && mono_seconds() < until && splash_prefix_cache_evict_one(c->points, 1))
        ;
    double left = until - mono_seconds();
    splash_disk_cache_wait(c->disk, left > 0 ? left : 0, 0);
    splash_disk_cache_probation_passed(c->disk); /* a clean stop */
}

void splash_ecache_failed(struct splash_engine_cache *c)
{
    splash_disk_cache_failed(c->disk);
}

/* The probation minute's end, or -1 once it is over (or without a persistent cache). */
static double probation_ends(struct splash_engine_cache *c)
{
    if (!c->disk || !splash_disk_cache_persistent(c->disk) || c->probation_over)
        return -1;
    return c->started + SPLASH_PROBATION_S;
}

void splash_ecache_tick(struct splash_engine_cache *c, uint64_t counted)
{
    if (!c->disk || !c->points)
        return;
    splash_disk_cache_reap(c->disk);
    double ends = probation_ends(c);
    if (ends >= 0 && mono_seconds() >= ends) {
        splash_disk_cache_probation_passed(c->disk);
        c->probation_over = 1;
    }
    uint64_t used = splash_ecache_used(c, counted);
    /* the copy's fork takes a state beside the pool's other holders */
    if (c->ahead_in_flight >= SPLASH_WRITE_AHEAD_IN_FLIGHT || used + c->state_bytes > c->pool)
        return;
    struct splash_prefix_point *p = splash_prefix_cache_uncopied(c->points, 1, not_due, c);
    if (!p)
        return;
    int32_t n = splash_prefix_point_tokens(p);
    int32_t *tokens = splash_prefix_point_path(p);
    void *fork = NULL;
    struct splash_err err;
    /* a fork of the point is written (its pages shared, its state copied): the point
     * itself stays free to leave memory whenever eviction takes it */
    if (tokens && splash_family_seq_fork(c->fam, c->model, splash_prefix_point_seq(p), n, &fork,
                                         &err) == SPLASH_OK &&
        !queue_save(c, tokens, n, fork, SPLASH_POINT_TURN, 1))
        splash_family_seq_destroy(c->fam, c->model, fork);
    free(tokens);
}

int splash_ecache_idle_wait_ms(struct splash_engine_cache *c)
{
    if (!c->disk || !c->points)
        return -1;
    if (splash_disk_cache_pending(c->disk))
        return 50;
    /* the next point to fall due, or the probation minute's end, wakes the idle engine */
    double now = mono_seconds(), first = probation_ends(c);
    for (struct splash_prefix_point *p = splash_prefix_cache_next_uncopied(c->points, NULL); p;
         p = splash_prefix_cache_next_uncopied(c->points, p)) {
        double at = due_at(c, p, now);
        if (at >= 0 && (first < 0 || at < first) && !point_on_disk(c, p))
            first = at;
    }
    if (first < 0)
        return -1;
    /* one due now waits on memory: an idle engine looks again each second */
    return first <= now ? 1000 : (int)((first - now) * 1000.0) + 1;
}
