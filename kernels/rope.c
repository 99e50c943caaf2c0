/* Rotary embedding (NeoX pairs from precomputed cosines and sines), split over the
 * pool by rows, and the tables of cosines and sines (plain or YaRN) as ggml makes them. */
#include <math.h>
#include <string.h>

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
    const struct kernel_vec *v = kernel_vec_get();
    void (*pairs)(int32_t, float *, float *, const float *) =
        v->rope_pairs ? v->rope_pairs : kernel_vec_ref.rope_pairs;
    for (int64_t r = begin; r < end; r++) {
        const float *cs = t->cs + r * t->n_pairs * 2;
        for (int32_t h = 0; h < t->n_heads; h++) {
            float *x = t->x + r * t->row_stride + h * t->head_stride;
            pairs(t->n_pairs, x, x + t->n_pairs, cs);
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

/* ---- rotary tables (ABI 1.3) ---------------------------------------------------------------- */

/* The pair dim where YaRN's correction starts or ends: the dim whose wavelength fits
 * n_ctx_orig `rotations` times (ggml's float arithmetic, so the bounds land alike). */
static float yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float rotations, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (rotations * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

void kernel_rope_table(const struct splash_rope_args *a, int64_t pos0, int64_t n, float *cs)
{
    struct splash_rope_args r = {0};
    memcpy(&r, a, a->size < sizeof r ? a->size : sizeof r);
    float attn = r.attn_factor != 0.0f ? r.attn_factor : 1.0f;
    float fast = r.beta_fast != 0.0f ? r.beta_fast : 32.0f;
    float slow = r.beta_slow != 0.0f ? r.beta_slow : 1.0f;
    float scale = r.freq_scale != 0.0f ? r.freq_scale : 1.0f;
    int32_t pairs = r.n_dims / 2;
    float lo = 0.0f, hi = 0.0f;
    if (r.ext_factor != 0.0f) {
        lo = floorf(yarn_corr_dim(r.n_dims, r.n_ctx_orig, fast, r.freq_base));
        hi = ceilf(yarn_corr_dim(r.n_dims, r.n_ctx_orig, slow, r.freq_base));
        lo = lo > 0.0f ? lo : 0.0f;
        hi = hi < (float)(r.n_dims - 1) ? hi : (float)(r.n_dims - 1);
        attn *= 1.0f + 0.1f * logf(1.0f / scale);
    }
    float theta_scale = powf(r.freq_base, -2.0f / (float)r.n_dims);
    for (int64_t t = 0; t < n; t++) {
        float theta = (float)(pos0 + t);
        float *row = cs + t * pairs * 2;
        for (int32_t i = 0; i < pairs; i++) {
            float th = scale * theta;
            if (r.ext_factor != 0.0f) {
                /* 1 below the correction range (kept), 0 above it (interpolated) */
                float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
                float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * r.ext_factor;
                th = th * (1.0f - ramp) + theta * ramp;
            }
            row[2 * i] = cosf(th) * attn;
            row[2 * i + 1] = sinf(th) * attn;
            theta *= theta_scale;
        }
    }
}
