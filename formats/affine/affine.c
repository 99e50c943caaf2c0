/* MLX affine formats: validation, conversion, MLX's quantizer, checkpoint import and
 * the scalar kernels. Every routine is written once for any (bits, group) and
 * instantiated per type by AFFINE_FOR_EACH at the end of the file. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "formats/affine/affine.h"
#include "formats/affine/affine_r16.h"
#include "formats/affine/affine_types.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "splash/host.h"

/* ---- validation and conversion ------------------------------------------ */

static enum splash_status affine_validate_impl(const char *name, int bits, int group,
                                               const void *data, size_t n_bytes, int64_t n_elems,
                                               struct splash_err *err)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    if (n_elems < 0 || n_elems % group)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %" PRId64 " values is not a whole number of %d-value groups",
                              name, n_elems, group);
    const int64_t n_blocks = n_elems / group;
    if (n_bytes != (size_t)n_blocks * bb)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %" PRId64 " values, expected %zu", name, n_bytes,
                              n_elems, (size_t)n_blocks * bb);
    const uint8_t *b = data;
    for (int64_t i = 0; i < n_blocks; i++, b += bb) {
        for (int k = 0; k < 2; k++) {
            const uint16_t v = affine_load_u16(b + cb + 2 * k);
            if ((v & 0x7f80u) == 0x7f80u)
                return splash_err_set(err, SPLASH_ERR_INVALID, "%s block %" PRId64 ": %s is %s",
                                      name, i, k ? "bias" : "scale", (v & 0x7fu) ? "NaN" : "Inf");
        }
    }
    return SPLASH_OK;
}

static void affine_to_float_impl(int bits, int group, const void *blocks, float *out, int64_t n)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const uint8_t *b = blocks;
    for (int64_t i = 0; i < n / group; i++, b += bb, out += group) {
        const float s = splash_bf16_to_fp32(affine_load_u16(b + cb));
        const float z = splash_bf16_to_fp32(affine_load_u16(b + cb + 2));
        for (int j = 0; j < group; j++)
            out[j] = s * (float)affine_code(b, bits, j) + z;
    }
}

/* ---- MLX's quantizer -------------------------------------------------------
 *
 * mx.quantize(w, group_size, bits, mode="affine") as MLX's GPU kernels (Metal, and
 * CUDA alike) compute it, in float, per group:
 *   w_max = max(0, max w)          (the reduction starts from 0)
 *   w_min = min w
 *   scale = max((w_max - w_min) / (2^bits - 1), 1e-7)
 *   side  = |w_min| > |w_max|;   scale = side ? scale : -scale
 *   edge  = side ? w_min : w_max     (the end of larger magnitude)
 *   q0    = round(edge / scale)
 *   if q0 != 0: scale = edge / q0, bias = edge   else bias = 0
 *   q     = min(round((w - bias) / scale), 2^bits - 1)
 * round() halves away from zero (Metal's round). So code 0 is the edge exactly and,
 * when q0 != 0, code -q0 is exactly zero; the scale may be negative. The codes use the
 * float scale and bias; the stored ones are rounded to bf16 (to the weight's dtype,
 * bf16 for mlx-lm's checkpoints and for the drafts the engine quantizes).
 * MLX's CPU backend differs in two corners: it rounds halves to even (rint) and takes
 * the true maximum (an all-negative group gets w_max < 0). We follow the GPU, which
 * produces the checkpoints mlx-lm writes on a Mac. */
static void affine_from_float_impl(int bits, int group, const float *x, void *blocks, int64_t n)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const float n_bins = (float)((1 << bits) - 1);
    uint8_t *b = blocks;
    for (int64_t i = 0; i < n / group; i++, b += bb, x += group) {
        float w_min = FLT_MAX, w_max = 0.0f;
        for (int j = 0; j < group; j++) {
            w_min = x[j] < w_min ? x[j] : w_min;
            w_max = x[j] > w_max ? x[j] : w_max;
        }
        float scale = fmaxf((w_max - w_min) / n_bins, 1e-7f);
        const int side = fabsf(w_min) > fabsf(w_max);
        scale = side ? scale : -scale;
        const float edge = side ? w_min : w_max;
        const float q0 = roundf(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        memset(b, 0, cb);
        for (int j = 0; j < group; j++) {
            float q = roundf((x[j] - bias) / scale);
            q = q < 0.0f ? 0.0f : q > n_bins ? n_bins : q;
            const unsigned v = (unsigned)q;
            const int p = j * bits;
            b[p >> 3] |= (uint8_t)(v << (p & 7));
            if ((p & 7) + bits > 8)
                b[(p >> 3) + 1] |= (uint8_t)(v >> (8 - (p & 7)));
        }
        const uint16_t sh = splash_fp32_to_bf16(scale), zh = splash_fp32_to_bf16(bias);
        b[cb] = (uint8_t)sh;
        b[cb + 1] = (uint8_t)(sh >> 8);
        b[cb + 2] = (uint8_t)zh;
        b[cb + 3] = (uint8_t)(zh >> 8);
    }
}

