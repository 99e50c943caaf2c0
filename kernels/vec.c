/* Scalar reference vector primitives of the kernels, and the choice of
 * the primitive table for this CPU. */
#include <math.h>
#include <stdatomic.h>

#include "core/host_impl.h"
#include "kernels/ops.h"
#include "splash/fp.h"

static float ref_dot(int64_t n, const float *a, const float *b)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void ref_axpy(int64_t n, float alpha, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

static void ref_scale(int64_t n, float alpha, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] *= alpha;
}

static float ref_sumsq(int64_t n, const float *x)
{
    double s = 0.0; /* as ggml's norms: a double sum */
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return (float)s;
}

static void ref_scale_mul(int64_t n, const float *x, float s, const float *w, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * s * (w ? w[i] : 1.0f);
}

static float ref_dot_bf16(int64_t n, const float *a, const uint16_t *b)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * splash_bf16_to_fp32(b[i]);
    return s;
}

static float ref_dot_i8(int64_t n, const float *a, const int8_t *b)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * (float)b[i];
    return s;
}

static void ref_axpy_bf16(int64_t n, float alpha, const uint16_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * splash_bf16_to_fp32(x[i]);
}

static void ref_axpy_i8(int64_t n, float alpha, const int8_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * (float)x[i];
}

static float ref_gdn_row(int64_t n, float *s, float a, const float *k, const float *q, float vj,
                         float beta)
{
    float sk = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        s[i] *= a;
        sk += s[i] * k[i];
    }
    float u = beta * (vj - sk);
    float o = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        s[i] += u * k[i];
        o += s[i] * q[i];
    }
    return o;
}

static void ref_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = ref_dot(k, a + i * lda, b + j * ldb);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

static void ref_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t t = 0; t < k; t++)
                s += a[i * lda + t] * b[t * ldb + j];
            c[i * ldc + j] = s;
        }
}

static void ref_conv_silu(int64_t n, int64_t nc, const float *x, int64_t x_stride,
                          const float *state, int64_t st_stride, const float *w, int32_t kw,
                          float *out, int64_t out_stride)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < nc; c++) {
            float s = 0.0f;
            for (int32_t j = 0; j < kw; j++) {
                int64_t r = i + j - (kw - 1);
                float xv = r >= 0 ? x[r * x_stride + c] : state[(kw - 1 + r) * st_stride + c];
                s += w[c * kw + j] * xv;
            }
            out[i * out_stride + c] = s / (1.0f + expf(-s));
        }
}

static void ref_silu(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

static float ref_exp_sum(int64_t n, const float *x, float m, float *y)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    return s;
}

static void ref_round_f16(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = splash_fp16_to_fp32(splash_fp32_to_fp16(x[i]));
}

static double ref_dot_f16(int64_t n, const float *a, const uint16_t *b)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(a[i] * splash_fp16_to_fp32(b[i]));
    return s;
}

static void ref_acc_f16(int64_t n, uint16_t *acc, const uint16_t *v, float ms, float vs)
{
    if (ms != 1.0f)
        for (int64_t i = 0; i < n; i++)
            acc[i] = splash_fp32_to_fp16(splash_fp16_to_fp32(acc[i]) * ms);
    for (int64_t i = 0; i < n; i++)
        acc[i] = splash_fp32_to_fp16(fmaf(splash_fp16_to_fp32(v[i]), vs, splash_fp16_to_fp32(acc[i])));
}

static void ref_rope_pairs(int32_t n, float *x, float *y, const float *cs)
{
    for (int32_t i = 0; i < n; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float a = x[i], b = y[i];
        x[i] = a * c - b * s;
        y[i] = a * s + b * c;
    }
}

const struct kernel_vec kernel_vec_ref = {
    .isa = "scalar",
    .cpu_requires = 0,
    .dot = ref_dot,
    .axpy = ref_axpy,
    .scale = ref_scale,
    .sumsq = ref_sumsq,
    .scale_mul = ref_scale_mul,
    .dot_bf16 = ref_dot_bf16,
    .dot_i8 = ref_dot_i8,
    .axpy_bf16 = ref_axpy_bf16,
    .axpy_i8 = ref_axpy_i8,
    .gdn_row = ref_gdn_row,
    .gemm_nt = ref_gemm_nt,
    .gemm_nn = ref_gemm_nn,
    .conv_silu = ref_conv_silu,
    .silu = ref_silu,
    .exp_sum = ref_exp_sum,
    .round_f16 = ref_round_f16,
    .dot_f16 = ref_dot_f16,
    .acc_f16 = ref_acc_f16,
    .rope_pairs = ref_rope_pairs,
};

const struct kernel_vec *const kernel_vec_tables[] = {
#if defined(__x86_64__)
    &kernel_vec_avx512,
    &kernel_vec_avx2,
#endif
#if defined(__aarch64__)
    &kernel_vec_neon,
#endif
    &kernel_vec_ref,
    NULL,
};

static _Atomic(const struct kernel_vec *) chosen;

const struct kernel_vec *kernel_vec_get(void)
{
    const struct kernel_vec *v = atomic_load_explicit(&chosen, memory_order_acquire);
    if (v)
        return v;
    uint64_t have = splash_cpu_features();
    for (size_t i = 0; kernel_vec_tables[i]; i++) {
        if ((kernel_vec_tables[i]->cpu_requires & have) == kernel_vec_tables[i]->cpu_requires) {
            v = kernel_vec_tables[i];
            break;
        }
    }
    atomic_store_explicit(&chosen, v, memory_order_release);
    return v;
}
