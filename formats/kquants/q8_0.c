/* Q8_0: 32 values per block, int8 times an fp16 scale. A weight format and the
 * activation format of Q4_0, Q5_0, Q8_0 (and IQ4_NL): from_float is the
 * activation quantizer, byte-exact with GGML's. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

static const struct kq_scale_field q8_0_fields[] = {
    {offsetof(struct splash_q8_0_block, d), 0, "d"}};

static enum splash_status q8_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q8_0", data, n_bytes, n_elems, SPLASH_QK8_0,
                              sizeof(struct splash_q8_0_block), q8_0_fields, 1, err);
}

static void q8_0_to_float(const void *blocks, float *out, int64_t n)
{
    const struct splash_q8_0_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++, out += SPLASH_QK8_0) {
        const float d = kq_h2f(b[i].d);
        for (int j = 0; j < SPLASH_QK8_0; j++)
            out[j] = b[i].qs[j] * d;
    }
}

/* amax/127 scale; roundf (half away from zero) of x / d. */
static void q8_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct splash_q8_0_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++, x += SPLASH_QK8_0) {
        float amax = 0;
        for (int j = 0; j < SPLASH_QK8_0; j++)
            amax = KQ_MAX(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        for (int j = 0; j < SPLASH_QK8_0; j++)
            b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void q8_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct splash_q8_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < SPLASH_QK8_0; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        sum += sumi * (kq_h2f(x[i].d) * kq_h2f(y[i].d));
    }
    *s = sum;
}

static const struct splash_kernel_row q8_0_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", q8_0_dot_q8_0_avx512, q8_0_mul_q8_0_avx512},
    {KQ_CPU_AVX2_ROW, "avx2", q8_0_dot_q8_0_avx2, q8_0_mul_q8_0_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_I8MM_ROW, "neon-i8mm", q8_0_dot_q8_0_neon_dotprod, q8_0_mul_q8_0_neon_i8mm},
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", q8_0_dot_q8_0_neon_dotprod, q8_0_mul_q8_0_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", q8_0_dot_q8_0_neon, q8_0_mul_q8_0_neon},
#endif
    {0, "scalar", q8_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type kq_q8_0_type = {
    .name = "Q8_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 8,
    .block_elems = SPLASH_QK8_0,
    .block_bytes = sizeof(struct splash_q8_0_block),
    .bits_per_weight = 8.5f,
    .act_type = "Q8_0",
    .validate = q8_0_validate,
    .to_float = q8_0_to_float,
    .from_float = q8_0_from_float,
    .rows = q8_0_rows,
    .n_rows = sizeof q8_0_rows / sizeof q8_0_rows[0],
};
