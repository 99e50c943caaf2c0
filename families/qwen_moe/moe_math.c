/* The MoE FFN's element-wise work: routing (softmax, top-k, renormalise) and the
 * scalar reference rows of SwiGLU and the weighted sum; SIMD rows live in
 * moe_avx2.c. */
#include <math.h>

#include "families/qwen_moe/moe.h"
#include "splash/host.h"

void moe_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t *ids, float *w)
{
    float max = logits[0];
    for (int32_t e = 1; e < n_expert; e++)
        if (logits[e] > max)
            max = logits[e];
    /* softmax in fp32; the common denominator cancels in the renormalisation but is
     * kept so the weights are exactly "probabilities of the chosen, renormalised" */
    float sum = 0.0f;
    for (int32_t e = 0; e < n_expert; e++)
        sum += expf(logits[e] - max);
    /* top-k by insertion into a list kept sorted by logit (softmax is monotonic);
     * a strictly greater value displaces, so ties keep the lower index */
    int32_t n = 0;
    for (int32_t e = 0; e < n_expert; e++) {
        float v = logits[e];
        if (n == k && !(v > logits[ids[k - 1]]))
            continue;
        int32_t pos = n < k ? n++ : k - 1;
        while (pos > 0 && v > logits[ids[pos - 1]]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = e;
    }
    float chosen = 0.0f;
    for (int32_t j = 0; j < k; j++) {
        w[j] = expf(logits[ids[j]] - max) / sum;
        chosen += w[j];
    }
    for (int32_t j = 0; j < k; j++)
        w[j] /= chosen;
}

/* ---- scalar reference rows ----------------------------------------------------- */

static void swiglu_ref(const float *g, const float *u, int64_t in_stride, float *h, int64_t rows,
                       int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * in_stride, *ur = u + r * in_stride;
        float *hr = h + r * n;
        for (int64_t i = 0; i < n; i++)
            hr[i] = gr[i] / (1.0f + expf(-gr[i])) * ur[i];
    }
}

static void combine_ref(float *out, const float *sh, float s, const float *y, const float *w,
                        int32_t k, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        /* routed experts in slot order, then the shared expert (the reference's order) */
        float acc = w[0] * y[i];
        for (int32_t j = 1; j < k; j++)
            acc += w[j] * y[(int64_t)j * n + i];
        out[i] = sh ? acc + s * sh[i] : acc;
    }
}

/* ---- the row table ---------------------------------------------------------------- */

#if defined(__x86_64__)
void moe_swiglu_avx2(const float *g, const float *u, int64_t in_stride, float *h, int64_t rows,
                     int64_t n);
void moe_combine_avx2(float *out, const float *sh, float s, const float *y, const float *w,
                      int32_t k, int64_t n);
#endif

static const struct moe_simd rows[] = {
#if defined(__x86_64__)
    {.isa = "avx2", .swiglu = moe_swiglu_avx2, .combine = moe_combine_avx2},
#endif
    {.isa = "scalar", .swiglu = swiglu_ref, .combine = combine_ref},
};

static const uint64_t row_needs[] = {
#if defined(__x86_64__)
    SPLASH_CPU_AVX2 | SPLASH_CPU_FMA,
#endif
    0,
};

const struct moe_simd *moe_simd_pick(uint64_t cpu_features)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if ((cpu_features & row_needs[i]) == row_needs[i])
            return &rows[i];
    return &rows[sizeof rows / sizeof rows[0] - 1];
}

const struct moe_simd *moe_simd_at(size_t i)
{
    return i < sizeof rows / sizeof rows[0] ? &rows[i] : NULL;
}
