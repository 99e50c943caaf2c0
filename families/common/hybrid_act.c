/* The trunk's element-wise gates (SiLU and sigmoid products, the GDN decay), with
 * SIMD rows in hybrid_act_avx2.c / hybrid_act_avx512.c picked once at load. */
#include <math.h>

#include "families/common/hybrid.h"

static void ref_silu_mul(int64_t n, const float *x, const float *g, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = x[i] * (g[i] / (1.0f + expf(-g[i])));
}

static void ref_sigmoid_mul(int64_t n, const float *x, const float *g, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = x[i] * (1.0f / (1.0f + expf(-g[i])));
}

const struct hybrid_act hybrid_act_ref = {
    .isa = "scalar",
    .silu_mul = ref_silu_mul,
    .sigmoid_mul = ref_sigmoid_mul,
};

const struct hybrid_act *hybrid_act_pick(uint64_t cpu)
{
#if defined(__x86_64__)
    const uint64_t avx512 = SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |
                            SPLASH_CPU_AVX512DQ;
    if ((cpu & avx512) == avx512)
        return &hybrid_act_avx512;
    if ((cpu & (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA)) == (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA))
        return &hybrid_act_avx2;
#endif
    return &hybrid_act_ref;
}
