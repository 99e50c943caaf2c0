/* Q4_0_R16: the load-time layout of Q4_0 the AVX-512 VNNI kernels read fastest
 * (q40_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in q40_r16_avx512.c. */
#include "formats/kquants/q40_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"

/* Bytes of n_rows Q4_0 rows of n elements: the plain image and the repacked one. */
static size_t q40_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / KQ_QK4_0) * sizeof(struct q4_0_block) * (size_t)n_rows;
}

void q40_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / KQ_QK4_0;
    const size_t row_bytes = (size_t)nb * sizeof(struct q4_0_block);
    const int64_t n_groups = n_rows / Q40_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q40_R16_ROWS * row_bytes;
        struct q40_r16_block *o =
            (struct q40_r16_block *)((char *)dst + (size_t)g * Q40_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < Q40_R16_ROWS; r++) {
                const struct q4_0_block *x =
                    (const struct q4_0_block *)(rows + (size_t)r * row_bytes) + i;
                o->d[r] = x->d;
                for (int k = 0; k < 4; k++)
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q40_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, q40_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end (and so where its scale
 * bytes are) depends on the row length, which validate is not given, so only the size is
 * checked here: the image is made at load from rows Q4_0's validate has accepted (finite
 * d). */
static enum splash_status q40_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % KQ_QK4_0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q4_0_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, KQ_QK4_0);
    const uint64_t want = (uint64_t)(n_elems / KQ_QK4_0) * sizeof(struct q4_0_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q4_0_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "Q4_0_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 32 values row by row, with Q4_0's arithmetic. */
static void q40_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q40_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q40_R16_ROWS * KQ_QK4_0); i++) {
        for (int r = 0; r < Q40_R16_ROWS; r++, out += KQ_QK4_0) {
            struct q4_0_block x;
            q40_r16_unpack_row(&b[i], r, &x);
            const float d = kq_h2f(x.d);
            for (int j = 0; j < 16; j++) {
                out[j] = ((x.qs[j] & 0xF) - 8) * d;
                out[j + 16] = ((x.qs[j] >> 4) - 8) * d;
            }
        }
    }
}

/* acc plus one plain block's dot with one Q8_0 block, in the kernels' float steps
 * (q40_r16.h): exact integer sum, s = d_w d_act, fma. */
static float q40_r16_block_dot(const struct q4_0_block *x, const struct splash_q8_0_block *y,
                               float acc)
{
    int isum = 0;
    for (int j = 0; j < 16; j++)
        isum += ((x->qs[j] & 0xF) - 8) * y->qs[j] + ((x->qs[j] >> 4) - 8) * y->qs[j + 16];
    const float s = kq_h2f(x->d) * kq_h2f(y->d);
    return fmaf((float)isum, s, acc);
}

/* The reference: every (weight row, activation row) pair summed block by block. */
void q40_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                        size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / KQ_QK4_0;
    const int64_t n_full = n_w / Q40_R16_ROWS * Q40_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += Q40_R16_ROWS) {
            const struct q40_r16_block *b =
                (const struct q40_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < Q40_R16_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    struct q4_0_block x;
                    q40_r16_unpack_row(&b[i], r, &x);
                    acc = q40_r16_block_dot(&x, &y[i], acc);
                }
                o[g + r] = acc;
            }
        }
        /* the rows after the last whole group are plain Q4_0 rows */
        for (int64_t i = n_full; i < n_w; i++) {
            const struct q4_0_block *x =
                (const struct q4_0_block *)((const char *)w + (size_t)i * w_stride);
            float acc = 0.0f;
            for (int64_t k = 0; k < nb; k++)
                acc = q40_r16_block_dot(&x[k], &y[k], acc);
            o[i] = acc;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row q40_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q40_r16_mul_q8_avx512},
#endif
    {0, "scalar", NULL, q40_r16_mul_q8_ref},
};

const struct splash_format_type kq_q4_0_r16_type = {
    .name = "Q4_0_R16",
    .gguf_type = -1,
    .block_elems = Q40_R16_ROWS * KQ_QK4_0,
    .block_bytes = sizeof(struct q40_r16_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q40_r16_validate,
    .to_float = q40_r16_to_float,
    .rows = q40_r16_rows,
    .n_rows = sizeof q40_r16_rows / sizeof q40_r16_rows[0],
    .row_group = Q40_R16_ROWS,
};
