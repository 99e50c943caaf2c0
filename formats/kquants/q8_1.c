/* Q8_1: Q8_0 plus s = d * sum(qs) as fp16, the activation format of Q4_1 and
 * Q5_1 (the sum carries their minimum). Activation-only: no kernel rows. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

static const struct kq_scale_field q8_1_fields[] = {
    {offsetof(struct splash_q8_1_block, d), 0, "d"},
    {offsetof(struct splash_q8_1_block, s), 0, "s"},
};

static enum splash_status q8_1_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q8_1", data, n_bytes, n_elems, SPLASH_QK8_0,
                              sizeof(struct splash_q8_1_block), q8_1_fields, 2, err);
}

static void q8_1_to_float(const void *blocks, float *out, int64_t n)
{
    const struct splash_q8_1_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++, out += SPLASH_QK8_0) {
        const float d = kq_h2f(b[i].d);
        for (int j = 0; j < SPLASH_QK8_0; j++)
            out[j] = b[i].qs[j] * d;
    }
}

static void q8_1_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct splash_q8_1_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++, x += SPLASH_QK8_0) {
        float amax = 0;
        for (int j = 0; j < SPLASH_QK8_0; j++)
            amax = KQ_MAX(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = kq_f2h(d);
        int sum = 0;
        for (int j = 0; j < SPLASH_QK8_0; j++) {
            b[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += b[i].qs[j];
        }
        b[i].s = kq_f2h(sum * d);
    }
}

const struct splash_format_type kq_q8_1_type = {
    .name = "Q8_1",
    .gguf_type = 9,
    .block_elems = SPLASH_QK8_0,
    .block_bytes = sizeof(struct splash_q8_1_block),
    .bits_per_weight = 9.0f,
    .act_type = NULL,
    .flags = SPLASH_FORMAT_ACTIVATION_ONLY,
    .validate = q8_1_validate,
    .to_float = q8_1_to_float,
    .from_float = q8_1_from_float,
    .rows = NULL,
    .n_rows = 0,
};
