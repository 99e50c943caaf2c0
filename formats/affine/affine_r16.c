/* af<B>g<G>_R16: the load-time layout of MLX affine 4-bit and 8-bit rows the AVX-512 VNNI
 * kernels read fastest (affine_r16.h). This file holds the repack, validate, to_float, the
 * activations' preparation, the scalar reference kernel and the descriptors; the SIMD
 * kernel is in affine_r16_avx512.c. Written once, instantiated per (bits, group). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "formats/affine/affine_r16.h"
#include "formats/affine/affine_types.h"
#include "splash/fp.h"

#define AF_R16_PB(bits) AFFINE_R16_PIECE_BYTES(bits)

/* Where code j (0..31) of piece p of row r lies in a repacked block: its byte, and the
 * shift of its nibble (4-bit) or 0. */
static size_t af_r16_at(int bits, int p, int r, int j, int *shift)
{
    const int c = bits == 4 ? j & 15 : j;
    *shift = bits == 4 && j >= 16 ? 4 : 0;
    return (size_t)AFFINE_R16_QS + (size_t)p * AF_R16_PB(bits) + (size_t)(c >> 2) * 64 +
           (size_t)(4 * r + (c & 3));
}

/* Value j (0..31) of piece p of row r in a repacked block (affine_r16.h). */
static int af_r16_code(int bits, const uint8_t *blk, int p, int r, int j)
{
    int shift;
    const uint8_t byte = blk[af_r16_at(bits, p, r, j, &shift)];
    return bits == 4 ? (byte >> shift) & 15 : byte;
}

static void af_r16_repack_impl(int bits, int group, int64_t n, const void *src, int64_t n_rows,
                               void *dst)
{
    const size_t cb = AFFINE_CODE_BYTES(bits, group), bb = AFFINE_BLOCK_BYTES(bits, group);
    const int64_t nb = n / group;
    const size_t row_bytes = (size_t)nb * bb;
    const int64_t n_groups = n_rows / AFFINE_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *rows = (const uint8_t *)src + (size_t)g * AFFINE_R16_ROWS * row_bytes;
        uint8_t *o = (uint8_t *)dst + (size_t)g * AFFINE_R16_ROWS * row_bytes;
        for (int64_t i = 0; i < nb; i++, o += AFFINE_R16_ROWS * bb) {
            memset(o + AFFINE_R16_QS, 0, AFFINE_R16_ROWS * cb);
            for (int r = 0; r < AFFINE_R16_ROWS; r++) {
                const uint8_t *x = rows + (size_t)r * row_bytes + (size_t)i * bb;
                memcpy(o + AFFINE_R16_S + 2 * r, x + cb, 2);
                memcpy(o + AFFINE_R16_Z + 2 * r, x + cb + 2, 2);
                if (bits == 4) {
                    /* a piece's codes c and 16 + c share the byte at c (af_r16_at): 16 bytes
                     * a row, written whole (a code at a time was most of a streamed expert's
                     * load: each expert is repacked as it is read) */
                    for (int p = 0; p < group / 32; p++) {
                        const uint8_t *q = x + 16 * p; /* codes 32p..32p+31, LSB first */
                        uint8_t *d = o + AFFINE_R16_QS + (size_t)p * AF_R16_PB(4) + 4 * r;
                        for (int c = 0; c < 16; c++) {
                            const int lo = (q[c >> 1] >> (4 * (c & 1))) & 15;
                            const int hi = (q[8 + (c >> 1)] >> (4 * (c & 1))) & 15;
                            d[(c >> 2) * 64 + (c & 3)] = (uint8_t)(lo | hi << 4);
                        }
                    }
                    continue;
                }
                for (int p = 0; p < group / 32; p++)
                    for (int j = 0; j < 32; j++) {
                        int shift;
                        const size_t at = af_r16_at(bits, p, r, j, &shift);
                        o[at] |= (uint8_t)(affine_code(x, bits, 32 * p + j) << shift);
                    }
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * AFFINE_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, (size_t)n_rows * row_bytes - done);
}

/* Whole 16-row blocks only, every scale and bias finite as the plain validate wants:
 * where an image's plain tail rows start depends on the row length, which validate is
 * not given (the plain rows are validated before they are repacked). */
static enum splash_status af_r16_validate_impl(const char *name, int bits, int group,
                                               const void *data, size_t n_bytes, int64_t n_elems,
                                               struct splash_err *err)
{
    const int64_t per = (int64_t)AFFINE_R16_ROWS * group;
    const size_t bb = AFFINE_R16_BLOCK_BYTES(bits, group);
    if (n_elems < 0 || n_elems % per)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %" PRId64 " values is not a whole number of %" PRId64
                              "-value blocks",
                              name, n_elems, per);
    const int64_t n_blocks = n_elems / per;
    if (n_bytes != (size_t)n_blocks * bb)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %" PRId64 " values, expected %zu", name, n_bytes,
                              n_elems, (size_t)n_blocks * bb);
    const uint8_t *b = data;
    for (int64_t i = 0; i < n_blocks; i++, b += bb) {
        for (int k = 0; k < 2 * AFFINE_R16_ROWS; k++) {
            const uint16_t v = affine_load_u16(b + 2 * k);
            if ((v & 0x7f80u) == 0x7f80u)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s block %" PRId64 ": %s of row %d is %s", name, i,
                                      k < AFFINE_R16_ROWS ? "scale" : "bias",
                                      k % AFFINE_R16_ROWS, (v & 0x7fu) ? "NaN" : "Inf");
        }
    }
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' values row by row, with the plain arithmetic. */
static void af_r16_to_float_impl(int bits, int group, const void *blocks, float *out,
                                 int64_t n)
{
    const uint8_t *b = blocks;
    const size_t bb = AFFINE_R16_BLOCK_BYTES(bits, group);
    for (int64_t i = 0; i < n / ((int64_t)AFFINE_R16_ROWS * group); i++, b += bb) {
        for (int r = 0; r < AFFINE_R16_ROWS; r++, out += group) {
            const float s = splash_bf16_to_fp32(affine_load_u16(b + AFFINE_R16_S + 2 * r));
            const float z = splash_bf16_to_fp32(affine_load_u16(b + AFFINE_R16_Z + 2 * r));
            for (int j = 0; j < group; j++)
                out[j] = s * (float)af_r16_code(bits, b, j / 32, r, j % 32) + z;
        }
    }
}

