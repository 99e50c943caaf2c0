/* NVFP4 and FP8 E4M3 weights: GGUF type 40, NVFP4_G (NVFP4 with its tensor scale,
 * for MLX nvfp4, Model Optimizer and compressed-tensors checkpoints) and FP8_E4M3
 * (Model Optimizer FP8, compressed-tensors float-quantized).
 *
 * NVFP4 values are e2m1 * e4m3 (* g): NVFP4 and NVFP4_G take Q8_0 activations,
 * two Q8_0 blocks per 64 values. FP8 values are not small integers, so FP8_E4M3
 * takes F32 activations. */
#include <math.h>

#include "formats/nvfp4/nvfp4.h"
#include "formats/nvfp4/nvfp4_r16.h"
#include "splash/format.h"
#include "splash/fp.h"

/* ---- NVFP4 conversions ------------------------------------------------------------- */

static void nvfp4_block_to_float(const struct nvfp4_block *x, float g, float *out)
{
    for (int s = 0; s < 4; s++) {
        const float d = nvfp4_ue4m3_half(x->d[s]);
        for (int j = 0; j < 8; j++) {
            const uint8_t q = x->qs[8 * s + j];
            out[16 * s + j] = nvfp4_e2m1_x2[q & 0xf] * d * g;
            out[16 * s + j + 8] = nvfp4_e2m1_x2[q >> 4] * d * g;
        }
    }
}

static void nvfp4_to_float(const void *blocks, float *out, int64_t n)
{
    const struct nvfp4_block *x = blocks;
    for (int64_t i = 0; i < n / NVFP4_QK; i++)
        nvfp4_block_to_float(&x[i], 1.0f, out + i * NVFP4_QK);
}

static void nvfp4g_to_float(const void *blocks, float *out, int64_t n)
{
    const struct nvfp4g_block *x = blocks;
    for (int64_t i = 0; i < n / NVFP4G_QK; i++)
        for (int k = 0; k < 4; k++)
            nvfp4_block_to_float(&x[i].b[k], x[i].g, out + i * NVFP4G_QK + k * NVFP4_QK);
}

/* float -> UE4M3 as GGUF's NVFP4 quantizer rounds: the mantissa rounds half up on
 * its first dropped bit, subnormals to the nearest multiple of 2^-9, values from
 * 2^8 up saturate to 0x7e (448). */
static uint8_t nvfp4_fp32_to_ue4m3(float x)
{
    if (!(x > 0.0f))
        return 0;
    if (x > 448.0f)
        x = 448.0f;
    const uint32_t bits = splash_fp32_to_bits(x);
    int e = (int)((bits >> 23) & 0xffu) - 127 + 7;
    if (e <= 0) {
        int m = (int)(x * 512.0f + 0.5f);
        if (m > 7)
            m = 7;
        return m < 1 ? 0 : (uint8_t)m;
    }
    if (e >= 15)
        return 0x7e;
    int m = (int)((bits >> 20) & 0x7u) + (int)((bits >> 19) & 1u);
    if (m > 7) {
        m = 0;
        if (++e >= 15)
            return 0x7e;
    }
    return (uint8_t)(e << 3 | m);
}

/* The code whose value (times d) is nearest x; the first of equals wins. */
static uint8_t nvfp4_nearest(float x, float d)
{
    uint8_t best = 0;
    float best_err = fabsf(nvfp4_e2m1_x2[0] * d - x);
    for (uint8_t c = 1; c < 16; c++) {
        float err = fabsf(nvfp4_e2m1_x2[c] * d - x);
        if (err < best_err) {
            best = c;
            best_err = err;
        }
    }
    return best;
}

/* GGUF's reference: each 16 values' scale maps their largest magnitude to 6. With
 * g != 1 the values are divided by g first (NVFP4_G). */
static void nvfp4_quantize_block(const float *x, float inv_g, struct nvfp4_block *y)
{
    for (int s = 0; s < 4; s++) {
        float xb[NVFP4_SUB];
        float amax = 0.0f;
        for (int j = 0; j < NVFP4_SUB; j++) {
            xb[j] = x[16 * s + j] * inv_g;
            if (amax < fabsf(xb[j]))
                amax = fabsf(xb[j]);
        }
        const uint8_t ue = nvfp4_fp32_to_ue4m3(amax / 6.0f);
        const float d = nvfp4_ue4m3_half(ue);
        y->d[s] = ue;
        for (int j = 0; j < 8; j++)
            y->qs[8 * s + j] =
                (uint8_t)(nvfp4_nearest(xb[j], d) | nvfp4_nearest(xb[j + 8], d) << 4);
    }
}

