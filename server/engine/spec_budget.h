/* The verify budget (--verify-rows auto on a MoE target): each row a MoE target verifies
 * routes its own experts, which a rejected row reads for nothing, so a cycle verifies the
 * rows that maximise the expected accepted tokens per unit of the step's cost. */
#ifndef SPLASH_ENGINE_SPEC_BUDGET_H
#define SPLASH_ENGINE_SPEC_BUDGET_H

#include <stdint.h>

#include "server/engine/speculate.h"

#define SPLASH_BUDGET_SAMPLES 32 /* the cost line's latest steps */
#define SPLASH_BUDGET_ALL_EVERY 32 /* every 32nd cycle verifies every row (keeps the fit spread) */

struct splash_verify_budget {
    /* acceptance: at each position, proposals verified there after every earlier one was
     * accepted, and those accepted; decayed so the last few thousand labels count */
    double seen[SPLASH_SPEC_MAX_ROWS - 1], accepted[SPLASH_SPEC_MAX_ROWS - 1];
    /* cost: decode steps' rows and wall seconds */
    double rows[SPLASH_BUDGET_SAMPLES], seconds[SPLASH_BUDGET_SAMPLES];
    int n_samples, next_sample;
    uint64_t cycles;
};

void splash_budget_init(struct splash_verify_budget *b);
/* One lane's cycle: n_verified proposals verified, the first n_accepted accepted. */
void splash_budget_label(struct splash_verify_budget *b, int32_t n_verified, int32_t n_accepted);
/* A decode step (no prompt rows) of `rows` rows in all took `seconds`. */
void splash_budget_time(struct splash_verify_budget *b, int32_t rows, double seconds);
/* The probability that the proposal at position j is accepted once those before it were. */
double splash_budget_accept_p(const struct splash_verify_budget *b, int32_t j);
/* The step's cost at `rows` rows, in the line's units (seconds), from the fit. */
double splash_budget_cost(const struct splash_verify_budget *b, int32_t rows);
/* Cuts the speculating lanes' proposals n_prop[0..n_lanes) to the depth that maximises
 * the expected tokens over the step's cost, the step holding base_rows rows besides them
 * (every lane's anchor, a prompt chunk); every SPLASH_BUDGET_ALL_EVERY-th call keeps them
 * all. Returns the depth chosen. */
int32_t splash_budget_choose(struct splash_verify_budget *b, int32_t *n_prop, int n_lanes,
                             int32_t base_rows);

#endif
