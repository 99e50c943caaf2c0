/* IQ1_S_R16: the load-time layout of IQ1_S the AVX-512 VNNI kernels read fastest
 * (iq1s_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq1s_r16_avx512.c. */
#include "formats/kquants/iq1s_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ1_S rows of n elements: the plain image and the repacked one. */
static size_t iq1s_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq1_s_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x. */
static void iq1s_r16_pack_row(const struct iq1_s_block *x, int r, struct iq1s_r16_block *o)
{
    o->d[r] = x->d;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        o->qh[ib][r] = x->qh[ib];
        for (int l = 0; l < 4; l++)
            o->qs[ib][16 * l + r] = x->qs[4 * ib + l];
    }
}

void iq1s_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq1_s_block);
    const int64_t n_groups = n_rows / IQ1S_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ1S_R16_ROWS * row_bytes;
        struct iq1s_r16_block *o =
            (struct iq1s_r16_block *)((char *)dst + (size_t)g * IQ1S_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < IQ1S_R16_ROWS; r++)
                iq1s_r16_pack_row((const struct iq1_s_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ1S_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq1s_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ1_S validate has accepted (finite d). */
static enum splash_status iq1s_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                            struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ1_S_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq1_s_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ1_S_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ1_S_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ1_S's arithmetic. */
static void iq1s_r16_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq1s_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ1S_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ1S_R16_ROWS; r++) {
            struct iq1_s_block x;
            iq1s_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
                const uint32_t qh = x.qh[ib];
                const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
                const float delta = qh & 0x8000 ? -KQ_IQ1_DELTA : KQ_IQ1_DELTA;
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint64_t g = kq_iq1s_grid[x.qs[4 * ib + l] | ((qh >> 3 * l) & 7) << 8];
                    for (int j = 0; j < 8; j++)
                        y[j] = dl * ((float)(int8_t)(g >> 8 * j) + delta);
                }
            }
        }
    }
}

/* sumf plus d * d_a * (the block's integer sum 8 sumi + sumi1) for one plain block and one
 * Q8_K block, where sumi is the scaled grid dot and sumi1 the scaled delta signs times the
 * activations' sums; the sum is exact (|8 sumi + sumi1| < 2^23), and the row's blocks chained
 * through it, then times 1/8, give the bits iq1s_r16_avx512.c computes. */
static float iq1s_r16_block_dot(float sumf, const struct iq1_s_block *x,
                                const struct splash_q8_k_block *y)
{
    const float d = splash_fp16_to_fp32(x->d) * y->d;
    const int8_t *q8 = y->qs;
    int32_t bsum = 0;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        const uint32_t qh = x->qh[ib];
        const int32_t ls = 2 * ((qh >> 12) & 7) + 1;
        const int32_t delta = qh & 0x8000 ? -1 : 1;
        int32_t lsum = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint64_t g = kq_iq1s_grid[x->qs[4 * ib + l] | ((qh >> 3 * l) & 7) << 8];
            for (int j = 0; j < 8; j++)
                lsum += q8[j] * (int8_t)(g >> 8 * j);
        }
        bsum += ls * (8 * lsum + delta * (y->bsums[2 * ib] + y->bsums[2 * ib + 1]));
    }
    return sumf + d * (float)bsum;
}

/* The reference: every (weight row, activation row) pair summed block by block in the
 * float steps of the AVX-512 kernel, so both give the same bits. */
void iq1s_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ1S_R16_ROWS * IQ1S_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ1S_R16_ROWS) {
        const struct iq1s_r16_block *b =
            (const struct iq1s_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ1S_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq1_s_block x;
                    iq1s_r16_unpack_row(&b[i], r, &x);
                    sum = iq1s_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = 0.125f * sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ1_S rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq1_s_block *x =
            (const struct iq1_s_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq1s_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = 0.125f * sum;
        }
    }
}

static const struct splash_kernel_row iq1s_r16_rows[] = {
#if defined(__x86_64__)
    /* vpgatherdq fetches the grid points; the rows after the last group use the plain
     * AVX2 row */
    {SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW |
         SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI,
     "avx512vnni", NULL, iq1s_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq1s_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq1_s_r16_type = {
    .name = "IQ1_S_R16",
    .gguf_type = -1,
    .block_elems = IQ1S_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq1s_r16_block),
    .bits_per_weight = 1.5625f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq1s_r16_validate,
    .to_float = iq1s_r16_to_float,
    .rows = iq1s_r16_rows,
    .n_rows = sizeof iq1s_r16_rows / sizeof iq1s_r16_rows[0],
    .row_group = IQ1S_R16_ROWS,
};