/* ---- checkpoint import ------------------------------------------------------ */

static const char *affine_dtype_name(int32_t dtype)
{
    switch (dtype) {
    case SPLASH_DTYPE_F32: return "F32";
    case SPLASH_DTYPE_F16: return "F16";
    case SPLASH_DTYPE_BF16: return "BF16";
    case SPLASH_DTYPE_ST_U32: return "U32";
    case SPLASH_DTYPE_ST_U8: return "U8";
    case SPLASH_DTYPE_ST_I32: return "I32";
    case SPLASH_DTYPE_ST_F64: return "F64";
    default: return "another dtype";
    }
}

/* One scale or bias of a BF16 / F16 / F32 plane, as bf16. BF16 is kept bit for bit;
 * F16 and F32 round to nearest even (bf16 has 8 significand bits to F16's 11). */
static int affine_plane_bf16(const void *plane, int32_t dtype, size_t i, uint16_t *out)
{
    const uint8_t *p = plane;
    float v;
    switch (dtype) {
    case SPLASH_DTYPE_BF16: *out = affine_load_u16(p + 2 * i); return 1;
    case SPLASH_DTYPE_F16: v = splash_fp16_to_fp32(affine_load_u16(p + 2 * i)); break;
    case SPLASH_DTYPE_F32:
        v = splash_fp32_from_bits((uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                                  (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24);
        break;
    default: return 0;
    }
    *out = splash_fp32_to_bf16(v);
    return 1;
}

static int affine_plane_dtype_ok(int32_t dtype)
{
    return dtype == SPLASH_DTYPE_BF16 || dtype == SPLASH_DTYPE_F16 || dtype == SPLASH_DTYPE_F32;
}

/* MLX planes: .weight U32 [rows][cols * bits / 32] (words little-endian, LSB first),
 * .scales and .biases [rows][cols / group]. dst gets rows * cols / group blocks, row
 * after row. */
static enum splash_status affine_import_impl(const char *name, int bits, int group,
                                             const struct splash_planes *src, void *dst,
                                             struct splash_err *err)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    if (src->rows <= 0 || src->cols <= 0 || src->cols % group)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: shape [%" PRId64 ", %" PRId64 "] is not whole %d-column groups",
                              name, src->rows, src->cols, group);
    if (!src->codes || src->codes_dtype != SPLASH_DTYPE_ST_U32)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: weight is %s, expected U32 words",
                              name, affine_dtype_name(src->codes_dtype));
    if (!src->scales || !affine_plane_dtype_ok(src->scales_dtype))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: scales are %s, expected BF16, F16 or F32", name,
                              src->scales ? affine_dtype_name(src->scales_dtype) : "missing");
    if (!src->biases || !affine_plane_dtype_ok(src->biases_dtype))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: biases are %s, expected BF16, F16 or F32", name,
                              src->biases ? affine_dtype_name(src->biases_dtype) : "missing");
    const int64_t groups = src->cols / group;
    const size_t row_words = (size_t)src->cols * (size_t)bits / 32;
    const uint8_t *codes = src->codes;
    uint8_t *out = dst;
    for (int64_t r = 0; r < src->rows; r++) {
        for (int64_t g = 0; g < groups; g++, out += bb) {
            /* The checkpoint's words are little-endian: their bytes are the stream. */
            memcpy(out, codes + ((size_t)r * row_words + (size_t)g * cb / 4) * 4, cb);
            const size_t k = (size_t)r * (size_t)groups + (size_t)g;
            uint16_t s = 0, z = 0;
            affine_plane_bf16(src->scales, src->scales_dtype, k, &s);
            affine_plane_bf16(src->biases, src->biases_dtype, k, &z);
            if ((s & 0x7f80u) == 0x7f80u || (z & 0x7f80u) == 0x7f80u)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: row %" PRId64 " group %" PRId64 ": %s is not finite",
                                      name, r, g, (s & 0x7f80u) == 0x7f80u ? "scale" : "bias");
            out[cb] = (uint8_t)s;
            out[cb + 1] = (uint8_t)(s >> 8);
            out[cb + 2] = (uint8_t)z;
            out[cb + 3] = (uint8_t)(z >> 8);
        }
    }
    return SPLASH_OK;
}

/* ---- scalar kernel ------------------------------------------------------ */

