/* Q5_0: 32 weights per block, 5-bit levels -16..15 times an fp16 scale; the
 * fifth bits live in a 32-bit mask. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q50_r16.h"

static const struct kq_scale_field q5_0_fields[] = {{offsetof(struct q5_0_block, d), 0, "d"}};

static enum splash_status q5_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q5_0", data, n_bytes, n_elems, KQ_QK5_0,
                              sizeof(struct q5_0_block), q5_0_fields, 1, err);
}

static void q5_0_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q5_0_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK5_0; i++, out += KQ_QK5_0) {
        const float d = kq_h2f(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < KQ_QK5_0 / 2; j++) {
            int x0 = ((b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
            int x1 = ((b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            out[j] = x0 * d;
            out[j + KQ_QK5_0 / 2] = x1 * d;
        }
    }
}

static void q5_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q5_0_block *b = blocks;
    for (int64_t i = 0; i < n / KQ_QK5_0; i++, x += KQ_QK5_0) {
        float amax = 0, max = 0;
        for (int j = 0; j < KQ_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < KQ_QK5_0 / 2; j++) {
            const float v0 = x[j] * id, v1 = x[j + KQ_QK5_0 / 2] * id;
            uint8_t x0 = (uint8_t)KQ_MIN(31, (int8_t)(v0 + 16.5f));
            uint8_t x1 = (uint8_t)KQ_MIN(31, (int8_t)(v1 + 16.5f));
            b[i].qs[j] = (uint8_t)((x0 & 0xF) | ((x1 & 0xF) << 4));
            qh |= (uint32_t)((x0 >> 4) & 1) << j;
            qh |= (uint32_t)((x1 >> 4) & 1) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

void q5_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q5_0_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / KQ_QK5_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        int sumi = 0;
        for (int j = 0; j < KQ_QK5_0 / 2; j++) {
            int x0 = ((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
            int x1 = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += x0 * y[i].qs[j] + x1 * y[i].qs[j + KQ_QK5_0 / 2];
        }
        sum += sumi * (kq_h2f(x[i].d) * kq_h2f(y[i].d));
    }
    *s = sum;
}

static const struct splash_kernel_row q5_0_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX2_ROW, "avx2", q5_0_dot_q8_0_avx2, q5_0_mul_q8_0_avx2},
#endif
    {0, "scalar", q5_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type kq_q5_0_type = {
    .name = "Q5_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 6,
    .block_elems = KQ_QK5_0,
    .block_bytes = sizeof(struct q5_0_block),
    .bits_per_weight = 5.5f,
    .act_type = "Q8_0",
    .validate = q5_0_validate,
    .to_float = q5_0_to_float,
    .from_float = q5_0_from_float,
    .rows = q5_0_rows,
    .n_rows = sizeof q5_0_rows / sizeof q5_0_rows[0],
    .repack_to = "Q5_0_R16",
    .repack = q50_r16_repack,
};
