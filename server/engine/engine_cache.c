/* The engine's prefix caching and memory room (server/engine/engine_cache.h). */
#include "server/engine/engine_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/family.h"
#include "core/host_impl.h"

static void drop_seq(void *ctx, void *seq)
{
    struct splash_engine_cache *c = ctx;
    if (c->hooks.dropped)
        c->hooks.dropped(c->hooks.ctx, seq);
    splash_family_seq_destroy(c->fam, c->model, seq);
}

struct saving {
    struct splash_engine_cache *c;
    void *seq;
};

static int save_into(void *ctx, int (*write)(void *wctx, const void *bytes, size_t n),
                     void *wctx)
{
    struct saving *sv = ctx;
    struct splash_err err;
    return splash_family_seq_save(sv->c->fam, sv->c->model, sv->seq, write, wctx, &err) !=
           SPLASH_OK;
}

/* Eviction's copy of a restore point on the SSD tier, as the family saves it, straight
 * into the file a page at a time. */
static void spill(void *ctx, const int32_t *tokens, int32_t n, void *seq,
                  enum splash_point_class cls)
{
    struct splash_engine_cache *c = ctx;
    if (splash_disk_cache_has(c->disk, tokens, n))
        return; /* read back from it, or written before: no second write */
    uint64_t size = splash_family_seq_saved_bytes(c->fam, c->model, n);
    struct saving sv = {.c = c, .seq = seq};
    if (size)
        splash_disk_cache_put_with(c->disk, tokens, n, (int)cls, size, save_into, &sv);
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
    if (!off && splash_family_can_fork(fam))
        c->points = splash_prefix_cache_create(drop_seq, c);
    snprintf(c->disk_why, sizeof c->disk_why, "--max-cache-disk 0");
    if (!c->points)
        snprintf(c->disk_why, sizeof c->disk_why, "no prefix cache");
    else if (!splash_family_can_save(fam))
        snprintf(c->disk_why, sizeof c->disk_why, "family plugin %s does not save sequences",
                 fam->header.name);
    else if (disk && splash_disk_cache_open(disk, &c->disk, c->disk_why, sizeof c->disk_why) ==
                         SPLASH_OK &&
             c->disk)
        splash_prefix_cache_set_spill(c->points, spill, c);
}

void splash_ecache_free(struct splash_engine_cache *c)
{
    splash_prefix_cache_destroy(c->points);
    c->points = NULL;
    splash_disk_cache_close(c->disk);
    c->disk = NULL;
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
    for (;;) {
        uint64_t used = splash_ecache_used(c, counted);
        if (used + need <= c->pool)
            return 1;
        if (!c->points || !splash_prefix_cache_evict_one(c->points, all))
            return 0;
    }
}

static int plan_accepts(void *ctx, int32_t len)
{
    const struct splash_prefill_plan *plan = ctx;
    return splash_plan_is_cut(plan, len);
}

/* A point the SSD tier holds at tokens[0..n) back in memory, as a restore point. */
static int take_back(struct splash_engine_cache *c, const int32_t *tokens, int32_t n,
                     uint64_t counted)
{
    uint64_t size = 0;
    int cls = SPLASH_POINT_TURN;
    void *buf = splash_disk_cache_get(c->disk, tokens, n, &size, &cls);
    if (!buf)
        return 0;
    void *seq = NULL;
    struct splash_err err;
    int ok = 0;
    /* its pages and state within the plan, as for any point (a start may take them all) */
    if (!splash_ecache_make_room(c, counted, size, 1))
        ok = 0;
    else if (splash_family_seq_load(c->fam, c->model, buf, size, &seq, &err) != SPLASH_OK)
        splash_log(SPLASH_LOG_WARN, NULL, "SSD cache · the entry of %d tokens is skipped: %s", n,
                   err.msg);
    else if (splash_prefix_cache_insert(c->points, tokens, n, seq,
                                        cls == SPLASH_POINT_CHUNK ? SPLASH_POINT_CHUNK
                                                                  : SPLASH_POINT_TURN))
        splash_family_seq_destroy(c->fam, c->model, seq);
    else
        ok = 1;
    struct splash_prefix_point *p = ok ? splash_prefix_cache_find(c->points, tokens, n) : NULL;
    if (p)
        splash_prefix_point_set_copied(p);
    free(buf);
    return ok;
}

enum splash_status splash_ecache_resume(struct splash_engine_cache *c,
                                        const struct splash_prefill_plan *plan, void **seq,
                                        int32_t *cached, int *from_disk, uint64_t counted,
                                        struct splash_err *err)
{
    *cached = 0;
    *from_disk = 0;
    if (c->disk) {
        int32_t mem = splash_prefix_cache_peek(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                               (void *)plan);
        int32_t disk = splash_disk_cache_peek(c->disk, plan->tokens, plan->n - 1, plan_accepts,
                                              (void *)plan);
        if (disk > mem)
            *from_disk = take_back(c, plan->tokens, disk, counted);
    }
    struct splash_prefix_point *p =
        c->points ? splash_prefix_cache_lookup(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                               (void *)plan)
                  : NULL;
    if (p) {
        void *src = splash_prefix_point_seq(p);
        int32_t n = splash_prefix_point_tokens(p);
        if (splash_family_seq_fork(c->fam, c->model, src, n, seq, err) == SPLASH_OK) {
            *cached = n;
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
    int32_t disk = c->disk ? splash_disk_cache_peek(c->disk, plan->tokens, plan->n - 1,
                                                    plan_accepts, (void *)plan)
                           : 0;
    return disk > mem ? disk : mem;
}

/* The class of point the rules want at pos (a cut of the plan), or -1. */
static int wants(const struct splash_prefill_plan *plan, int32_t pos, int32_t n_boundaries_after,
                 int32_t last_point)
{
    if (!splash_plan_is_cut(plan, pos))
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
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
                     "enabled", c->points != NULL, "points", (json_int_t)s.points, "turn_points",
                     (json_int_t)s.turn_points, "inserted", (json_int_t)s.inserted, "evicted",
                     (json_int_t)s.evicted, "lookups", (json_int_t)s.lookups, "hits",
                     (json_int_t)s.hits, "cached_tokens", (json_int_t)c->reused,
                     "prefilled_tokens", (json_int_t)c->prefilled, "bytes_used",
                     (json_int_t)splash_ecache_used(c, counted), "bytes_peak",
                     (json_int_t)c->peak, "bytes_limit", (json_int_t)c->pool, "disk",
                     splash_disk_cache_status(c->disk, c->disk_why));
}

void splash_ecache_flush(struct splash_engine_cache *c, double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (c->points && splash_prefix_cache_evict_one(c->points, 1)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > seconds)
            break;
    }
}
