/* Q3_K: 256 weights per super-block, 16 sub-blocks of 16 with signed 6-bit
 * scales (times fp16 d), 3-bit levels -4..3 split into 2 low bits and a high
 * bit mask. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q3k_r16.h"

static const struct kq_scale_field q3_k_fields[] = {{offsetof(struct q3_k_block, d), 0, "d"}};

static enum splash_status q3_k_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q3_K", data, n_bytes, n_elems, SPLASH_QK_K,
                              sizeof(struct q3_k_block), q3_k_fields, 1, err);
}

/* Element 128*h + 32*k + l: low bits in qs[32*h + l] >> 2k, high bit in
 * hmask[l] bit 4h + k (clear means subtract 4). */
static void q3_k_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q3_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d_all = kq_h2f(b[i].d);
        int8_t scales[16];
        kq_q3k_unpack_scales(b[i].scales, scales);
        const uint8_t *q = b[i].qs;
        uint8_t m = 1;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * scales[is++];
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *out++ = dl * (((q[l] >> shift) & 3) - ((b[i].hmask[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

static void q3_k_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q3_k_block *y = blocks;
    int8_t L[SPLASH_QK_K];
    float scales[SPLASH_QK_K / 16];
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, x += SPLASH_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            scales[j] = kq_make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.0f / max_scale;
            for (int j = 0; j < SPLASH_QK_K / 16; j++) {
                int8_t l = (int8_t)kq_nearest_int(iscale * scales[j]);
                l = (int8_t)(KQ_MAX(-32, KQ_MIN(31, l)) + 32);
                if (j < 8)
                    y[i].scales[j] = l & 0xF;
                else
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = kq_f2h(1 / iscale);
        } else {
            y[i].d = kq_f2h(0.0f);
        }
        int8_t sc[16];
        kq_q3k_unpack_scales(y[i].scales, sc);
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            float d = kq_h2f(y[i].d) * sc[j];
            if (!d)
                continue;
            for (int k = 0; k < 16; k++) {
                int l = kq_nearest_int(x[16 * j + k] / d);
                L[16 * j + k] = (int8_t)(KQ_MAX(-4, KQ_MIN(3, l)) + 4);
            }
        }
        /* high bit of element j goes to hmask[j % 32] bit j / 32 */
        memset(y[i].hmask, 0, SPLASH_QK_K / 8);
        for (int j = 0; j < SPLASH_QK_K; j++) {
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                L[j] = (int8_t)(L[j] - 4);
            }
        }
        for (int j = 0; j < SPLASH_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

void q3k_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q3_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        int8_t scales[16];
        kq_q3k_unpack_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        uint8_t m = 1;
        int isum = 0, is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    int sumi = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        sumi += *a++ * (((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4));
                    isum += scales[is++] * sumi;
                }
            }
        }
        sum += kq_h2f(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

static const struct splash_kernel_row q3_k_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX2_ROW, "avx2", q3k_dot_q8k_avx2, q3k_mul_q8k_avx2},
#endif
    {0, "scalar", q3k_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_q3_k_type = {
    .name = "Q3_K",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 11,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct q3_k_block),
    .bits_per_weight = 3.4375f,
    .act_type = "Q8_K",
    .validate = q3_k_validate,
    .to_float = q3_k_to_float,
    .from_float = q3_k_from_float,
    .rows = q3_k_rows,
    .n_rows = sizeof q3_k_rows / sizeof q3_k_rows[0],
    .repack_to = "Q3_K_R16",
    .repack = q3k_r16_repack,
};
