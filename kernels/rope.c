/* Rotary embedding (NeoX pairs from precomputed cosines and sines), split over the
 * pool by rows. */
#include "core/threadpool.h"
#include "kernels/ops.h"

struct rope_task {
    float *x;
    int64_t row_stride, head_stride;
    int32_t n_heads, n_pairs;
    const float *cs;
};

static void rope_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct rope_task *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *cs = t->cs + r * t->n_pairs * 2;
        for (int32_t h = 0; h < t->n_heads; h++) {
            float *x = t->x + r * t->row_stride + h * t->head_stride;
            float *y = x + t->n_pairs;
            for (int32_t i = 0; i < t->n_pairs; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1];
                float a = x[i], b = y[i];
                x[i] = a * c - b * s;
                y[i] = a * s + b * c;
            }
        }
    }
}

void kernel_rope(struct splash_pool *pool, float *x, int64_t row_stride, int64_t head_stride,
                 int64_t n, int32_t n_heads, int32_t n_pairs, const float *cs)
{
    struct rope_task t = {.x = x,
                          .row_stride = row_stride,
                          .head_stride = head_stride,
                          .n_heads = n_heads,
                          .n_pairs = n_pairs,
                          .cs = cs};
    splash_pool_parallel_for(pool, n, kernel_row_grain((int64_t)n_heads * n_pairs * 2), rope_rows, &t);
}
