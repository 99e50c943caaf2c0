/* IQ4_XS (GGUF 23): eight IQ4_NL sub-blocks under one fp16 scale with 6-bit sub-scales. */
#include <stddef.h>

#include "formats/kquants/iq4_quant.h"
#include "formats/kquants/iq4xs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq4xs_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                         struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq4_xs_type, data, n_bytes, n_elems,
                            offsetof(struct iq4_xs_block, d), err);
}

/* Sub-scale of sub-block ib, 0..63 (the value is this minus 32). */
static inline int iq4xs_ls(const struct iq4_xs_block *b, int ib)
{
    return ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4);
}

static void iq4xs_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq4_xs_block *x = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const float dl = d * (float)(iq4xs_ls(&x[i], ib) - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kq_iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * kq_iq4nl_values[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* imatrix, when given, holds one importance per value of x. */
static void iq4xs_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    struct iq4_xs_block *y = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++)
        kq_iq4_quantize(SPLASH_QK_K, x + i * SPLASH_QK_K,
                        imatrix ? imatrix + i * SPLASH_QK_K : NULL, &y[i].d, y[i].qs,
                        &y[i].scales_h, y[i].scales_l);
}

static void iq4xs_dot_q8k_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq4_xs_block *x = w_row;
    const struct splash_q8_k_block *y = act_row;
    float sumf = 0;
    for (int64_t i = 0; i < n / SPLASH_QK_K; i++) {
        const float d4d8 = splash_fp16_to_fp32(x[i].d) * y[i].d;
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
            const float dl = d4d8 * (float)(iq4xs_ls(&x[i], ib) - 32);
            int32_t sumi1 = 0, sumi2 = 0;
            for (int j = 0; j < 16; j++) {
                sumi1 += q8[j] * kq_iq4nl_values[qs[j] & 0xf];
                sumi2 += q8[j + 16] * kq_iq4nl_values[qs[j] >> 4];
            }
            sumf += dl * (float)(sumi1 + sumi2);
            qs += 16;
            q8 += 32;
        }
    }
    *s = sumf;
}

static const struct splash_kernel_row iq4xs_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI |
         SPLASH_CPU_AVX512VBMI,
     "avx512vnni", iq4xs_dot_q8k_avx512, iq4xs_mul_rows_q8k_avx512},
    {SPLASH_CPU_AVX2, "avx2", iq4xs_dot_q8k_avx2, iq4xs_mul_rows_q8k_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", iq4xs_dot_q8k_neon_dotprod, iq4xs_mul_rows_q8k_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", iq4xs_dot_q8k_neon, iq4xs_mul_rows_q8k_neon},
#endif
    {0, "scalar", iq4xs_dot_q8k_ref, NULL},
};

const struct splash_format_type kq_iq4_xs_type = {
    .name = "IQ4_XS",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 23,
    .block_elems = SPLASH_QK_K,
    .block_bytes = sizeof(struct iq4_xs_block),
    .bits_per_weight = 4.25f,
    .act_type = "Q8_K",
    .validate = iq4xs_validate,
    .to_float = iq4xs_to_float,
    .from_float = iq4xs_from_float,
    .rows = iq4xs_rows,
    .n_rows = sizeof iq4xs_rows / sizeof iq4xs_rows[0],
    .repack_to = "IQ4_XS_R16",
    .repack = iq4xs_r16_repack,
};