void affine_r16_prepare(int group, const struct splash_q8_0_block *y, int64_t n,
                        struct affine_r16_act *p)
{
    const int per = group / SPLASH_QK8_0;
    for (int64_t i = 0; i < n; i += per) {
        float a = 0.0f;
        for (int k = 0; k < per; k++) {
            int sum = 0;
            for (int j = 0; j < SPLASH_QK8_0; j++)
                sum += y[i + k].qs[j];
            p[i + k].d = splash_fp16_to_fp32(y[i + k].d);
            a = fmaf((float)sum, p[i + k].d, a);
        }
        for (int k = 0; k < per; k++)
            p[i + k].a = a;
    }
}

/* One repacked row's dot with one activation row in the kernels' float steps. */
static float af_r16_row_dot(int bits, int group, const uint8_t *b, int64_t nb, int r,
                            const struct splash_q8_0_block *y)
{
    const int per = group / SPLASH_QK8_0;
    const size_t bb = AFFINE_R16_BLOCK_BYTES(bits, group);
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; i++, b += bb) {
        const float s = splash_bf16_to_fp32(affine_load_u16(b + AFFINE_R16_S + 2 * r));
        const float z = splash_bf16_to_fp32(affine_load_u16(b + AFFINE_R16_Z + 2 * r));
        struct affine_r16_act p[4];
        affine_r16_prepare(group, y + i * per, per, p);
        for (int k = 0; k < per; k++) {
            int isum = 0;
            for (int j = 0; j < SPLASH_QK8_0; j++)
                isum += af_r16_code(bits, b, k, r, j) * y[i * per + k].qs[j];
            acc = fmaf((float)isum, s * p[k].d, acc);
        }
        acc = fmaf(z, p[0].a, acc);
    }
    return acc;
}

/* The reference: every (weight row, activation row) pair summed group by group, the group
 * rows read from the image and the rows after the last whole group by the plain scalar
 * row. */
