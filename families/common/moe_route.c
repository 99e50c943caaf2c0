/* A mixture-of-experts layer's routing and weighted sum (moe_route.h). */
#include "families/common/moe_route.h"

#include <string.h>

void moe_route_top_k(const float *scores, int32_t n_expert, int32_t k, int32_t *ids)
{
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; e++) {
            int taken = 0;
            for (int32_t i = 0; i < j && !taken; i++)
                taken = ids[i] == e;
            if (!taken && (best < 0 || scores[e] > scores[best]))
                best = e;
        }
        ids[j] = best;
    }
}

void moe_route_spread(const float *x, int64_t width, int32_t k, float *xk)
{
    for (int32_t j = 0; j < k; j++)
        memcpy(xk + j * width, x, (size_t)width * sizeof(float));
}

void moe_route_combine_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct moe_route_combine *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *o = t->out + r * t->E;
        if (t->overwrite)
            memset(o, 0, (size_t)t->E * sizeof *o);
        for (int32_t j = 0; j < t->K; j++) {
            const float *y = t->y + (r * t->K + j) * t->E;
            float w = t->w[r * t->K + j];
            for (int64_t i = 0; i < t->E; i++)
                o[i] += w * y[i];
        }
    }
}
