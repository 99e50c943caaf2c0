/* Q2_K_R16: the load-time layout of Q2_K the AVX-512 VNNI kernels read fastest
 * (q2k_r16.h). This file holds the descriptor, the repack, to_float and the scalar
 * reference kernel; the SIMD kernel is in q2k_r16_avx512.c. */
#include "formats/kquants/q2k_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

/* Bytes of n_rows Q2_K rows of n elements: the plain image and the repacked one. */
static size_t q2k_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct q2_k_block) * (size_t)n_rows;
}

void q2k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct q2_k_block);
    const int64_t n_groups = n_rows / Q2K_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q2K_R16_ROWS * row_bytes;
        struct q2k_r16_block *o =
            (struct q2k_r16_block *)((char *)dst + (size_t)g * Q2K_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < Q2K_R16_ROWS; r++) {
                const struct q2_k_block *x = (const struct q2_k_block *)(rows + r * row_bytes) + i;
                o->d[r] = x->d;
                o->dmin[r] = x->dmin;
                for (int q = 0; q < SPLASH_QK_K / 64; q++)
                    for (int p = 0; p < 4; p++)
                        o->scales[q][4 * r + p] = x->scales[4 * q + Q2K_R16_SUB(p)];
                for (int t = 0; t < SPLASH_QK_K / 16; t++)
                    memcpy(&o->qs[t][4 * r], x->qs + 4 * t, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q2K_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, q2k_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain Q2_K validate has accepted (finite d and dmin). */
static enum splash_status q2k_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q2_K_R16: %lld elements is not a multiple of the %d-element row "
                              "block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct q2_k_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q2_K_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "Q2_K_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with Q2_K's arithmetic. */
static void q2k_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q2k_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q2K_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < Q2K_R16_ROWS; r++) {
            struct q2_k_block x;
            q2k_r16_unpack_row(&b[i], r, &x);
            const float d = kq_h2f(x.d), min = kq_h2f(x.dmin);
            for (int e = 0; e < SPLASH_QK_K; e++) {
                /* value 128h + 32k + l is bits 2k..2k+1 of qs[32h + l] */
                const int h = e / 128, k = e % 128 / 32, l = e % 32;
                const uint8_t sc = x.scales[e / 16];
                *out++ = d * (sc & 0xF) * ((x.qs[32 * h + l] >> 2 * k) & 3) - min * (sc >> 4);
            }
        }
    }
}

/* The dot of one plain super-block with one Q8_K block, as q2k_dot_q8k_ref sums it. */
static float q2k_r16_block_dot(const struct q2_k_block *x, const struct splash_q8_k_block *y)
{
    int summs = 0;
    for (int j = 0; j < 16; j++)
        summs += y->bsums[j] * (x->scales[j] >> 4);
    const float dall = y->d * kq_h2f(x->d);
    const float dmin = y->d * kq_h2f(x->dmin);
    int isum = 0;
    for (int e = 0; e < SPLASH_QK_K; e++) {
        const int h = e / 128, k = e % 128 / 32, l = e % 32;
        isum += (x->scales[e / 16] & 0xF) * ((x->qs[32 * h + l] >> 2 * k) & 3) * y->qs[e];
    }
    return dall * isum - dmin * summs;
}

/* The reference: every (weight row, activation row) pair summed super-block by
 * super-block in q2k_dot_q8k_ref's order, so it gives the plain reference's bits. */
void q2k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q2K_R16_ROWS * Q2K_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += Q2K_R16_ROWS) {
        const struct q2k_r16_block *b =
            (const struct q2k_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < Q2K_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct q2_k_block x;
                    q2k_r16_unpack_row(&b[i], r, &x);
                    sum += q2k_r16_block_dot(&x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = sum;
            }
        }
    }
    for (int64_t i = n_full; i < n_w; i++)
        for (int64_t j = 0; j < n_act; j++)
            q2k_dot_q8k_ref(n, &out[(size_t)j * out_stride + (size_t)i],
                            (const char *)w + (size_t)i * w_stride,
                            (const char *)act + (size_t)j * act_stride);
}

static const struct splash_kernel_row q2k_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q2k_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, q2k_r16_mul_q8k_ref},
};

const struct splash_format_type kq_q2_k_r16_type = {
    .name = "Q2_K_R16",
    .gguf_type = -1,
    .block_elems = Q2K_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct q2k_r16_block),
    .bits_per_weight = 2.625f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q2k_r16_validate,
    .to_float = q2k_r16_to_float,
    .rows = q2k_r16_rows,
    .n_rows = sizeof q2k_r16_rows / sizeof q2k_r16_rows[0],
    .row_group = Q2K_R16_ROWS,
};
