/* What a mixture-of-experts layer does around its experts whatever the family: the k best
 * experts of a row by score, the row laid out once per expert it takes, and the experts'
 * outputs summed by their weights. Family-neutral (gpt_oss and flint use them); names are
 * prefixed moe_route_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_MOE_ROUTE_H
#define SPLASH_FAMILIES_MOE_ROUTE_H

#include <stdint.h>

/* ids[0..k) = the k best scores, best first: k passes, each the best score not yet
 * taken (ties to the lower index). */
void moe_route_top_k(const float *scores, int32_t n_expert, int32_t k, int32_t *ids);

/* xk (k, width) = row x k times, once per expert it takes. */
void moe_route_spread(const float *x, int64_t width, int32_t k, float *xk);

/* out[r] (+)= sum_j w[r][j] y[r * K + j], a parallel range over rows r. */
struct moe_route_combine {
    float *out;     /* (n, E) */
    const float *y; /* (n * K, E): the experts' outputs */
    const float *w; /* (n, K) */
    int64_t E;
    int32_t K;
    int overwrite; /* 1: out = the sum; 0: out += the sum */
};
void moe_route_combine_range(void *ctx, int64_t begin, int64_t end, int thread);

#endif
