/* IQ4_NL_R16: the load-time layout of IQ4_NL the AVX-512 VNNI kernels read fastest
 * (iq4nl_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq4nl_r16_avx512.c. */
#include <math.h>

#include "formats/kquants/iq4nl_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"
#include "splash/format.h"

/* Bytes of n_rows IQ4_NL rows of n elements: the plain image and the repacked one. */
static size_t iq4nl_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / KQ_QK4_NL) * sizeof(struct iq4_nl_block) * (size_t)n_rows;
}

void iq4nl_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / KQ_QK4_NL;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq4_nl_block);
    const int64_t n_groups = n_rows / IQ4NL_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ4NL_R16_ROWS * row_bytes;
        struct iq4nl_r16_block *o =
            (struct iq4nl_r16_block *)((char *)dst + (size_t)g * IQ4NL_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < IQ4NL_R16_ROWS; r++) {
                const struct iq4_nl_block *x =
                    (const struct iq4_nl_block *)(rows + (size_t)r * row_bytes) + i;
                o->d[r] = x->d;
                for (int k = 0; k < 4; k++)
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ4NL_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq4nl_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end (and so where its d
 * are) depends on the row length, which validate is not given, so only the size is
 * checked here: the image is made at load from rows the plain IQ4_NL validate has
 * accepted (finite d). */
static enum splash_status iq4nl_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    if (n_elems < 0 || n_elems % KQ_QK4_NL)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ4_NL_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, KQ_QK4_NL);
    const uint64_t want = (uint64_t)(n_elems / KQ_QK4_NL) * sizeof(struct iq4_nl_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ4_NL_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ4_NL_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 32 values row by row, with IQ4_NL's arithmetic. */
static void iq4nl_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct iq4nl_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ4NL_R16_ROWS * KQ_QK4_NL); i++) {
        for (int r = 0; r < IQ4NL_R16_ROWS; r++, out += KQ_QK4_NL) {
            struct iq4_nl_block x;
            iq4nl_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            for (int j = 0; j < KQ_QK4_NL / 2; j++) {
                out[j] = d * kq_iq4nl_values[x.qs[j] & 0xf];
                out[j + KQ_QK4_NL / 2] = d * kq_iq4nl_values[x.qs[j] >> 4];
            }
        }
    }
}

/* acc plus one plain block's dot with one Q8_0 block, in the kernels' float steps
 * (iq4nl_r16.h): exact integer sum, s = d * d_act, fma. */
static float iq4nl_r16_block_dot(const struct iq4_nl_block *x, const struct splash_q8_0_block *y,
                                 float acc)
{
    int32_t isum = 0;
    for (int j = 0; j < KQ_QK4_NL / 2; j++)
        isum += kq_iq4nl_values[x->qs[j] & 0xf] * y->qs[j] +
                kq_iq4nl_values[x->qs[j] >> 4] * y->qs[j + KQ_QK4_NL / 2];
    const float s = splash_fp16_to_fp32(x->d) * splash_fp16_to_fp32(y->d);
    return fmaf((float)isum, s, acc);
}

/* The reference: every (weight row, activation row) pair summed block by block. */
void iq4nl_r16_mul_q80_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / KQ_QK4_NL;
    const int64_t n_full = n_w / IQ4NL_R16_ROWS * IQ4NL_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += IQ4NL_R16_ROWS) {
            const struct iq4nl_r16_block *b =
                (const struct iq4nl_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < IQ4NL_R16_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq4_nl_block x;
                    iq4nl_r16_unpack_row(&b[i], r, &x);
                    acc = iq4nl_r16_block_dot(&x, &y[i], acc);
                }
                o[g + r] = acc;
            }
        }
        /* the rows after the last whole group are plain IQ4_NL rows */
        for (int64_t i = n_full; i < n_w; i++) {
            const struct iq4_nl_block *x =
                (const struct iq4_nl_block *)((const char *)w + (size_t)i * w_stride);
            float acc = 0.0f;
            for (int64_t k = 0; k < nb; k++)
                acc = iq4nl_r16_block_dot(&x[k], &y[k], acc);
            o[i] = acc;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row iq4nl_r16_rows[] = {
#if defined(__x86_64__)
    /* the plain IQ4_NL AVX-512 row's requirements (vpshufb looks the levels up; its tail
     * rows go to that row's kernel) */
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI,
     "avx512vnni", NULL, iq4nl_r16_mul_q80_avx512},
#endif
    {0, "scalar", NULL, iq4nl_r16_mul_q80_ref},
};

const struct splash_format_type kq_iq4_nl_r16_type = {
    .name = "IQ4_NL_R16",
    .gguf_type = -1,
    .block_elems = IQ4NL_R16_ROWS * KQ_QK4_NL,
    .block_bytes = sizeof(struct iq4nl_r16_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq4nl_r16_validate,
    .to_float = iq4nl_r16_to_float,
    .rows = iq4nl_r16_rows,
    .n_rows = sizeof iq4nl_r16_rows / sizeof iq4nl_r16_rows[0],
    .row_group = IQ4NL_R16_ROWS,
};