static inline void affine_dot_ref_impl(int bits, int group, int64_t n, float *s,
                                       const void *w_row, const void *act_row)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const uint8_t *b = w_row;
    const struct splash_q8_0_block *y = act_row;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / group; i++, b += bb) {
        const float sc = splash_bf16_to_fp32(affine_load_u16(b + cb));
        const float z = splash_bf16_to_fp32(affine_load_u16(b + cb + 2));
        for (int k = 0; k < group / SPLASH_QK8_0; k++, y++) {
            int sqa = 0, sa = 0;
            for (int j = 0; j < SPLASH_QK8_0; j++) {
                sqa += affine_code(b, bits, k * SPLASH_QK8_0 + j) * y->qs[j];
                sa += y->qs[j];
            }
            sum += (sc * (float)sqa + z * (float)sa) * splash_fp16_to_fp32(y->d);
        }
    }
    *s = sum;
}

/* ---- one descriptor per (bits, group) ------------------------------------ */

#if defined(__x86_64__)
#define AFFINE_SIMD_ROWS(bits, group)                                                              \
    {AFFINE_CPU_AVX512_ROW, "avx512vnni", AFFINE_DOT_NAME(bits, group, avx512),                    \
     AFFINE_MUL_NAME(bits, group, avx512)},                                                        \
        {AFFINE_CPU_AVX2_ROW, "avx2", AFFINE_DOT_NAME(bits, group, avx2),                          \
         AFFINE_MUL_NAME(bits, group, avx2)},
#else
#define AFFINE_SIMD_ROWS(bits, group)
#endif

/* The 4-bit and 8-bit types repack at load into af<bits>g<group>_R16 (affine_r16.h); the
 * others have no repacked layout. */
#define AFFINE_REPACK_4(group) .repack_to = "af4g" #group "_R16", .repack = affine_b4g##group##_repack,
#define AFFINE_REPACK_8(group) .repack_to = "af8g" #group "_R16", .repack = affine_b8g##group##_repack,
#define AFFINE_REPACK_2(group)
#define AFFINE_REPACK_3(group)
#define AFFINE_REPACK_5(group)
#define AFFINE_REPACK_6(group)

#define AFFINE_DEFINE_TYPE(bits, group)                                                            \
    static enum splash_status affine_b##bits##g##group##_validate(                                 \
        const void *data, size_t n_bytes, int64_t n_elems, struct splash_err *err)                 \
    {                                                                                              \
        return affine_validate_impl("af" #bits "g" #group, bits, group, data, n_bytes, n_elems,    \
                                    err);                                                          \
    }                                                                                              \
    static void affine_b##bits##g##group##_to_float(const void *blocks, float *out, int64_t n)     \
    {                                                                                              \
        affine_to_float_impl(bits, group, blocks, out, n);                                         \
    }                                                                                              \
    static void affine_b##bits##g##group##_from_float(const float *x, void *blocks, int64_t n,     \
                                                      const float *imatrix)                        \
    {                                                                                              \
        (void)imatrix;                                                                             \
        affine_from_float_impl(bits, group, x, blocks, n);                                         \
    }                                                                                              \
    static enum splash_status affine_b##bits##g##group##_import(                                   \
        const struct splash_planes *src, void *dst, struct splash_err *err)                        \
    {                                                                                              \
        return affine_import_impl("af" #bits "g" #group, bits, group, src, dst, err);              \
    }                                                                                              \
    void AFFINE_DOT_NAME(bits, group, ref)(int64_t n, float *s, const void *w_row,                 \
                                           const void *act_row)                                    \
    {                                                                                              \
        affine_dot_ref_impl(bits, group, n, s, w_row, act_row);                                    \
    }                                                                                              \
    static const struct splash_kernel_row affine_b##bits##g##group##_rows[] = {                    \
        AFFINE_SIMD_ROWS(bits, group){0, "scalar", AFFINE_DOT_NAME(bits, group, ref), NULL},       \
    };                                                                                             \
    const struct splash_format_type affine_b##bits##g##group##_type = {                            \
        .name = "af" #bits "g" #group,                                                             \
        .gguf_type = -1,                                                                           \
        .block_elems = group,                                                                      \
        .block_bytes = AFFINE_BLOCK_BYTES(bits, group),                                            \
        .bits_per_weight = (float)(bits) + 32.0f / (float)(group),                                 \
        .act_type = "Q8_0",                                                                        \
        .flags = SPLASH_FORMAT_LINEAR | SPLASH_FORMAT_FINE_ACT,                                                          \
        .validate = affine_b##bits##g##group##_validate,                                           \
        .to_float = affine_b##bits##g##group##_to_float,                                           \
        .from_float = affine_b##bits##g##group##_from_float,                                       \
        .rows = affine_b##bits##g##group##_rows,                                                   \
        .n_rows = sizeof affine_b##bits##g##group##_rows / sizeof(struct splash_kernel_row),       \
        .mlx_mode = "affine",                                                                      \
        .mlx_bits = bits,                                                                          \
        .mlx_group_size = group,                                                                   \
        .import_planes = affine_b##bits##g##group##_import,                                        \
        AFFINE_REPACK_##bits(group)                                                                \
    };

AFFINE_FOR_EACH(AFFINE_DEFINE_TYPE)
