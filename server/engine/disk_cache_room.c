/* The SSD tier's room (server/engine/disk_cache_internal.h): a point leaving (its pages
 * let go, its state's place freed), a damaged page taking every point that holds it, the
 * first-fit place for a new state, which point eviction takes first, and the daily write
 * budget a write must fit. */
#include "server/engine/disk_cache_internal.h"

#include <stdlib.h>

/* A page's reference let go; its slot freed (and its space returned) by the last. */
void disk_cache_release_page(struct splash_disk_cache *d, int64_t slot)
{
    if (disk_pages_release(&d->pg, slot))
        disk_cache_punch(d->pages_fd, slot_at(d, slot), d->pg.slot_bytes);
}

/* x leaves the tier: its pages let go, its state's room freed. With the lock held, x
 * neither pending nor reading. */
void disk_cache_drop(struct splash_disk_cache *d, struct entry *x)
{
    for (int64_t i = 0; i < x->n_pages; i++)
        disk_cache_release_page(d, x->chain[i]);
    d->states_bytes -= x->span;
    disk_cache_punch(d->fd, x->off, x->span);
    free(x->tokens);
    free(x->chain);
    *x = d->e[--d->n];
    disk_cache_save_index(d);
}

/* x leaves now, or (written or read right now) once that ends. */
static void drop_or_doom(struct splash_disk_cache *d, struct entry *x)
{
    if (x->pending || x->reading)
        x->doomed = 1;
    else
        disk_cache_drop(d, x);
}

static int holds(const struct entry *x, int64_t slot)
{
    for (int64_t i = 0; i < x->n_pages; i++)
        if (x->chain[i] == slot)
            return 1;
    return 0;
}

/* The page at slot is damaged or was never written: every point whose chain holds it
 * goes. Returns how many. With the lock held. */
size_t disk_cache_page_gone(struct splash_disk_cache *d, int64_t slot)
{
    disk_pages_mark_bad(&d->pg, slot);
    size_t gone = 0;
    for (size_t i = 0; i < d->n;) {
        struct entry *x = &d->e[i];
        if (x->doomed || !holds(x, slot)) {
            i++;
            continue;
        }
        gone++;
        int stays = x->pending || x->reading;
        drop_or_doom(d, x);
        i += stays; /* a dropped entry's place holds the last one now */
    }
    return gone;
}

static int by_offset(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a, *y = *(const struct entry *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The first gap of span bytes in the states file's [0, quota), or -1. */
int64_t disk_cache_gap(struct splash_disk_cache *d, uint64_t span)
{
    struct entry **sorted = malloc((d->n ? d->n : 1) * sizeof *sorted);
    if (!sorted)
        return -1;
    for (size_t i = 0; i < d->n; i++)
        sorted[i] = &d->e[i];
    qsort(sorted, d->n, sizeof *sorted, by_offset);
    uint64_t at = 0;
    int64_t found = -1;
    for (size_t i = 0; i <= d->n && found < 0; i++) {
        uint64_t next = i < d->n ? sorted[i]->off : d->quota;
        if (next >= at + span)
            found = (int64_t)at;
        else if (i < d->n)
            at = sorted[i]->off + sorted[i]->span;
    }
    free(sorted);
    return found;
}

/* The point room goes from first: checkpoints before turn points, the least recently
 * used first (a point goes whole; the pages it alone held go with it). */
struct entry *disk_cache_victim(struct splash_disk_cache *d)
{
    struct entry *v = NULL;
    for (size_t i = 0; i < d->n; i++) {
        struct entry *x = &d->e[i];
        if (x->pending || x->reading)
            continue;
        if (x->doomed)
            return x;
        if (!v || x->cls < v->cls || (x->cls == v->cls && x->used < v->used))
            v = x;
    }
    return v;
}

int disk_cache_budget_allows(struct splash_disk_cache *d, uint64_t span)
{
    if (!d->per_day)
        return 1;
    double now = mono_now(), cap = (double)d->per_day / 4.0;
    d->bucket += (now - d->bucket_at) * (double)d->per_day / 86400.0;
    if (d->bucket > cap)
        d->bucket = cap;
    d->bucket_at = now;
    if ((double)span > d->bucket)
        return 0;
    d->bucket -= (double)span;
    return 1;
}
