/* Q8_K: 256 values per block, int8 times a float32 scale, with the sums of
 * each 16 values precomputed (K-quant kernels fold the minimums with them).
 * The activation format of every K-quant and IQ type; no kernel rows. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

static const struct kq_scale_field q8_k_fields[] = {
    {offsetof(struct splash_q8_k_block, d), 1, "d"}};

static enum splash_status q8_k_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q8_K", data, n_bytes, n_elems, SPLASH_QK_K,
                              sizeof(struct splash_q8_k_block), q8_k_fields, 1, err);
}

static void q8_k_to_float(const void *blocks, float *out, int64_t n)
{
    const struct splash_q8_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, out += SPLASH_QK_K)
        for (int j = 0; j < SPLASH_QK_K; j++)
            out[j] = b[i].d * b[i].qs[j];
}

/* The value of largest magnitude maps to -127 (its sign kept in the scale). */
static void q8_k_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct splash_q8_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, x += SPLASH_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < SPLASH_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < SPLASH_QK_K; j++) {
            int v = kq_nearest_int(iscale * x[j]);
            b[i].qs[j] = (int8_t)KQ_MIN(127, v);
        }
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++)
                sum += b[i].qs[j * 16 + k];
            b[i].bsums[j] = (int16_t)sum;
        }
        b[i].d = 1 / iscale;
    }
}

const struct splash_format_type kq_q8_k_type = {
    .name = "Q8_K",
    .gguf_type = 15,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct splash_q8_k_block),
    .bits_per_weight = 9.125f,
    .act_type = NULL,
    .flags = SPLASH_FORMAT_ACTIVATION_ONLY,
    .validate = q8_k_validate,
    .to_float = q8_k_to_float,
    .from_float = q8_k_from_float,
    .rows = NULL,
    .n_rows = 0,
};
