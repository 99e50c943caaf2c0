/* The compute layer's ops behind struct splash_kernels (kernels/table.c), one file per
 * op: matrix products (matmul.c), norms (norm.c), rotary (rope.c), KV pages and
 * attention (attention.c), Gated DeltaNet (gdn.c), and the vector primitives they are
 * written in.
 *
 * Each primitive has a scalar reference (vec.c) and SIMD versions in vec_avx2.c /
 * vec_avx512.c (x86-64) and vec_neon.c (arm64); kernel_vec_get() picks the first table the CPU supports, after
 * SPLASH_FORCE_ISA. Tests compare every table with the reference. */
#ifndef SPLASH_KERNELS_OPS_H
#define SPLASH_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "splash/kernels.h"

struct kernel_vec {
    const char *isa;       /* "avx512", "avx2", "neon", "scalar" */
    uint64_t cpu_requires; /* SPLASH_CPU_* bits */
    /* sum a[i] * b[i] */
    float (*dot)(int64_t n, const float *a, const float *b);
    /* y[i] += alpha * x[i] */
    void (*axpy)(int64_t n, float alpha, const float *x, float *y);
    /* y[i] = alpha * y[i] */
    void (*scale)(int64_t n, float alpha, float *y);
    /* sum x[i]^2 */
    float (*sumsq)(int64_t n, const float *x);
    /* y[i] = x[i] * s * w[i] (w NULL: 1) */
    void (*scale_mul)(int64_t n, const float *x, float s, const float *w, float *y);
    /* sum a[i] * bf16 b[i] */
    float (*dot_bf16)(int64_t n, const float *a, const uint16_t *b);
    /* sum a[i] * b[i] for int8 b */
    float (*dot_i8)(int64_t n, const float *a, const int8_t *b);
    /* y[i] += alpha * bf16 x[i] */
    void (*axpy_bf16)(int64_t n, float alpha, const uint16_t *x, float *y);
    /* y[i] += alpha * int8 x[i] */
    void (*axpy_i8)(int64_t n, float alpha, const int8_t *x, float *y);
    /* One state row of the delta rule: s = a * s; u = beta * (vj - s.k); s += u * k;
     * returns s.q. */
    float (*gdn_row)(int64_t n, float *s, float a, const float *k, const float *q, float vj,
                     float beta);
    /* The same row through n_tok tokens (a verify pass's rows), the row held in registers
     * between them: token t is gdn_row(n, s, a[t], k + t * kq_stride, q + t * kq_stride,
     * v[t * v_stride], beta[t * nv]) into out[t * out_stride], the same steps in the same
     * order, so the bits of n_tok calls of gdn_row. NULL: the kernel calls gdn_row. */
    void (*gdn_row_tokens)(int64_t n, float *s, int32_t n_tok, const float *a, const float *k,
                           const float *q, int64_t kq_stride, const float *v, int64_t v_stride,
                           const float *beta, int64_t nv, float *out, int64_t out_stride);
    /* c[i * ldc + j] (accumulate ? += : =) dot(a + i * lda, b + j * ldb) over k elements,
     * for i < m, j < n: the small products of the chunked delta rule. */
    void (*gemm_nt)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, int accumulate);
    /* c[i * ldc + j] (accumulate ? += : =) sum_t a[i * lda + t] * b[t * ldb + j] for i < m,
     * j < n, t < k: the chunked delta rule's products, vectorised over j (no reductions). */
    void (*gemm_nn)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, int accumulate);
    /* Causal depthwise convolution + SiLU of nc channels over n tokens:
     * out[i][c] = silu(sum_j w[c * kw + j] * x'[i + j - (kw - 1)][c]), where x'[r] is
     * x + r * x_stride for r >= 0 and state + (kw - 1 + r) * st_stride before; kw <= 16. */
    void (*conv_silu)(int64_t n, int64_t nc, const float *x, int64_t x_stride, const float *state,
                      int64_t st_stride, const float *w, int32_t kw, float *out,
                      int64_t out_stride);
    /* y[i] = x[i] * sigmoid(x[i]) (y may equal x) */
    void (*silu)(int64_t n, const float *x, float *y);
    /* y[i] = exp(x[i] - m) (y may equal x); returns the sum of y. x[i] = -inf gives 0. */
    float (*exp_sum)(int64_t n, const float *x, float m, float *y);
    /* (optional: NULL takes the reference's) The f16 cache's attention (llama.cpp's arithmetic, kernels/attention.c), whose SIMD
     * rows give the scalar's bits: */
    /* y[i] = x[i] rounded to f16 (to nearest even) and widened back */
    void (*round_f16)(int64_t n, const float *x, float *y);
    /* sum a[i] * f16 b[i], each product in float (exact for an f16-rounded a) and the sum
     * in double: the scalar's order wherever the double sums are exact, as they are for
     * products within 2^29 of each other */
    double (*dot_f16)(int64_t n, const float *a, const uint16_t *b);
    /* acc[i] = f16(f16(acc[i] * ms) when ms != 1, then f16(fma(v[i], vs, acc[i]))): one
     * key's value into an f16 accumulator, rounded after the rescale and the add */
    void (*acc_f16)(int64_t n, uint16_t *acc, const uint16_t *v, float ms, float vs);
    /* (optional: NULL takes the reference's) NeoX rotation of n pairs (x[i], y[i]) by
     * cs[2i] = cos, cs[2i + 1] = sin: x = x c - y s, y = x s + y c, each product rounded
     * (the same bits in every table). */
    void (*rope_pairs)(int32_t n, float *x, float *y, const float *cs);
};

