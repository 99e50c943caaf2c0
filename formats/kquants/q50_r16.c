/* Q5_0_R16: the load-time layout of Q5_0 the AVX-512 VNNI kernels read fastest
 * (q50_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in q50_r16_avx512.c. */
#include "formats/kquants/q50_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"

/* Bytes of n_rows Q5_0 rows of n elements: the plain image and the repacked one. */
static size_t q50_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / KQ_QK5_0) * sizeof(struct q5_0_block) * (size_t)n_rows;
}

/* Block i of the 16 rows at rows (row_bytes apart) into o (q50_r16.h's layout). */
static void q50_r16_pack_block(const char *rows, size_t row_bytes, int64_t i,
                               struct q50_r16_block *o)
{
    for (int r = 0; r < Q50_R16_ROWS; r++) {
        const struct q5_0_block *x = (const struct q5_0_block *)(rows + (size_t)r * row_bytes) + i;
        o->d[r] = x->d;
        for (int c = 0; c < 4; c++) {
            /* the stream of quads 5..7 of lane byte c */
            const unsigned e = (unsigned)q50_r16_plain_level(x, 20 + c) |
                               (unsigned)q50_r16_plain_level(x, 24 + c) << 5 |
                               (unsigned)q50_r16_plain_level(x, 28 + c) << 10;
            for (int k = 0; k < Q50_R16_VECS; k++)
                o->qs[k][4 * r + c] =
                    (uint8_t)(q50_r16_plain_level(x, 4 * k + c) << 3 | (e >> (3 * k) & 7));
        }
    }
}

void q50_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / KQ_QK5_0;
    const size_t row_bytes = (size_t)nb * sizeof(struct q5_0_block);
    const int64_t n_groups = n_rows / Q50_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q50_R16_ROWS * row_bytes;
        struct q50_r16_block *o =
            (struct q50_r16_block *)((char *)dst + (size_t)g * Q50_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++)
            q50_r16_pack_block(rows, row_bytes, i, o + i);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q50_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, q50_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end (and so where its scale
 * bytes are) depends on the row length, which validate is not given, so only the size is
 * checked here: the image is made at load from rows Q5_0's validate has accepted (finite
 * d). */
static enum splash_status q50_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % KQ_QK5_0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q5_0_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, KQ_QK5_0);
    const uint64_t want = (uint64_t)(n_elems / KQ_QK5_0) * sizeof(struct q5_0_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q5_0_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "Q5_0_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 32 values row by row, with Q5_0's arithmetic. */
static void q50_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q50_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q50_R16_ROWS * KQ_QK5_0); i++) {
        for (int r = 0; r < Q50_R16_ROWS; r++, out += KQ_QK5_0) {
            const float d = kq_h2f(b[i].d[r]);
            for (int j = 0; j < KQ_QK5_0; j++)
                out[j] = (q50_r16_level(&b[i], r, j) - 16) * d;
        }
    }
}

/* acc plus one plain block's dot with one Q8_0 block, in the kernels' float steps
 * (q50_r16.h): exact integer sum, s = d_w d_act, fma. */
static float q50_r16_block_dot(const struct q5_0_block *x, const struct splash_q8_0_block *y,
                               float acc)
{
    int isum = 0;
    for (int j = 0; j < KQ_QK5_0; j++)
        isum += (q50_r16_plain_level(x, j) - 16) * y->qs[j];
    const float s = kq_h2f(x->d) * kq_h2f(y->d);
    return fmaf((float)isum, s, acc);
}

/* The reference: every (weight row, activation row) pair summed block by block. */
void q50_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                        size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / KQ_QK5_0;
    const int64_t n_full = n_w / Q50_R16_ROWS * Q50_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += Q50_R16_ROWS) {
            const struct q50_r16_block *b =
                (const struct q50_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < Q50_R16_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    struct q5_0_block x;
                    q50_r16_unpack_row(&b[i], r, &x);
                    acc = q50_r16_block_dot(&x, &y[i], acc);
                }
                o[g + r] = acc;
            }
        }
        /* the rows after the last whole group are plain Q5_0 rows */
        for (int64_t i = n_full; i < n_w; i++) {
            const struct q5_0_block *x =
                (const struct q5_0_block *)((const char *)w + (size_t)i * w_stride);
            float acc = 0.0f;
            for (int64_t k = 0; k < nb; k++)
                acc = q50_r16_block_dot(&x[k], &y[k], acc);
            o[i] = acc;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row q50_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q50_r16_mul_q8_avx512},
#endif
    {0, "scalar", NULL, q50_r16_mul_q8_ref},
};

const struct splash_format_type kq_q5_0_r16_type = {
    .name = "Q5_0_R16",
    .gguf_type = -1,
    .block_elems = Q50_R16_ROWS * KQ_QK5_0,
    .block_bytes = sizeof(struct q50_r16_block),
    .bits_per_weight = 5.5f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q50_r16_validate,
    .to_float = q50_r16_to_float,
    .rows = q50_r16_rows,
    .n_rows = sizeof q50_r16_rows / sizeof q50_r16_rows[0],
    .row_group = Q50_R16_ROWS,
};
