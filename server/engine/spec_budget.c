/* The verify budget: a per-position acceptance estimate (prompt lookup gives no confidence
 * to condition on) and a least-squares cost line in the step's rows. */
#include "server/engine/spec_budget.h"

#include <string.h>

#define DECAY 0.999          /* per label: about the last few thousand count */
#define PRIOR_SEEN 2.0       /* a prior of one accepted, one rejected at every position */
#define PRIOR_ROW_SHARE 0.1  /* before the fit: a row costs a tenth of a one-row step */
#define PRIOR_WEIGHT 8.0     /* steps' worth of weight the prior slope keeps in the fit */

void splash_budget_init(struct splash_verify_budget *b)
{
    memset(b, 0, sizeof *b);
}

void splash_budget_label(struct splash_verify_budget *b, int32_t n_verified, int32_t n_accepted)
{
    for (int j = 0; j < SPLASH_SPEC_MAX_ROWS - 1; j++) {
        b->seen[j] *= DECAY;
        b->accepted[j] *= DECAY;
    }
    /* positions up to the first rejection are labelled; those after it say nothing */
    for (int32_t j = 0; j < n_verified && j <= n_accepted && j < SPLASH_SPEC_MAX_ROWS - 1; j++) {
        b->seen[j] += 1;
        b->accepted[j] += j < n_accepted;
    }
}

void splash_budget_time(struct splash_verify_budget *b, int32_t rows, double seconds)
{
    b->rows[b->next_sample] = rows;
    b->seconds[b->next_sample] = seconds;
    b->next_sample = (b->next_sample + 1) % SPLASH_BUDGET_SAMPLES;
    if (b->n_samples < SPLASH_BUDGET_SAMPLES)
        b->n_samples++;
}

double splash_budget_accept_p(const struct splash_verify_budget *b, int32_t j)
{
    return (b->accepted[j] + PRIOR_SEEN / 2) / (b->seen[j] + PRIOR_SEEN);
}

/* intercept a and slope s of seconds = a + s * rows; the slope shrunk toward the prior's */
static void cost_line(const struct splash_verify_budget *b, double *a, double *s)
{
    int n = b->n_samples;
    double mr = 0, mt = 0;
    for (int i = 0; i < n; i++) {
        mr += b->rows[i] / n;
        mt += b->seconds[i] / n;
    }
    double sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (b->rows[i] - mr) * (b->rows[i] - mr);
        sxy += (b->rows[i] - mr) * (b->seconds[i] - mt);
    }
    double fit = sxx > 0 ? sxy / sxx : 0;
    double base = n ? mt / (1 + PRIOR_ROW_SHARE * (mr - 1)) : 1.0;
    double prior = PRIOR_ROW_SHARE * base;
    double w = sxx > 0 ? (double)n : 0;
    *s = (w * fit + PRIOR_WEIGHT * prior) / (w + PRIOR_WEIGHT);
    if (*s < 0)
        *s = 0;
    *a = n ? mt - *s * mr : base - prior;
    if (*a <= 0)
        *a = 1e-6;
}

double splash_budget_cost(const struct splash_verify_budget *b, int32_t rows)
{
    double a, s;
    cost_line(b, &a, &s);
    return a + s * rows;
}

int32_t splash_budget_choose(struct splash_verify_budget *b, int32_t *n_prop, int n_lanes,
                             int32_t base_rows)
{
    int32_t most = 0;
    for (int l = 0; l < n_lanes; l++)
        most = n_prop[l] > most ? n_prop[l] : most;
    if (b->cycles++ % SPLASH_BUDGET_ALL_EVERY == 0)
        return most;
    double a, s;
    cost_line(b, &a, &s);
    /* survival at each depth: what verifying one more row adds to a lane's tokens */
    double surv[SPLASH_SPEC_MAX_ROWS], p = 1;
    for (int32_t j = 0; j < most; j++)
        surv[j] = p *= splash_budget_accept_p(b, j);
    int32_t best = 0;
    double best_rate = 0;
    for (int32_t m = 0; m <= most; m++) {
        double tokens = 0;
        int32_t rows = base_rows;
        for (int l = 0; l < n_lanes; l++) {
            int32_t k = n_prop[l] < m ? n_prop[l] : m;
            rows += k;
            tokens += 1;
            for (int32_t j = 0; j < k; j++)
                tokens += surv[j];
        }
        double rate = tokens / (a + s * rows);
        if (m == 0 || rate > best_rate) {
            best = m;
            best_rate = rate;
        }
    }
    for (int l = 0; l < n_lanes; l++)
        if (n_prop[l] > best)
            n_prop[l] = best;
    return best;
}