static void nvfp4_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct nvfp4_block *y = blocks;
    for (int64_t i = 0; i < n / NVFP4_QK; i++)
        nvfp4_quantize_block(x + i * NVFP4_QK, 1.0f, &y[i]);
}

/* Model Optimizer's recipe per 256 values: g puts the largest magnitude at the top
 * of E4M3 (448) times the top of E2M1 (6). */
static void nvfp4g_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct nvfp4g_block *y = blocks;
    for (int64_t i = 0; i < n / NVFP4G_QK; i++) {
        const float *xb = x + i * NVFP4G_QK;
        float amax = 0.0f;
        for (int j = 0; j < NVFP4G_QK; j++)
            if (amax < fabsf(xb[j]))
                amax = fabsf(xb[j]);
        const float g = amax > 0.0f ? amax / (6.0f * 448.0f) : 1.0f;
        y[i].g = g;
        for (int k = 0; k < 4; k++)
            nvfp4_quantize_block(xb + k * NVFP4_QK, 1.0f / g, &y[i].b[k]);
    }
}

/* ---- FP8 conversions ------------------------------------------------------------------ */

static void nvfp4_fp8_to_float(const void *blocks, float *out, int64_t n)
{
    const struct fp8_block *x = blocks;
    for (int64_t i = 0; i < n / FP8_QK; i++)
        for (int j = 0; j < FP8_QK; j++)
            out[i * FP8_QK + j] = nvfp4_e4m3_value(x[i].q[j]) * x[i].g;
}

/* float -> FP8 E4M3, round to nearest even, saturating at 448 (no Inf in E4M3). */
static uint8_t nvfp4_fp32_to_e4m3(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const float a = fabsf(x);
    if (isnan(a))
        return (uint8_t)(sign | 0x7f);
    if (a >= 448.0f)
        return (uint8_t)(sign | 0x7e);
    if (a < 0x1p-6f) /* subnormal: multiples of 2^-9; 8 * 2^-9 is the smallest normal */
        return (uint8_t)(sign | (uint8_t)lrintf(a * 512.0f));
    int e2;
    frexpf(a, &e2);
    int e = e2 - 1; /* a in [2^e, 2^(e+1)) */
    int m = (int)lrintf(ldexpf(a, -e) * 8.0f) - 8;
    if (m == 8) {
        m = 0;
        e++;
    }
    if (e + 7 > 15 || (e + 7 == 15 && m > 6))
        return (uint8_t)(sign | 0x7e);
    return (uint8_t)(sign | (e + 7) << 3 | m);
}

static void nvfp4_fp8_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct fp8_block *y = blocks;
    for (int64_t i = 0; i < n / FP8_QK; i++) {
        const float *xb = x + i * FP8_QK;
        float amax = 0.0f;
        for (int j = 0; j < FP8_QK; j++)
            if (amax < fabsf(xb[j]))
                amax = fabsf(xb[j]);
        const float g = amax > 0.0f ? amax / 448.0f : 1.0f;
        y[i].g = g;
        for (int j = 0; j < FP8_QK; j++)
            y[i].q[j] = nvfp4_fp32_to_e4m3(xb[j] / g);
    }
}

/* ---- validation ------------------------------------------------------------------------ */

static enum splash_status nvfp4_check_size(const char *type, uint32_t qk, size_t block_bytes,
                                           size_t n_bytes, int64_t n_elems, struct splash_err *err)
{
    if (n_elems < 0 || n_elems % qk)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld values, not a multiple of the %u-value block", type,
                              (long long)n_elems, qk);
    uint64_t want = (uint64_t)(n_elems / qk) * block_bytes;
    if (n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %lld values, expected %llu", type, n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    return SPLASH_OK;
}

/* Every scale byte decodes to a finite value (GGUF reads 0x7f as 0). */
static enum splash_status nvfp4_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                         struct splash_err *err)
{
    (void)data;
    return nvfp4_check_size("NVFP4", NVFP4_QK, sizeof(struct nvfp4_block), n_bytes, n_elems, err);
}

