/* MXFP4_R16: the load-time layout of MXFP4 the AVX-512 VNNI kernels read fastest
 * (mxfp4_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in mxfp4_r16_avx512.c. */
#include <math.h>

#include "formats/mxfp4/mxfp4_r16.h"
#include "splash/fp.h"

/* Bytes of n_rows MXFP4 rows of n elements: the plain image and the repacked one. */
static size_t mxfp4_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / MXFP4_QK) * sizeof(struct mxfp4_block) * (size_t)n_rows;
}

void mxfp4_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / MXFP4_QK;
    const size_t row_bytes = (size_t)nb * sizeof(struct mxfp4_block);
    const int64_t n_groups = n_rows / MXFP4_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * MXFP4_R16_ROWS * row_bytes;
        struct mxfp4_r16_block *o =
            (struct mxfp4_r16_block *)((char *)dst + (size_t)g * MXFP4_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < MXFP4_R16_ROWS; r++) {
                const struct mxfp4_block *x =
                    (const struct mxfp4_block *)(rows + (size_t)r * row_bytes) + i;
                o->x[r] = MXFP4_R16_X(x->e);
                for (int k = 0; k < 4; k++)
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * MXFP4_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, mxfp4_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end (and so where its scale
 * bytes are) depends on the row length, which validate is not given, so only the size is
 * checked here: the image is made at load from rows MXFP4's validate has accepted (no NaN
 * scale 0xff). */
static enum splash_status mxfp4_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    if (n_elems < 0 || n_elems % MXFP4_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MXFP4_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, MXFP4_QK);
    const uint64_t want = (uint64_t)(n_elems / MXFP4_QK) * sizeof(struct mxfp4_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "MXFP4_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "MXFP4_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 32 values row by row, with MXFP4's arithmetic. */
static void mxfp4_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct mxfp4_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (MXFP4_R16_ROWS * MXFP4_QK); i++) {
        for (int r = 0; r < MXFP4_R16_ROWS; r++, out += MXFP4_QK) {
            struct mxfp4_block x;
            mxfp4_r16_unpack_row(&b[i], r, &x);
            const float d = mxfp4_e8m0_half(x.e);
            for (int j = 0; j < 16; j++) {
                out[j] = mxfp4_e2m1_x2[x.qs[j] & 0xf] * d;
                out[j + 16] = mxfp4_e2m1_x2[x.qs[j] >> 4] * d;
            }
        }
    }
}

/* acc plus one plain block's dot with one Q8_0 block, in the kernels' float steps
 * (mxfp4_r16.h): exact integer sum, s = 2^(e - 128) d_act, fma. */
static float mxfp4_r16_block_dot(const struct mxfp4_block *x, const struct splash_q8_0_block *y,
                                 float acc)
{
    int isum = 0;
    for (int j = 0; j < 16; j++)
        isum += mxfp4_e2m1_x2[x->qs[j] & 0xf] * y->qs[j] +
                mxfp4_e2m1_x2[x->qs[j] >> 4] * y->qs[j + 16];
    const float s = mxfp4_e8m0_half(x->e) * splash_fp16_to_fp32(y->d);
    return fmaf((float)isum, s, acc);
}

/* The reference: every (weight row, activation row) pair summed block by block. */
void mxfp4_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / MXFP4_QK;
    const int64_t n_full = n_w / MXFP4_R16_ROWS * MXFP4_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += MXFP4_R16_ROWS) {
            const struct mxfp4_r16_block *b =
                (const struct mxfp4_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < MXFP4_R16_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    struct mxfp4_block x;
                    mxfp4_r16_unpack_row(&b[i], r, &x);
                    acc = mxfp4_r16_block_dot(&x, &y[i], acc);
                }
                o[g + r] = acc;
            }
        }
        /* the rows after the last whole group are plain MXFP4 rows */
        for (int64_t i = n_full; i < n_w; i++) {
            const struct mxfp4_block *x =
                (const struct mxfp4_block *)((const char *)w + (size_t)i * w_stride);
            float acc = 0.0f;
            for (int64_t k = 0; k < nb; k++)
                acc = mxfp4_r16_block_dot(&x[k], &y[k], acc);
            o[i] = acc;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

/* The CPU features of MXFP4's AVX-512 row (plugin.c), which the kernel's tail uses. */
#define MXFP4_R16_AVX512_BITS                                                                      \
    (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C | SPLASH_CPU_AVX512F |                     \
     SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512DQ | SPLASH_CPU_AVX512VNNI |     \
     SPLASH_CPU_AVX512VBMI)

static const struct splash_kernel_row mxfp4_r16_rows[] = {
#if defined(__x86_64__)
    {MXFP4_R16_AVX512_BITS, "avx512vnni", NULL, mxfp4_r16_mul_q8_avx512},
#endif
    {0, "scalar", NULL, mxfp4_r16_mul_q8_ref},
};

const struct splash_format_type mxfp4_r16_type = {
    .name = "MXFP4_R16",
    .gguf_type = -1,
    .block_elems = MXFP4_R16_ROWS * MXFP4_QK,
    .block_bytes = sizeof(struct mxfp4_r16_block),
    .bits_per_weight = 4.25f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = mxfp4_r16_validate,
    .to_float = mxfp4_r16_to_float,
    .rows = mxfp4_r16_rows,
    .n_rows = sizeof mxfp4_r16_rows / sizeof mxfp4_r16_rows[0],
    .row_group = MXFP4_R16_ROWS,
};
