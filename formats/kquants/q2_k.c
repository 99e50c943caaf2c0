/* Q2_K: 256 weights per super-block, 16 sub-blocks of 16 with 4-bit scales and
 * 4-bit mins (times fp16 d and dmin), 2-bit levels. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q2k_r16.h"

static const struct kq_scale_field q2_k_fields[] = {
    {offsetof(struct q2_k_block, d), 0, "d"},
    {offsetof(struct q2_k_block, dmin), 0, "dmin"},
};

static enum splash_status q2_k_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q2_K", data, n_bytes, n_elems, SPLASH_QK_K,
                              sizeof(struct q2_k_block), q2_k_fields, 2, err);
}

/* Element 128*h + 32*k + l sits in qs[32*h + l] bits 2k..2k+1; sub-block
 * (element / 16) has scale scales[] & 15 and min scales[] >> 4. */
static void q2_k_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q2_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = kq_h2f(b[i].d), min = kq_h2f(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = b[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *out++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

static void q2_k_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q2_k_block *y = blocks;
    uint8_t L[SPLASH_QK_K], Laux[16];
    float weights[16], mins[SPLASH_QK_K / 16], scales[SPLASH_QK_K / 16];
    const float q4scale = 15.0f;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, x += SPLASH_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = kq_make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                            -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < SPLASH_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)kq_nearest_int(iscale * scales[j]);
            y[i].d = kq_f2h(max_scale / q4scale);
        } else {
            for (int j = 0; j < SPLASH_QK_K / 16; j++)
                y[i].scales[j] = 0;
            y[i].d = kq_f2h(0.0f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < SPLASH_QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)(kq_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = kq_f2h(max_min / q4scale);
        } else {
            y[i].dmin = kq_f2h(0.0f);
        }
        /* requantize against the rounded scales */
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            const float d = kq_h2f(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d)
                continue;
            const float dm = kq_h2f(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int k = 0; k < 16; k++) {
                int l = kq_nearest_int((x[16 * j + k] + dm) / d);
                L[16 * j + k] = (uint8_t)KQ_MAX(0, KQ_MIN(3, l));
            }
        }
        for (int j = 0; j < SPLASH_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

void q2k_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q2_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        int summs = 0;
        for (int j = 0; j < 16; j++)
            summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        const float dall = y[i].d * kq_h2f(x[i].d);
        const float dmin = y[i].d * kq_h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        int isum = 0, is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    int d = x[i].scales[is++] & 0xF, sumi = 0;
                    for (int l = 0; l < 16; l++)
                        sumi += a[l] * ((q[l + 16 * half] >> shift) & 3);
                    isum += d * sumi;
                    a += 16;
                }
            }
        }
        sum += dall * isum - dmin * summs;
    }
    *s = sum;
}

static const struct splash_kernel_row q2_k_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX2_ROW, "avx2", q2k_dot_q8k_avx2, q2k_mul_q8k_avx2},
#endif
    {0, "scalar", q2k_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_q2_k_type = {
    .name = "Q2_K",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 10,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct q2_k_block),
    .bits_per_weight = 2.625f,
    .act_type = "Q8_K",
    .validate = q2_k_validate,
    .to_float = q2_k_to_float,
    .from_float = q2_k_from_float,
    .rows = q2_k_rows,
    .n_rows = sizeof q2_k_rows / sizeof q2_k_rows[0],
    .repack_to = "Q2_K_R16",
    .repack = q2k_r16_repack,
};
