/* Q4_K: 256 weights per super-block, 8 sub-blocks of 32 with 6-bit scales and
 * 6-bit mins (times fp16 d and dmin), 4-bit levels. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q4k_r16.h"

static const struct kq_scale_field q4_k_fields[] = {
    {offsetof(struct q4_k_block, d), 0, "d"},
    {offsetof(struct q4_k_block, dmin), 0, "dmin"},
};

static enum splash_status q4_k_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                        struct splash_err *err)
{
    return kq_validate_blocks("Q4_K", data, n_bytes, n_elems, SPLASH_QK_K,
                              sizeof(struct q4_k_block), q4_k_fields, 2, err);
}

/* Element 64*p + l (l < 32) is the low nibble of qs[32*p + l], 64*p + 32 + l
 * the high nibble; sub-block 2p and 2p + 1. */
static void q4_k_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q4_k_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = kq_h2f(b[i].d), min = kq_h2f(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int p = 0; p < 4; p++, q += 32) {
            uint8_t sc, m;
            kq_get_scale_min_k4(2 * p, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            kq_get_scale_min_k4(2 * p + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *out++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *out++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q4_k_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct q4_k_block *y = blocks;
    uint8_t L[SPLASH_QK_K], Laux[32];
    float weights[32], mins[SPLASH_QK_K / 32], scales[SPLASH_QK_K / 32];
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++, x += SPLASH_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < SPLASH_QK_K / 32; j++) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++)
                sum_x2 += x[32 * j + l] * x[32 * j + l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++)
                weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = kq_make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                            -1.0f, 0.1f, 20, false);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < SPLASH_QK_K / 32; j++) {
            uint8_t ls = (uint8_t)kq_nearest_int(inv_scale * scales[j]);
            uint8_t lm = (uint8_t)kq_nearest_int(inv_min * mins[j]);
            kq_set_scale_min_k4(j, y[i].scales, KQ_MIN(63, ls), KQ_MIN(63, lm));
        }
        y[i].d = kq_f2h(max_scale / 63.0f);
        y[i].dmin = kq_f2h(max_min / 63.0f);
        for (int j = 0; j < SPLASH_QK_K / 32; j++) {
            uint8_t sc, m;
            kq_get_scale_min_k4(j, y[i].scales, &sc, &m);
            const float d = kq_h2f(y[i].d) * sc;
            if (!d)
                continue;
            const float dm = kq_h2f(y[i].dmin) * m;
            for (int k = 0; k < 32; k++) {
                int l = kq_nearest_int((x[32 * j + k] + dm) / d);
                L[32 * j + k] = (uint8_t)KQ_MAX(0, KQ_MIN(15, l));
            }
        }
        uint8_t *q = y[i].qs;
        for (int j = 0; j < SPLASH_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void q4k_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct q4_k_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        int isum = 0, msum = 0;
        for (int p = 0; p < 4; p++, q += 32, a += 64) {
            uint8_t sc1, m1, sc2, m2;
            kq_get_scale_min_k4(2 * p, x[i].scales, &sc1, &m1);
            kq_get_scale_min_k4(2 * p + 1, x[i].scales, &sc2, &m2);
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; l++) {
                s1 += (q[l] & 0xF) * a[l];
                s2 += (q[l] >> 4) * a[l + 32];
            }
            isum += sc1 * s1 + sc2 * s2;
            msum += m1 * (y[i].bsums[4 * p] + y[i].bsums[4 * p + 1]) +
                    m2 * (y[i].bsums[4 * p + 2] + y[i].bsums[4 * p + 3]);
        }
        sum += y[i].d * kq_h2f(x[i].d) * isum - y[i].d * kq_h2f(x[i].dmin) * msum;
    }
    *s = sum;
}

static const struct splash_kernel_row q4_k_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", q4k_dot_q8k_avx512, q4k_mul_q8k_avx512},
    {KQ_CPU_AVX2_ROW, "avx2", q4k_dot_q8k_avx2, q4k_mul_q8k_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_I8MM_ROW, "neon-i8mm", q4k_dot_q8k_neon_dotprod, q4k_mul_q8k_neon_i8mm},
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", q4k_dot_q8k_neon_dotprod, q4k_mul_q8k_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", q4k_dot_q8k_neon, q4k_mul_q8k_neon},
#endif
    {0, "scalar", q4k_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_q4_k_type = {
    .name = "Q4_K",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 12,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct q4_k_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_K",
    .validate = q4_k_validate,
    .to_float = q4_k_to_float,
    .from_float = q4_k_from_float,
    .rows = q4_k_rows,
    .n_rows = sizeof q4_k_rows / sizeof q4_k_rows[0],
    .repack_to = "Q4_K_R16",
    .repack = q4k_r16_repack,
};
