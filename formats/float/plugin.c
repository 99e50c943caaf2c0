/* Unquantized weights: F32, F16 and BF16 (GGUF types 0, 1 and 30).
 *
 * Activations meet each weight type in its own precision, as ggml's vec_dot_type
 * does: F16 weights take F16 activations and BF16 weights BF16 ones, so the
 * products are exact in binary32 and only the summation order differs between
 * kernel rows. The scalar references sum in binary64. */
#include <string.h>

#include "formats/float/float_kernels.h"
#include "splash/format.h"
#include "splash/fp.h"

/* ---- conversions ----------------------------------------------------------- */

static void float_f32_to_float(const void *blocks, float *out, int64_t n)
{
    memcpy(out, blocks, (size_t)n * sizeof(float));
}

static void float_f32_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    memcpy(blocks, x, (size_t)n * sizeof(float));
}

static void float_f16_to_float(const void *blocks, float *out, int64_t n)
{
    const uint16_t *h = blocks;
    for (int64_t i = 0; i < n; i++)
        out[i] = splash_fp16_to_fp32(h[i]);
}

static void float_f16_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    uint16_t *h = blocks;
    for (int64_t i = 0; i < n; i++)
        h[i] = splash_fp32_to_fp16(x[i]);
}

static void float_bf16_to_float(const void *blocks, float *out, int64_t n)
{
    const uint16_t *b = blocks;
    for (int64_t i = 0; i < n; i++)
        out[i] = splash_bf16_to_fp32(b[i]);
}

static void float_bf16_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    uint16_t *b = blocks;
    for (int64_t i = 0; i < n; i++)
        b[i] = splash_fp32_to_bf16(x[i]);
}

/* ---- validation: sizes only (every bit pattern is a value) ----------------- */

static enum splash_status float_check_size(const char *type, size_t elem, size_t n_bytes,
                                           int64_t n_elems, struct splash_err *err)
{
    if (n_elems < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: negative element count %lld", type,
                              (long long)n_elems);
    if ((uint64_t)n_elems > SIZE_MAX / elem || n_bytes != (size_t)n_elems * elem)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %lld values, expected %llu", type, n_bytes,
                              (long long)n_elems, (unsigned long long)n_elems * elem);
    return SPLASH_OK;
}

static enum splash_status float_f32_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    (void)data;
    return float_check_size("F32", 4, n_bytes, n_elems, err);
}

static enum splash_status float_f16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    (void)data;
    return float_check_size("F16", 2, n_bytes, n_elems, err);
}

static enum splash_status float_bf16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                              struct splash_err *err)
{
    (void)data;
    return float_check_size("BF16", 2, n_bytes, n_elems, err);
}

/* ---- scalar reference rows --------------------------------------------------- */

static void float_f32_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const float *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)w[i] * (double)a[i];
    *s = (float)sum;
}

static void float_f16_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const uint16_t *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(splash_fp16_to_fp32(w[i]) * splash_fp16_to_fp32(a[i]));
    *s = (float)sum;
}

static void float_bf16_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const uint16_t *w = w_row, *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(splash_bf16_to_fp32(w[i]) * splash_bf16_to_fp32(a[i]));
    *s = (float)sum;
}

/* ---- tables ------------------------------------------------------------------ */

#define AVX2_BITS (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)
#define AVX512_BITS                                                                                \
    (AVX2_BITS | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |                  \
     SPLASH_CPU_AVX512DQ)

static const struct splash_kernel_row float_f32_rows[] = {
#if defined(__x86_64__)
    {AVX512_BITS, "avx512", float_f32_avx512_dot, float_f32_avx512_mul_rows},
    {AVX2_BITS, "avx2", float_f32_avx2_dot, float_f32_avx2_mul_rows},
#endif
    {0, "scalar", float_f32_dot_ref, NULL},
};

static const struct splash_kernel_row float_f16_rows[] = {
#if defined(__x86_64__)
    {AVX512_BITS, "avx512", float_f16_avx512_dot, float_f16_avx512_mul_rows},
    {AVX2_BITS, "avx2", float_f16_avx2_dot, float_f16_avx2_mul_rows},
#endif
    {0, "scalar", float_f16_dot_ref, NULL},
};

static const struct splash_kernel_row float_bf16_rows[] = {
#if defined(__x86_64__)
    {AVX512_BITS | SPLASH_CPU_AVX512BF16, "avx512bf16", float_bf16_avx512bf16_dot,
     float_bf16_avx512bf16_mul_rows},
    {AVX2_BITS, "avx2", float_bf16_avx2_dot, float_bf16_avx2_mul_rows},
#endif
    {0, "scalar", float_bf16_dot_ref, NULL},
};

#define N_ROWS(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const struct splash_format_type float_f32_type = {
    .name = "F32",
    .gguf_type = 0,
    .block_elems = 1,
    .block_bytes = 4,
    .bits_per_weight = 32.0f,
    .act_type = "F32",
    .flags = SPLASH_FORMAT_FLOAT,
    .validate = float_f32_validate,
    .to_float = float_f32_to_float,
    .from_float = float_f32_from_float,
    .rows = float_f32_rows,
    .n_rows = N_ROWS(float_f32_rows),
};

static const struct splash_format_type float_f16_type = {
    .name = "F16",
    .gguf_type = 1,
    .block_elems = 1,
    .block_bytes = 2,
    .bits_per_weight = 16.0f,
    .act_type = "F16",
    .flags = SPLASH_FORMAT_FLOAT,
    .validate = float_f16_validate,
    .to_float = float_f16_to_float,
    .from_float = float_f16_from_float,
    .rows = float_f16_rows,
    .n_rows = N_ROWS(float_f16_rows),
};

static const struct splash_format_type float_bf16_type = {
    .name = "BF16",
    .gguf_type = 30,
    .block_elems = 1,
    .block_bytes = 2,
    .bits_per_weight = 16.0f,
    .act_type = "BF16",
    .flags = SPLASH_FORMAT_FLOAT,
    .validate = float_bf16_validate,
    .to_float = float_bf16_to_float,
    .from_float = float_bf16_from_float,
    .rows = float_bf16_rows,
    .n_rows = N_ROWS(float_bf16_rows),
};

static const struct splash_format_type *const float_types[] = {
    &float_f32_type,
    &float_f16_type,
    &float_bf16_type,
};

static const struct splash_format_plugin float_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "float", "0.1.0",
                                        struct splash_format_plugin),
    .types = float_types,
    .n_types = N_ROWS(float_types),
    .checkpoint_formats = NULL,
};

static const struct splash_plugin_header *float_entry(const struct splash_host *host)
{
    (void)host;
    return &float_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_float, float_entry)