extern const struct kernel_vec kernel_vec_ref;
#if defined(__x86_64__)
extern const struct kernel_vec kernel_vec_avx2;
extern const struct kernel_vec kernel_vec_avx512;
#endif
#if defined(__aarch64__)
extern const struct kernel_vec kernel_vec_neon;
#endif

/* The tables this build has, best first, ending in the reference (NULL-terminated). */
extern const struct kernel_vec *const kernel_vec_tables[];
/* The first table the CPU supports (cached after the first call). */
const struct kernel_vec *kernel_vec_get(void);

/* Denormals flushed to zero on this thread until kernel_ftz_end: decayed GDN states and
 * products of small decays reach them, and each one costs the FPU a microcode assist
 * (the chunked delta rule ran 3-4x slower on a strongly decaying model). */
static inline unsigned kernel_ftz_begin(void)
{
#if defined(__x86_64__)
    unsigned csr = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(csr | 0x8040u); /* FTZ | DAZ */
    return csr;
#else
    return 0;
#endif
}

static inline void kernel_ftz_end(unsigned csr)
{
#if defined(__x86_64__)
    __builtin_ia32_ldmxcsr(csr);
#else
    (void)csr;
#endif
}

/* Kernel members of struct splash_kernels (see splash/kernels.h for contracts). */
/* Rows per task so that a task holds at least ~16k elements of work. */
static inline int64_t kernel_row_grain(int64_t d)
{
    int64_t g = 16384 / (d > 0 ? d : 1);
    return g < 1 ? 1 : g;
}

/* matmul.c */
enum splash_status kernel_weight_create(const struct splash_tensor_info *t,
                                        struct splash_weight **out, struct splash_err *err);
void kernel_weight_destroy(struct splash_weight *w);
enum splash_status kernel_weight_set_scale(struct splash_weight *w, const float *scales, int64_t n,
                                           struct splash_err *err);
void kernel_matmul(struct splash_pool *pool, const struct splash_weight *w, const float *x,
                   int64_t n, float *y);
void kernel_matmul_many(struct splash_pool *pool, const struct splash_weight *const *w, int n_w,
                        const float *x, int64_t n, float *const *y);
enum splash_status kernel_expert_weight_create(const struct splash_tensor_info *t,
                                               struct splash_weight **out, struct splash_err *err);
void kernel_expert_pack(const struct splash_weight *w, const void *src, void *dst);
void kernel_matmul_experts_at(struct splash_pool *pool, const struct splash_weight *w,
                              const void *const *at, const float *x, const int32_t *expert,
                              int64_t n, float *y);
void kernel_matmul_experts(struct splash_pool *pool, const struct splash_weight *w,
                           const float *x, const int32_t *expert, int64_t n, float *y);
