/* Q5_1: 32 weights per block, 5-bit levels 0..31 times an fp16 scale plus an
 * fp16 minimum; fifth bits in a 32-bit mask. Activations are Q8_1. */
#include <float.h>

#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q51_r16.h"

static const struct kq_scale_field q5_1_fields[] = {
    {offsetof(struct q5_1_block, d), 0, "d"},
    {offsetof(struct q5_1_block, m), 0, "m"},
};

static enum splash_status q5_1_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q5_1", data, n_bytes, n_elems, KQ_QK5_1,
                              sizeof(struct q5_1_block), q5_1_fields, 2, err);
}

static void q5_1_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q5_1_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK5_1; i++, out += KQ_QK5_1) {
        const float d = kq_h2f(b[i].d), m = kq_h2f(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < KQ_QK5_1 / 2; j++) {
            int x0 = (b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            int x1 = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            out[j] = x0 * d + m;
            out[j + KQ_QK5_1 / 2] = x1 * d + m;
        }
    }
}

static void q5_1_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q5_1_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK5_1; i++, x += KQ_QK5_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < KQ_QK5_1; j++) {
            if (x[j] < min)
                min = x[j];
            if (x[j] > max)
                max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        b[i].m = kq_f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < KQ_QK5_1 / 2; j++) {
            const float v0 = (x[j] - min) * id, v1 = (x[j + KQ_QK5_1 / 2] - min) * id;
            /* no clamp: the reference truncates (max - min) * id + 0.5 <= 31.5 */
            uint8_t x0 = (uint8_t)(v0 + 0.5f);
            uint8_t x1 = (uint8_t)(v1 + 0.5f);
            b[i].qs[j] = (uint8_t)((x0 & 0xF) | ((x1 & 0xF) << 4));
            qh |= (uint32_t)((x0 >> 4) & 1) << j;
            qh |= (uint32_t)((x1 >> 4) & 1) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

void q5_1_dot_q8_1_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q5_1_block *x = w_row;
    const struct splash_q8_1_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / KQ_QK5_1; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        int sumi = 0;
        for (int j = 0; j < KQ_QK5_1 / 2; j++) {
            int x0 = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            int x1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            sumi += x0 * y[i].qs[j] + x1 * y[i].qs[j + KQ_QK5_1 / 2];
        }
        sum += (kq_h2f(x[i].d) * kq_h2f(y[i].d)) * sumi + kq_h2f(x[i].m) * kq_h2f(y[i].s);
    }
    *s = sum;
}

static const struct splash_kernel_row q5_1_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX2_ROW, "avx2", q5_1_dot_q8_1_avx2, q5_1_mul_q8_1_avx2},
#endif
    {0, "scalar", q5_1_dot_q8_1_ref, NULL},
};

const struct splash_format_type kq_q5_1_type = {
    .name = "Q5_1",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 7,
    .block_elems = KQ_QK5_1,
    .block_bytes = sizeof(struct q5_1_block),
    .bits_per_weight = 6.0f,
    .act_type = "Q8_1",
    .validate = q5_1_validate,
    .to_float = q5_1_to_float,
    .from_float = q5_1_from_float,
    .rows = q5_1_rows,
    .n_rows = sizeof q5_1_rows / sizeof q5_1_rows[0],
    .repack_to = "Q5_1_R16",
    .repack = q51_r16_repack,
};
