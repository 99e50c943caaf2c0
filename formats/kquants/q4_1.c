/* Q4_1: 32 weights per block, 4-bit levels 0..15 times an fp16 scale plus an
 * fp16 minimum. Activations are Q8_1, whose block sum carries the minimum. */
#include <float.h>

#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q41_r16.h"

static const struct kq_scale_field q4_1_fields[] = {
    {offsetof(struct q4_1_block, d), 0, "d"},
    {offsetof(struct q4_1_block, m), 0, "m"},
};

static enum splash_status q4_1_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q4_1", data, n_bytes, n_elems, KQ_QK4_1,
                              sizeof(struct q4_1_block), q4_1_fields, 2, err);
}

static void q4_1_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q4_1_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_1; i++, out += KQ_QK4_1) {
        const float d = kq_h2f(b[i].d), m = kq_h2f(b[i].m);
        for (int j = 0; j < KQ_QK4_1 / 2; j++) {
            out[j] = (b[i].qs[j] & 0xF) * d + m;
            out[j + KQ_QK4_1 / 2] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* min and max of the block span the 16 levels. */
static void q4_1_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q4_1_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_1; i++, x += KQ_QK4_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < KQ_QK4_1; j++) {
            if (x[j] < min)
                min = x[j];
            if (x[j] > max)
                max = x[j];
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        b[i].m = kq_f2h(min);
        for (int j = 0; j < KQ_QK4_1 / 2; j++) {
            const float v0 = (x[j] - min) * id;
            const float v1 = (x[j + KQ_QK4_1 / 2] - min) * id;
            uint8_t x0 = (uint8_t)KQ_MIN(15, (int8_t)(v0 + 0.5f));
            uint8_t x1 = (uint8_t)KQ_MIN(15, (int8_t)(v1 + 0.5f));
            b[i].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

void q4_1_dot_q8_1_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q4_1_block *x = w_row;
    const struct splash_q8_1_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / KQ_QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < KQ_QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0xF) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + KQ_QK4_1 / 2];
        }
        sum += (kq_h2f(x[i].d) * kq_h2f(y[i].d)) * sumi + kq_h2f(x[i].m) * kq_h2f(y[i].s);
    }
    *s = sum;
}

static const struct splash_kernel_row q4_1_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX2_ROW, "avx2", q4_1_dot_q8_1_avx2, q4_1_mul_q8_1_avx2},
#endif
    {0, "scalar", q4_1_dot_q8_1_ref, NULL},
};

const struct splash_format_type kq_q4_1_type = {
    .name = "Q4_1",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 3,
    .block_elems = KQ_QK4_1,
    .block_bytes = sizeof(struct q4_1_block),
    .bits_per_weight = 5.0f,
    .act_type = "Q8_1",
    .validate = q4_1_validate,
    .to_float = q4_1_to_float,
    .from_float = q4_1_from_float,
    .rows = q4_1_rows,
    .n_rows = sizeof q4_1_rows / sizeof q4_1_rows[0],
    .repack_to = "Q4_1_R16",
    .repack = q41_r16_repack,
};