static void af_r16_mul_ref_impl(int bits, int group,
                                void (*plain_dot)(int64_t, float *, const void *, const void *),
                                int64_t n, const void *w, size_t w_stride, int64_t n_w,
                                const void *act, size_t act_stride, int64_t n_act, float *out,
                                size_t out_stride)
{
    const int64_t nb = n / group;
    const int64_t n_full = n_w / AFFINE_R16_ROWS * AFFINE_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += AFFINE_R16_ROWS) {
            const uint8_t *b = (const uint8_t *)w + (size_t)g * w_stride;
            for (int r = 0; r < AFFINE_R16_ROWS; r++)
                o[g + r] = af_r16_row_dot(bits, group, b, nb, r, y);
        }
        for (int64_t i = n_full; i < n_w; i++)
            plain_dot(n, &o[i], (const char *)w + (size_t)i * w_stride, y);
    }
}

/* ---- one descriptor per (bits, group) --------------------------------------------- */

#if defined(__x86_64__)
#define AF_R16_SIMD_ROW(bits, group)                                                               \
    {AFFINE_CPU_AVX512_ROW, "avx512vnni", NULL, affine_b##bits##g##group##_r16_mul_avx512},
#else
#define AF_R16_SIMD_ROW(bits, group)
#endif

#define AF_R16_DEFINE(bits, group)                                                                 \
    void affine_b##bits##g##group##_repack(int64_t n, const void *src, int64_t n_rows, void *dst)  \
    {                                                                                              \
        af_r16_repack_impl(bits, group, n, src, n_rows, dst);                                      \
    }                                                                                              \
    static enum splash_status affine_b##bits##g##group##_r16_validate(                             \
        const void *data, size_t n_bytes, int64_t n_elems, struct splash_err *err)                 \
    {                                                                                              \
        return af_r16_validate_impl("af" #bits "g" #group "_R16", bits, group, data, n_bytes,      \
                                    n_elems, err);                                                 \
    }                                                                                              \
    static void affine_b##bits##g##group##_r16_to_float(const void *blocks, float *out,           \
                                                         int64_t n)                                \
    {                                                                                              \
        af_r16_to_float_impl(bits, group, blocks, out, n);                                         \
    }                                                                                              \
    void affine_b##bits##g##group##_r16_mul_ref(int64_t n, const void *w, size_t w_stride,         \
                                                int64_t n_w, const void *act, size_t act_stride,   \
                                                int64_t n_act, float *out, size_t out_stride)      \
    {                                                                                              \
        af_r16_mul_ref_impl(bits, group, AFFINE_DOT_NAME(bits, group, ref), n, w, w_stride, n_w,   \
                            act, act_stride, n_act, out, out_stride);                              \
    }                                                                                              \
    static const struct splash_kernel_row affine_b##bits##g##group##_r16_rows[] = {                \
        AF_R16_SIMD_ROW(bits, group){0, "scalar", NULL, affine_b##bits##g##group##_r16_mul_ref},   \
    };                                                                                             \
    const struct splash_format_type affine_b##bits##g##group##_r16_type = {                        \
        .name = "af" #bits "g" #group "_R16",                                                      \
        .gguf_type = -1,                                                                           \
        .block_elems = AFFINE_R16_ROWS * group,                                                    \
        .block_bytes = AFFINE_R16_BLOCK_BYTES(bits, group),                                        \
        .bits_per_weight = (float)(bits) + 32.0f / (float)(group),                                 \
        .act_type = "Q8_0",                                                                        \
        .flags = SPLASH_FORMAT_REPACKED,                                                           \
        .validate = affine_b##bits##g##group##_r16_validate,                                       \
        .to_float = affine_b##bits##g##group##_r16_to_float,                                       \
        .rows = affine_b##bits##g##group##_r16_rows,                                               \
        .n_rows = sizeof affine_b##bits##g##group##_r16_rows / sizeof(struct splash_kernel_row),   \
        .row_group = AFFINE_R16_ROWS,                                                              \
    };

AFFINE_R16_FOR_EACH(AF_R16_DEFINE)
