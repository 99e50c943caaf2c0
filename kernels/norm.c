/* Row norms (RMSNorm, L2), split over the pool by rows. */
#include <math.h>

#include "core/threadpool.h"
#include "kernels/ops.h"

struct norm_task {
    const struct kernel_vec *vec;
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

void kernel_rmsnorm(struct splash_pool *pool, const float *x, int64_t x_stride, const float *w,
                    float *y, int64_t y_stride, int64_t n, int64_t d, float eps)
{
    struct norm_task t = {.vec = kernel_vec_get(),
                          .x = x,
                          .x_stride = x_stride,
                          .w = w,
                          .y = y,
                          .y_stride = y_stride,
                          .d = d,
                          .eps = eps};
    splash_pool_parallel_for(pool, n, kernel_row_grain(d), rmsnorm_rows, &t);
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

void kernel_l2norm(struct splash_pool *pool, float *x, int64_t stride, int64_t n, int64_t d,
                   float eps, float scale)
{
    struct norm_task t = {
        .vec = kernel_vec_get(), .y = x, .y_stride = stride, .d = d, .eps = eps, .scale = scale};
    splash_pool_parallel_for(pool, n, kernel_row_grain(d), l2norm_rows, &t);
}
