/* Q6_K: 256 weights per super-block, 16 sub-blocks of 16 with int8 scales
 * (times fp16 d), 6-bit levels -32..31 split into 4 low bits and 2 high bits. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

static const struct kq_scale_field q6_k_fields[] = {{offsetof(struct q6_k_block, d), 0, "d"}};

static enum splash_status q6_k_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q6_K", data, n_bytes, n_elems, SPLASH_QK_K,
                              sizeof(struct q6_k_block), q6_k_fields, 1, err);
}

/* Element 128*h + 32*k + l: low nibble of ql[64*h + l + 32*(k&1)] (k >= 2: high
 * nibble), high bits qh[32*h + l] >> 2k; scale scales[8*h + 2*k + l/16]. */
static void q6_k_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q6_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = kq_h2f(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int h = 0; h < 2; h++, out += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                out[l] = d * sc[is + 0] * q1;
                out[l + 32] = d * sc[is + 2] * q2;
                out[l + 64] = d * sc[is + 4] * q3;
                out[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

static void q6_k_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q6_k_block *y = blocks;
    int8_t L[SPLASH_QK_K];
    float scales[SPLASH_QK_K / 16];
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, x += SPLASH_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < SPLASH_QK_K / 16; ib++) {
            const float scale = kq_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
            scales[ib] = scale;
            if (fabsf(scale) > max_abs_scale) {
                max_abs_scale = fabsf(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < KQ_GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.0f / max_scale;
        y[i].d = kq_f2h(1 / iscale);
        for (int ib = 0; ib < SPLASH_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)KQ_MIN(127, kq_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < SPLASH_QK_K / 16; j++) {
            float d = kq_h2f(y[i].d) * y[i].scales[j];
            if (!d)
                continue;
            for (int k = 0; k < 16; k++) {
                int l = kq_nearest_int(x[16 * j + k] / d);
                L[16 * j + k] = (int8_t)(KQ_MAX(-32, KQ_MIN(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < SPLASH_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void q6k_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q6_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales, *a = y[i].qs;
        int isum = 0;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, a += 128) {
            int s[8] = {0};
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                s[is + 0] += q1 * a[l];
                s[is + 2] += q2 * a[l + 32];
                s[is + 4] += q3 * a[l + 64];
                s[is + 6] += q4 * a[l + 96];
            }
            for (int k = 0; k < 8; k++)
                isum += sc[k] * s[k];
        }
        sum += kq_h2f(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

static const struct splash_kernel_row q6_k_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", q6k_dot_q8k_avx512, q6k_mul_q8k_avx512},
    {KQ_CPU_AVX2_ROW, "avx2", q6k_dot_q8k_avx2, q6k_mul_q8k_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", q6k_dot_q8k_neon_dotprod, q6k_mul_q8k_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", q6k_dot_q8k_neon, q6k_mul_q8k_neon},
#endif
    {0, "scalar", q6k_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_q6_k_type = {
    .name = "Q6_K",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 14,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct q6_k_block),
    .bits_per_weight = 6.5625f,
    .act_type = "Q8_K",
    .validate = q6_k_validate,
    .to_float = q6_k_to_float,
    .from_float = q6_k_from_float,
    .rows = q6_k_rows,
    .n_rows = sizeof q6_k_rows / sizeof q6_k_rows[0],
    .repack_to = "Q6_K_R16",
    .repack = q6k_r16_repack,
};
