/* The SSD tier's counters (splash_disk_cache_stats) and its part of /status. */
#include "server/engine/disk_cache_internal.h"

void splash_disk_cache_stats(const struct splash_disk_cache *d_, struct splash_disk_stats *s)
{
    struct splash_disk_cache *d = (struct splash_disk_cache *)d_;
    pthread_mutex_lock(&d->mu);
    *s = d->st;
    s->quota = d->quota;
    s->used = used_bytes(d);
    s->entries = d->n;
    s->pages = (uint64_t)d->pg.live;
    s->pages_bytes = (uint64_t)d->pg.live * d->pg.slot_bytes;
    s->states = d->n;
    s->states_bytes = d->states_bytes;
    s->budget_left = 0;
    if (d->per_day) {
        double now = mono_now(), cap = (double)d->per_day / 4.0;
        double b = d->bucket + (now - d->bucket_at) * (double)d->per_day / 86400.0;
        s->budget_left = (uint64_t)(b > cap ? cap : b);
    }
    s->pending = (uint64_t)d->busy;
    for (struct job *j = d->queue; j; j = j->next)
        s->pending++;
    pthread_mutex_unlock(&d->mu);
}

json_t *splash_disk_cache_status(const struct splash_disk_cache *d, const char *why)
{
    if (!d)
        return json_pack("{s:b, s:s}", "enabled", 0, "why", why ? why : "");
    struct splash_disk_stats s;
    splash_disk_cache_stats(d, &s);
    json_t *st = json_pack("{s:b, s:b, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:I, s:s, s:I}",
                     "enabled", 1, "persistent", d->persist[0] != 0, "taken_back",
                     (json_int_t)s.taken_back, "dir", d->dir, "capacity_bytes",
                     (json_int_t)s.quota, "used_bytes", (json_int_t)s.used, "entries",
                     (json_int_t)s.entries, "writes", (json_int_t)s.writes, "written_bytes",
                     (json_int_t)s.written_bytes, "hits", (json_int_t)s.hits, "read_bytes",
                     (json_int_t)s.read_bytes, "refused_room", (json_int_t)s.refused_room,
                     "refused_budget", (json_int_t)s.refused_budget, "corrupt",
                     (json_int_t)s.corrupt, "write_budget_bytes", (json_int_t)s.budget_left,
                     "writes_per_day", (json_int_t)d->per_day, "writes_gated",
                     s.closed ? "closed" : (d->per_day && s.refused_budget ? "budget" : "no"),
                     "writes_in_flight", (json_int_t)s.pending);
    if (st) {
        json_object_set_new(st, "pages",
                            json_pack("{s:I, s:I, s:I, s:I, s:i}", "count", (json_int_t)s.pages,
                                      "bytes", (json_int_t)s.pages_bytes, "shared",
                                      (json_int_t)s.pages_shared, "page_bytes",
                                      (json_int_t)d->pg.page_bytes, "page_tokens",
                                      (int)d->pg.page_tokens));
        json_object_set_new(st, "states",
                            json_pack("{s:I, s:I}", "count", (json_int_t)s.states, "bytes",
                                      (json_int_t)s.states_bytes));
    }
    if (st && d->persist[0]) {
        pthread_mutex_lock((pthread_mutex_t *)&d->mu);
        json_object_set_new(st, "other_caches_bytes", json_integer((json_int_t)d->others));
        json_object_set_new(st, "probation",
                            json_pack("{s:b, s:i, s:b}", "on_probation", d->on_probation,
                                      "failed_starts", d->failed_starts, "started_empty",
                                      d->started_empty));
        pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
    }
    return st;
}