static enum splash_status nvfp4g_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                          struct splash_err *err)
{
    enum splash_status st = nvfp4_check_size("NVFP4_G", NVFP4G_QK, sizeof(struct nvfp4g_block),
                                             n_bytes, n_elems, err);
    if (st != SPLASH_OK)
        return st;
    const unsigned char *p = data;
    for (int64_t i = 0; i < n_elems / NVFP4G_QK; i++) {
        float g;
        memcpy(&g, p + (size_t)i * sizeof(struct nvfp4g_block), sizeof g);
        if (!isfinite(g))
            return splash_err_set(err, SPLASH_ERR_INVALID, "NVFP4_G block %lld: tensor scale %g",
                                  (long long)i, g);
    }
    return SPLASH_OK;
}

static enum splash_status nvfp4_fp8_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    enum splash_status st = nvfp4_check_size("FP8_E4M3", FP8_QK, sizeof(struct fp8_block), n_bytes,
                                             n_elems, err);
    if (st != SPLASH_OK)
        return st;
    const unsigned char *p = data;
    for (int64_t i = 0; i < n_elems / FP8_QK; i++) {
        const unsigned char *b = p + (size_t)i * sizeof(struct fp8_block);
        float g;
        memcpy(&g, b, sizeof g);
        if (!isfinite(g))
            return splash_err_set(err, SPLASH_ERR_INVALID, "FP8_E4M3 block %lld: scale %g",
                                  (long long)i, g);
        for (int j = 0; j < FP8_QK; j++)
            if ((b[4 + j] & 0x7f) == 0x7f)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "FP8_E4M3 block %lld: value %d is NaN (0x%02x)",
                                      (long long)i, j, b[4 + j]);
    }
    return SPLASH_OK;
}

/* ---- scalar reference rows --------------------------------------------------------------- */

/* One 64-value block against two Q8_0 blocks, in GGUF's order: per 16 values
 * (dy * d) * integer dot, summed in float. g scales d (exact when g is 1). */
static float nvfp4_block_dot(const struct nvfp4_block *x, float g, const struct q8_0_block *y,
                             float sum)
{
    for (int s = 0; s < 4; s++) {
        const struct q8_0_block *yb = &y[s / 2];
        const int8_t *a = yb->qs + (s % 2) * 16;
        int sumi = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t q = x->qs[8 * s + j];
            sumi += nvfp4_e2m1_x2[q & 0xf] * a[j];
            sumi += nvfp4_e2m1_x2[q >> 4] * a[j + 8];
        }
        const float ds = nvfp4_ue4m3_half(x->d[s]) * g;
        sum += splash_fp16_to_fp32(yb->d) * ds * (float)sumi;
    }
    return sum;
}

static void nvfp4_q8_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct nvfp4_block *x = w_row;
    const struct q8_0_block *y = act_row;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / NVFP4_QK; i++)
        sum = nvfp4_block_dot(&x[i], 1.0f, &y[2 * i], sum);
    *s = sum;
}

static void nvfp4g_q8_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct nvfp4g_block *x = w_row;
    const struct q8_0_block *y = act_row;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / NVFP4G_QK; i++)
        for (int k = 0; k < 4; k++)
            sum = nvfp4_block_dot(&x[i].b[k], x[i].g, &y[8 * i + 2 * k], sum);
    *s = sum;
}

static void nvfp4_fp8_f32_dot_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct fp8_block *x = w_row;
    const float *a = act_row;
    double sum = 0.0;
    for (int64_t i = 0; i < n / FP8_QK; i++) {
        double block = 0.0;
        for (int j = 0; j < FP8_QK; j++)
            block += (double)nvfp4_e4m3_value(x[i].q[j]) * a[i * FP8_QK + j];
        sum += block * x[i].g;
    }
    *s = (float)sum;
}

/* ---- tables ------------------------------------------------------------------------------ */

#define AVX2_BITS (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)
#define AVX512_BITS                                                                                \
    (AVX2_BITS | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |                  \
     SPLASH_CPU_AVX512DQ)
#define AVX512VNNI_BITS (AVX512_BITS | SPLASH_CPU_AVX512VNNI)

static const struct splash_kernel_row nvfp4_rows[] = {
#if defined(__x86_64__)
    {AVX512VNNI_BITS, "avx512vnni", nvfp4_q8_avx512vnni_dot, nvfp4_q8_avx512vnni_mul_rows},
    {AVX2_BITS, "avx2", nvfp4_q8_avx2_dot, nvfp4_q8_avx2_mul_rows},
#endif
    {0, "scalar", nvfp4_q8_dot_ref, NULL},
};

