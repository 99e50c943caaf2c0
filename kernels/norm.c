/* Row norms and rotary embedding of the hybrid trunk, split over the pool by rows. */
#include <math.h>

#include "core/threadpool.h"
#include "kernels/hybrid.h"

/* rows per task so that a task holds at least ~16k elements of work */
static int64_t row_grain(int64_t d)
{
    int64_t g = 16384 / (d > 0 ? d : 1);
    return g < 1 ? 1 : g;
}

struct norm_task {
    const struct hybrid_vec *vec;
    const float *x;
    int64_t x_stride;
    const float *w;
    float *y;
    int64_t y_stride, d;
    float eps, scale;
};

static void rmsnorm_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct norm_task *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *x = t->x + r * t->x_stride;
        float mean = t->vec->sumsq(t->d, x) / (float)t->d;
        t->vec->scale_mul(t->d, x, 1.0f / sqrtf(mean + t->eps), t->w, t->y + r * t->y_stride);
    }
}

void hybrid_rmsnorm(struct splash_pool *pool, const float *x, int64_t x_stride, const float *w,
                    float *y, int64_t y_stride, int64_t n, int64_t d, float eps)
{
    struct norm_task t = {.vec = hybrid_vec_get(),
                          .x = x,
                          .x_stride = x_stride,
                          .w = w,
                          .y = y,
                          .y_stride = y_stride,
                          .d = d,
                          .eps = eps};
    splash_pool_parallel_for(pool, n, row_grain(d), rmsnorm_rows, &t);
}

static void l2norm_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct norm_task *t = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *x = t->y + r * t->y_stride;
        float norm = sqrtf(t->vec->sumsq(t->d, x));
        t->vec->scale(t->d, t->scale / fmaxf(norm, t->eps), x);
    }
}

void hybrid_l2norm(struct splash_pool *pool, float *x, int64_t stride, int64_t n, int64_t d,
                   float eps, float scale)
{
    struct norm_task t = {
        .vec = hybrid_vec_get(), .y = x, .y_stride = stride, .d = d, .eps = eps, .scale = scale};
    splash_pool_parallel_for(pool, n, row_grain(d), l2norm_rows, &t);
}

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

void hybrid_rope(struct splash_pool *pool, float *x, int64_t row_stride, int64_t head_stride,
                 int64_t n, int32_t n_heads, int32_t n_pairs, const float *cs)
{
    struct rope_task t = {.x = x,
                          .row_stride = row_stride,
                          .head_stride = head_stride,
                          .n_heads = n_heads,
                          .n_pairs = n_pairs,
                          .cs = cs};
    splash_pool_parallel_for(pool, n, row_grain((int64_t)n_heads * n_pairs * 2), rope_rows, &t);
}
