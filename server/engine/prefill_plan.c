/* Deterministic prefill cuts (server/engine/prefill_plan.h). */
#include "server/engine/prefill_plan.h"

int splash_plan_is_boundary(const struct splash_prefill_plan *p, int32_t pos)
{
    return p->reuse >= 0 && pos > 0 && pos <= p->n && p->tokens[pos - 1] == p->reuse;
}

/* The segment holding pos: [*start, *end), start a boundary (or 0), end the next one. */
static void segment(const struct splash_prefill_plan *p, int32_t pos, int32_t *start,
                    int32_t *end)
{
    int32_t s = pos;
    while (s > 0 && !splash_plan_is_boundary(p, s))
        s--;
    int32_t e = pos + 1;
    while (e < p->n && !splash_plan_is_boundary(p, e))
        e++;
    *start = s;
    *end = e < p->n ? e : p->n;
}

int32_t splash_plan_next_cut(const struct splash_prefill_plan *p, int32_t pos, int32_t budget)
{
    int32_t s, e;
    segment(p, pos, &s, &e);
    int32_t tail = s + (e - s) / SPLASH_PLAN_STEP * SPLASH_PLAN_STEP;
    if (pos >= tail)
        return e;
    int64_t want = (int64_t)pos + (budget > 0 ? budget : 1);
    int64_t cut = s + (want - s) / SPLASH_PLAN_STEP * SPLASH_PLAN_STEP;
    if (cut <= pos)
        cut = pos + SPLASH_PLAN_STEP;
    return cut < tail ? (int32_t)cut : tail;
}

int splash_plan_is_cut(const struct splash_prefill_plan *p, int32_t pos)
{
    if (pos <= 0 || pos >= p->n)
        return 0;
    if (splash_plan_is_boundary(p, pos))
        return 1;
    int32_t s, e;
    segment(p, pos, &s, &e);
    int32_t tail = s + (e - s) / SPLASH_PLAN_STEP * SPLASH_PLAN_STEP;
    return (pos - s) % SPLASH_PLAN_STEP == 0 && pos <= tail;
}

int32_t splash_plan_runs(const struct splash_prefill_plan *p, int32_t pos, int32_t budget,
                         int32_t *ends, int32_t max)
{
    int32_t n = 0, at = pos;
    if (budget < 1)
        budget = 1;
    while (at < p->n && n < max) {
        int32_t left = budget - (at - pos);
        int32_t cut = splash_plan_next_cut(p, at, left > 0 ? left : 1);
        if (n > 0 && cut - pos > budget)
            break;
        ends[n++] = cut;
        at = cut;
    }
    return n;
}
