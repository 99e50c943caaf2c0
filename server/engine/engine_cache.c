/* The engine's prefix caching and memory room (server/engine/engine_cache.h). */
#include "server/engine/engine_cache.h"

#include "core/family.h"

static void drop_seq(void *ctx, void *seq)
{
    struct splash_engine_cache *c = ctx;
    splash_family_seq_destroy(c->fam, c->model, seq);
}

void splash_ecache_init(struct splash_engine_cache *c, const struct splash_family_plugin *fam,
                        void *model, const struct splash_model_info *info, uint64_t pool, int off)
{
    *c = (struct splash_engine_cache){.fam = fam, .model = model, .pool = pool};
    c->page_tokens = info->kv_page_tokens > 0 ? info->kv_page_tokens : 1;
    c->page_bytes = info->kv_page_bytes ? info->kv_page_bytes
                                        : info->kv_bytes_per_token * (uint64_t)c->page_tokens;
    c->state_bytes = info->state_bytes_per_seq;
    c->kv_bytes_per_token = info->kv_bytes_per_token;
    if (!off && splash_family_can_fork(fam))
        c->points = splash_prefix_cache_create(drop_seq, c);
}

void splash_ecache_free(struct splash_engine_cache *c)
{
    splash_prefix_cache_destroy(c->points);
    c->points = NULL;
}

uint64_t splash_ecache_used(const struct splash_engine_cache *c, uint64_t counted)
{
    return splash_family_cache_bytes(c->fam, c->model, counted);
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

enum splash_status splash_ecache_resume(struct splash_engine_cache *c,
                                        const struct splash_prefill_plan *plan, void **seq,
                                        int32_t *cached, struct splash_err *err)
{
    *cached = 0;
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
    return c->points ? splash_prefix_cache_peek(c->points, plan->tokens, plan->n - 1, plan_accepts,
                                                (void *)plan)
                     : 0;
}

void splash_ecache_capture(struct splash_engine_cache *c, const struct splash_prefill_plan *plan,
                           int32_t pos, void *seq, int32_t n_boundaries_after, int32_t *last_point,
                           uint64_t counted)
{
    if (!c->points || !splash_plan_is_cut(plan, pos))
        return;
    int turn = splash_plan_is_boundary(plan, pos) && n_boundaries_after < SPLASH_TURN_POINTS;
    if (!turn && pos - *last_point < SPLASH_CHECKPOINT_SPACING)
        return;
    if (splash_prefix_cache_find(c->points, plan->tokens, pos)) {
        *last_point = pos;
        return;
    }
    /* a point costs a state and, mid-page, the copy of the page either side appends into */
    uint64_t need = c->state_bytes + (pos % c->page_tokens ? c->page_bytes : 0);
    if (!splash_ecache_make_room(c, counted, need, 0))
        return;
    void *point;
    struct splash_err err;
    if (splash_family_seq_fork(c->fam, c->model, seq, pos, &point, &err) != SPLASH_OK)
        return;
    if (splash_prefix_cache_insert(c->points, plan->tokens, pos, point,
                                   turn ? SPLASH_POINT_TURN : SPLASH_POINT_CHUNK)) {
        splash_family_seq_destroy(c->fam, c->model, point);
        return;
    }
    *last_point = pos;
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
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "enabled",
                     c->points != NULL, "points", (json_int_t)s.points, "turn_points",
                     (json_int_t)s.turn_points, "inserted", (json_int_t)s.inserted, "evicted",
                     (json_int_t)s.evicted, "lookups", (json_int_t)s.lookups, "hits",
                     (json_int_t)s.hits, "cached_tokens", (json_int_t)c->reused,
                     "prefilled_tokens", (json_int_t)c->prefilled, "bytes_used",
                     (json_int_t)splash_ecache_used(c, counted), "bytes_peak",
                     (json_int_t)c->peak, "bytes_limit", (json_int_t)c->pool);
}
