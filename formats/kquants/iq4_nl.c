/* IQ4_NL (GGUF 20): 32-value blocks of 4-bit indices into 16 non-linear levels. */
#include <stddef.h>

#include "formats/kquants/iq4_quant.h"
#include "formats/kquants/iq4nl_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "formats/kquants/iq_simd.h"
#include "formats/kquants/iq_types.h"

static enum splash_status iq4nl_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                         struct splash_err *err)
{
    return kq_iq_validate_d(&kq_iq4_nl_type, data, n_bytes, n_elems,
                            offsetof(struct iq4_nl_block, d), err);
}

static void iq4nl_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq4_nl_block *x = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_NL; i++) {
        const float d = splash_fp16_to_fp32(x[i].d);
        for (int j = 0; j < KQ_QK4_NL / 2; j++) {
            y[j] = d * kq_iq4nl_values[x[i].qs[j] & 0xf];
            y[j + KQ_QK4_NL / 2] = d * kq_iq4nl_values[x[i].qs[j] >> 4];
        }
        y += KQ_QK4_NL;
    }
}

/* imatrix, when given, holds one importance per value of x. */
static void iq4nl_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    struct iq4_nl_block *y = blocks;
    for (int64_t i = 0; i < n / KQ_QK4_NL; i++)
        kq_iq4_quantize(KQ_QK4_NL, x + i * KQ_QK4_NL, imatrix ? imatrix + i * KQ_QK4_NL : NULL,
                        &y[i].d, y[i].qs, NULL, NULL);
}

static void iq4nl_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct iq4_nl_block *x = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sumf = 0;
    for (int64_t i = 0; i < n / KQ_QK4_NL; i++) {
        const float d = splash_fp16_to_fp32(y[i].d) * splash_fp16_to_fp32(x[i].d);
        int32_t sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < KQ_QK4_NL / 2; j++) {
            sumi1 += y[i].qs[j] * kq_iq4nl_values[x[i].qs[j] & 0xf];
            sumi2 += y[i].qs[j + KQ_QK4_NL / 2] * kq_iq4nl_values[x[i].qs[j] >> 4];
        }
        sumf += d * (float)(sumi1 + sumi2);
    }
    *s = sumf;
}

static const struct splash_kernel_row iq4nl_rows[] = {
#if defined(__x86_64__)
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI,
     "avx512vnni", iq4nl_dot_q80_avx512, iq4nl_mul_rows_q80_avx512},
    {SPLASH_CPU_AVX2, "avx2", iq4nl_dot_q80_avx2, iq4nl_mul_rows_q80_avx2},
#endif
#if defined(__aarch64__)
    {KQ_CPU_NEON_DOTPROD_ROW, "neon-dotprod", iq4nl_dot_q80_neon_dotprod, iq4nl_mul_rows_q80_neon_dotprod},
    {KQ_CPU_NEON_ROW, "neon", iq4nl_dot_q80_neon, iq4nl_mul_rows_q80_neon},
#endif
    {0, "scalar", iq4nl_dot_q8_0_ref, NULL},
};

const struct splash_format_type kq_iq4_nl_type = {
    .name = "IQ4_NL",
    .flags = SPLASH_FORMAT_LINEAR,
    .gguf_type = 20,
    .block_elems = KQ_QK4_NL,
    .block_bytes = sizeof(struct iq4_nl_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .repack_to = "IQ4_NL_R16",
    .repack = iq4nl_r16_repack,
    .validate = iq4nl_validate,
    .to_float = iq4nl_to_float,
    .from_float = iq4nl_from_float,
    .rows = iq4nl_rows,
    .n_rows = sizeof iq4nl_rows / sizeof iq4nl_rows[0],
};
