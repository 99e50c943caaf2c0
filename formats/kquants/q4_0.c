/* Q4_0: 32 weights per block, 4-bit levels -8..7 times an fp16 scale. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q40_r16.h"

static const struct kq_scale_field q4_0_fields[] = {{offsetof(struct q4_0_block, d), 0, "d"}};

static enum splash_status q4_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q4_0", data, n_bytes, n_elems, KQ_QK4_0,
                              sizeof(struct q4_0_block), q4_0_fields, 1, err);
}

static void q4_0_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q4_0_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_0; i++, out += KQ_QK4_0) {
        const float d = kq_h2f(b[i].d);
        for (int j = 0; j < KQ_QK4_0 / 2; j++) {
            out[j] = ((b[i].qs[j] & 0xF) - 8) * d;
            out[j + KQ_QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* Scale from the value of largest magnitude, which maps to level -8. */
static void q4_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q4_0_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_0; i++, x += KQ_QK4_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < KQ_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        for (int j = 0; j < KQ_QK4_0 / 2; j++) {
            uint8_t x0 = (uint8_t)KQ_MIN(15, (int8_t)(x[j] * id + 8.5f));
            uint8_t x1 = (uint8_t)KQ_MIN(15, (int8_t)(x[j + KQ_QK4_0 / 2] * id + 8.5f));
            b[i].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

void q4_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q4_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / KQ_QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < KQ_QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + KQ_QK4_0 / 2];
        }
        sum += sumi * (kq_h2f(x[i].d) * kq_h2f(y[i].d));
    }
    *s = sum;
}

static const struct splash_kernel_row q4_0_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", q4_0_dot_q8_0_avx512, q4_0_mul_q8_0_avx512},
    {KQ_CPU_AVX2_ROW, "avx2", q4_0_dot_q8_0_avx2, q4_0_mul_q8_0_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_I8MM_ROW, "neon-i8mm", q4_0_dot_q8_0_neon_dotprod, q4_0_mul_q8_0_neon_i8mm},
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", q4_0_dot_q8_0_neon_dotprod, q4_0_mul_q8_0_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", q4_0_dot_q8_0_neon, q4_0_mul_q8_0_neon},
#endif
    {0, "scalar", q4_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type kq_q4_0_type = {
    .name = "Q4_0",
    .gguf_type = 2,
    .block_elems = KQ_QK4_0,
    .block_bytes = sizeof(struct q4_0_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .validate = q4_0_validate,
    .to_float = q4_0_to_float,
    .from_float = q4_0_from_float,
    .rows = q4_0_rows,
    .n_rows = sizeof q4_0_rows / sizeof q4_0_rows[0],
    .repack_to = "Q4_0_R16",
    .repack = q40_r16_repack,
};
