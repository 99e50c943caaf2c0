/* Where a prompt's prefill is cut into forward calls, so that a prompt resumed from a
 * cached state computes exactly what it computes from scratch.
 *
 * The delta rule runs over 64-token chunks from each call's first token, and a call of
 * fewer than 16 tokens runs token by token: where calls start changes the last bits.
 * So calls start only at positions fixed by the prompt's own tokens: its turn
 * boundaries (just after each reuse token, <|im_end|> for QWEN), and within a segment
 * between boundaries at whole 64-token steps from its start; the segment's last partial
 * step is a call of its own. Any schedule of chunk sizes then computes the same chunks,
 * and every call start is a restore point a later prompt can resume from. */
#ifndef SPLASH_ENGINE_PREFILL_PLAN_H
#define SPLASH_ENGINE_PREFILL_PLAN_H

#include <stdint.h>

#define SPLASH_PLAN_STEP 64 /* the delta rule's chunk */

struct splash_prefill_plan {
    const int32_t *tokens;
    int32_t n;        /* tokens to prefill */
    int32_t reuse;    /* the reuse token id, -1: none (one segment) */
};

/* The end of the next call from pos (< n) for a budget of at least one token. */
int32_t splash_plan_next_cut(const struct splash_prefill_plan *p, int32_t pos, int32_t budget);

/* One forward call's runs from pos (< n) for a family that takes several runs in a call
 * (family ABI 1.3): the first run whatever the budget, then whole runs while the call
 * holds at most budget tokens. Each run is what one call would have been; ends[] gets
 * their ends (prompt positions), at most max of them. Returns how many. */
int32_t splash_plan_runs(const struct splash_prefill_plan *p, int32_t pos, int32_t budget,
                         int32_t *ends, int32_t max);

/* 1 when a call starts at pos in this prompt's plan (0 < pos < n), so a state cached
 * there resumes it exactly. */
int splash_plan_is_cut(const struct splash_prefill_plan *p, int32_t pos);

/* 1 when pos is a turn boundary (just after a reuse token). */
int splash_plan_is_boundary(const struct splash_prefill_plan *p, int32_t pos);

#endif