void kernel_embed_rows(const struct splash_tensor_info *t, const int32_t *ids, int64_t n,
                       float *out);
void kernel_to_float(const struct splash_tensor_info *t, float *out);

/* norm.c, rope.c, attention.c, gdn.c */
void kernel_rmsnorm(struct splash_pool *pool, const float *x, int64_t x_stride, const float *w,
                    float *y, int64_t y_stride, int64_t n, int64_t d, float eps);
void kernel_l2norm(struct splash_pool *pool, float *x, int64_t stride, int64_t n, int64_t d,
                   float eps, float scale);
void kernel_add_bias(struct splash_pool *pool, float *y, int64_t y_stride, int64_t n, int64_t d,
                     const float *b, const int32_t *idx, int64_t b_stride);
void kernel_rope_table(const struct splash_rope_args *a, int64_t pos0, int64_t n, float *cs);
void kernel_rope(struct splash_pool *pool, float *x, int64_t row_stride, int64_t head_stride,
                 int64_t n, int32_t n_heads, int32_t n_pairs, const float *cs);
size_t kernel_kv_page_bytes(int32_t format, int32_t page_tokens, int32_t n_kv_heads,
                            int32_t head_dim);
void kernel_kv_store(struct splash_pool *pool, const struct splash_kv_pages *kv, int64_t pos0,
                     int64_t n, const float *k, int64_t k_stride, const float *v, int64_t v_stride);
void kernel_attention(struct splash_pool *pool, const struct splash_kv_pages *kv, const float *q,
                      int64_t q_stride, int64_t n_q, int32_t n_head, int64_t pos0, float scale,
                      float *out, int64_t out_stride);
void kernel_gdn_conv(struct splash_pool *pool, const float *x, int64_t x_stride, int64_t n,
                     int64_t channels, const float *w, int32_t kw, float *state, float *out);
void kernel_gdn_recurrent(struct splash_pool *pool, const struct splash_gdn_args *a);
void kernel_gdn_conv_lanes(struct splash_pool *pool, const struct splash_conv_lane *lanes,
                           int32_t n_lanes, int64_t x_stride, int64_t channels, const float *w,
                           int32_t kw);
void kernel_gdn_recurrent_lanes(struct splash_pool *pool, const struct splash_gdn_args *a,
                                int32_t n_lanes);
void kernel_gdn_recurrent_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                                     const struct splash_gdn_args *a, int32_t n_lanes);
void kernel_gdn_chunked(struct splash_pool *pool, const struct splash_gdn_args *a);
void kernel_attention_lanes(struct splash_pool *pool, const struct splash_attn_lane *lanes,
                            int32_t n_lanes, int32_t n_head, float scale);

/* The same kernels on an explicit primitive table (tests compare ISAs through these). */
/* attend: attention with a sliding window and sinks (struct splash_attn_args). */
void kernel_attend(struct splash_pool *pool, const struct splash_attn_args *a);
void kernel_attend_with(const struct kernel_vec *vec, struct splash_pool *pool,
                        const struct splash_attn_args *a);
void kernel_attend_lanes(struct splash_pool *pool, const struct splash_attn_lanes_args *a);
void kernel_attend_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                              const struct splash_attn_lanes_args *a);
void kernel_attention_with(const struct kernel_vec *vec, struct splash_pool *pool,
                           const struct splash_kv_pages *kv, const float *q, int64_t q_stride,
                           int64_t n_q, int32_t n_head, int64_t pos0, float scale, float *out,
                           int64_t out_stride);
void kernel_attention_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                                 const struct splash_attn_lane *lanes, int32_t n_lanes,
                                 int32_t n_head, float scale);
void kernel_gdn_recurrent_with(const struct kernel_vec *vec, struct splash_pool *pool,
                               const struct splash_gdn_args *a);
void kernel_gdn_chunked_with(const struct kernel_vec *vec, struct splash_pool *pool,
                             const struct splash_gdn_args *a);

/* Reads one KV row back as floats (tests and debugging): which 0 = K, 1 = V. */
void kernel_kv_read_row(const struct splash_kv_pages *kv, int which, int64_t pos, int32_t head,
                        float *out);

#endif
