/* Bias rows: a projection's bias added to every row, or each routed row's expert's
 * bias (the expert stack's biases one row per expert), split over the pool by rows. */
#include "core/threadpool.h"
#include "kernels/ops.h"

struct bias_task {
    float *y;
    int64_t y_stride, d;
    const float *b;
    const int32_t *idx;
    int64_t b_stride;
};

static void bias_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct bias_task *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *b = t->b;
        if (t->idx) {
            if (t->idx[r] < 0)
                continue;
            b += (int64_t)t->idx[r] * t->b_stride;
        }
        float *y = t->y + r * t->y_stride;
        for (int64_t i = 0; i < t->d; i++)
            y[i] += b[i];
    }
}

void kernel_add_bias(struct splash_pool *pool, float *y, int64_t y_stride, int64_t n, int64_t d,
                     const float *b, const int32_t *idx, int64_t b_stride)
{
    struct bias_task t = {
        .y = y, .y_stride = y_stride, .d = d, .b = b, .idx = idx, .b_stride = b_stride};
    splash_pool_parallel_for(pool, n, kernel_row_grain(d), bias_rows, &t);
}
