/* Q4_K_R16: the load-time layout of Q4_K the AVX-512 VNNI kernels read fastest
 * (q4k_r16.h). This file holds the descriptor, the repack, to_float and the scalar
 * reference kernel; the SIMD kernel is in q4k_r16_avx512.c. */
#include "formats/kquants/q4k_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

/* Bytes of n_rows Q4_K rows of n elements: the plain image and the repacked one. */
static size_t q4k_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct q4_k_block) * (size_t)n_rows;
}

void q4k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct q4_k_block);
    const int64_t n_groups = n_rows / Q4K_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q4K_R16_ROWS * row_bytes;
        struct q4k_r16_block *o =
            (struct q4k_r16_block *)((char *)dst + (size_t)g * Q4K_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < Q4K_R16_ROWS; r++) {
                const struct q4_k_block *x = (const struct q4_k_block *)(rows + r * row_bytes) + i;
                o->d[r] = x->d;
                o->dmin[r] = x->dmin;
                for (int k = 0; k < KQ_K_SCALE_SIZE / 4; k++)
                    memcpy(&o->scales[k][4 * r], x->scales + 4 * k, 4);
                for (int k = 0; k < SPLASH_QK_K / 8; k++)
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q4K_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, q4k_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain Q4_K validate has accepted (finite d and dmin). */
static enum splash_status q4k_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q4_K_R16: %lld elements is not a multiple of the %d-element row "
                              "block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct q4_k_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q4_K_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "Q4_K_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with Q4_K's arithmetic. */
static void q4k_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q4k_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q4K_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < Q4K_R16_ROWS; r++) {
            struct q4_k_block x;
            q4k_r16_unpack_row(&b[i], r, &x);
            const float d = kq_h2f(x.d), min = kq_h2f(x.dmin);
            const uint8_t *q = x.qs;
            for (int p = 0; p < 4; p++, q += 32) {
                uint8_t sc, m;
                kq_get_scale_min_k4(2 * p, x.scales, &sc, &m);
                const float d1 = d * sc, m1 = min * m;
                kq_get_scale_min_k4(2 * p + 1, x.scales, &sc, &m);
                const float d2 = d * sc, m2 = min * m;
                for (int l = 0; l < 32; l++)
                    *out++ = d1 * (q[l] & 0xF) - m1;
                for (int l = 0; l < 32; l++)
                    *out++ = d2 * (q[l] >> 4) - m2;
            }
        }
    }
}

/* The dot of one plain super-block with one Q8_K block, as q4k_dot_q8k_ref sums it. */
static float q4k_r16_block_dot(const struct q4_k_block *x, const struct splash_q8_k_block *y)
{
    const uint8_t *q = x->qs;
    const int8_t *a = y->qs;
    int isum = 0, msum = 0;
    for (int p = 0; p < 4; p++, q += 32, a += 64) {
        uint8_t sc1, m1, sc2, m2;
        kq_get_scale_min_k4(2 * p, x->scales, &sc1, &m1);
        kq_get_scale_min_k4(2 * p + 1, x->scales, &sc2, &m2);
        int s1 = 0, s2 = 0;
        for (int l = 0; l < 32; l++) {
            s1 += (q[l] & 0xF) * a[l];
            s2 += (q[l] >> 4) * a[l + 32];
        }
        isum += sc1 * s1 + sc2 * s2;
        msum += m1 * (y->bsums[4 * p] + y->bsums[4 * p + 1]) +
                m2 * (y->bsums[4 * p + 2] + y->bsums[4 * p + 3]);
    }
    return y->d * kq_h2f(x->d) * isum - y->d * kq_h2f(x->dmin) * msum;
}

/* The reference: every (weight row, activation row) pair summed super-block by
 * super-block in q4k_dot_q8k_ref's order, so it gives the plain reference's bits. */
void q4k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q4K_R16_ROWS * Q4K_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += Q4K_R16_ROWS) {
        const struct q4k_r16_block *b =
            (const struct q4k_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < Q4K_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct q4_k_block x;
                    q4k_r16_unpack_row(&b[i], r, &x);
                    sum += q4k_r16_block_dot(&x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = sum;
            }
        }
    }
    for (int64_t i = n_full; i < n_w; i++)
        for (int64_t j = 0; j < n_act; j++)
            q4k_dot_q8k_ref(n, &out[(size_t)j * out_stride + (size_t)i],
                            (const char *)w + (size_t)i * w_stride,
                            (const char *)act + (size_t)j * act_stride);
}

static const struct splash_kernel_row q4k_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q4k_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, q4k_r16_mul_q8k_ref},
};

const struct splash_format_type kq_q4_k_r16_type = {
    .name = "Q4_K_R16",
    .gguf_type = -1,
    .block_elems = Q4K_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct q4k_r16_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q4k_r16_validate,
    .to_float = q4k_r16_to_float,
    .rows = q4k_r16_rows,
    .n_rows = sizeof q4k_r16_rows / sizeof q4k_r16_rows[0],
    .row_group = Q4K_R16_ROWS,
};