static const struct splash_kernel_row nvfp4g_rows[] = {
#if defined(__x86_64__)
    {AVX512VNNI_BITS, "avx512vnni", nvfp4g_q8_avx512vnni_dot, nvfp4g_q8_avx512vnni_mul_rows},
    {AVX2_BITS, "avx2", nvfp4g_q8_avx2_dot, nvfp4g_q8_avx2_mul_rows},
#endif
    {0, "scalar", nvfp4g_q8_dot_ref, NULL},
};

static const struct splash_kernel_row nvfp4_fp8_rows[] = {
#if defined(__x86_64__)
    {AVX512_BITS, "avx512", nvfp4_fp8_f32_avx512_dot, nvfp4_fp8_f32_avx512_mul_rows},
    {AVX2_BITS, "avx2", nvfp4_fp8_f32_avx2_dot, nvfp4_fp8_f32_avx2_mul_rows},
#endif
    {0, "scalar", nvfp4_fp8_f32_dot_ref, NULL},
};

#define N_OF(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const struct splash_format_type nvfp4_type = {
    .name = "NVFP4",
    .gguf_type = 40,
    /* llama.cpp's files may keep NAME.scale beside a weight: its products' multiplier */
    .flags = SPLASH_FORMAT_TENSOR_SCALE | SPLASH_FORMAT_LINEAR,
    .block_elems = NVFP4_QK,
    .block_bytes = sizeof(struct nvfp4_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .validate = nvfp4_validate,
    .to_float = nvfp4_to_float,
    .from_float = nvfp4_from_float,
    .rows = nvfp4_rows,
    .n_rows = N_OF(nvfp4_rows),
    .repack_to = "NVFP4_R16",
    .repack = nvfp4_r16_repack,
};

static const struct splash_format_type nvfp4g_type = {
    .name = "NVFP4_G",
    .gguf_type = -1,
    .flags = SPLASH_FORMAT_LINEAR,
    .block_elems = NVFP4G_QK,
    .block_bytes = sizeof(struct nvfp4g_block),
    .bits_per_weight = 4.625f,
    .act_type = "Q8_0",
    .validate = nvfp4g_validate,
    .to_float = nvfp4g_to_float,
    .from_float = nvfp4g_from_float,
    .rows = nvfp4g_rows,
    .n_rows = N_OF(nvfp4g_rows),
    .mlx_mode = "nvfp4",
    .mlx_bits = 4,
    .mlx_group_size = NVFP4_SUB,
    .import_planes = nvfp4_g_import_planes,
};

static const struct splash_format_type nvfp4_fp8_type = {
    .name = "FP8_E4M3",
    .gguf_type = -1,
    .flags = SPLASH_FORMAT_LINEAR,
    .block_elems = FP8_QK,
    .block_bytes = sizeof(struct fp8_block),
    .bits_per_weight = 8.25f,
    .act_type = "F32",
    .validate = nvfp4_fp8_validate,
    .to_float = nvfp4_fp8_to_float,
    .from_float = nvfp4_fp8_from_float,
    .rows = nvfp4_fp8_rows,
    .n_rows = N_OF(nvfp4_fp8_rows),
    .import_planes = nvfp4_fp8_import_planes,
};

static const struct splash_format_type *const nvfp4_types[] = {
    &nvfp4_type,
    &nvfp4g_type,
    &nvfp4_fp8_type,
    &nvfp4_r16_type,
};

static const char *const nvfp4_checkpoint_formats[] = {
    "modelopt:NVFP4",
    "modelopt:W4A16_NVFP4",
    "modelopt:FP8",
    "compressed-tensors:nvfp4-pack-quantized",
    "compressed-tensors:float-quantized",
    NULL,
};

static const struct splash_format_plugin nvfp4_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "nvfp4", "0.1.0",
                                        struct splash_format_plugin),
    .types = nvfp4_types,
    .n_types = N_OF(nvfp4_types),
    .checkpoint_formats = nvfp4_checkpoint_formats,
};

static const struct splash_plugin_header *nvfp4_entry(const struct splash_host *host)
{
    (void)host;
    return &nvfp4_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_nvfp4, nvfp4_entry)
