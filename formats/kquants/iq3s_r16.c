/* IQ3_S_R16: the load-time layout of IQ3_S the AVX-512 VNNI kernels read fastest
 * (iq3s_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq3s_r16_avx512.c. */
#include "formats/kquants/iq3s_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ3_S rows of n elements: the plain image and the repacked one. */
static size_t iq3s_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq3_s_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x (o's bit fields start zeroed). */
static void iq3s_r16_pack_row(const struct iq3_s_block *x, int r, struct iq3s_r16_block *o)
{
    o->d[r] = x->d;
    memcpy(&o->sc[r], x->scales, 4);
    for (int k = 0; k < SPLASH_QK_K / 4; k++) {
        const int h = k / 4, c = k % 4;
        o->qs[h][4 * r + c] = x->qs[k];
        o->qh[h] |= (uint64_t)(x->qh[k / 8] >> (k % 8) & 1) << (4 * r + c);
        for (int t = 0; t < 4; t++) {
            const int v = 4 * k + t;
            o->sg[h][t] |= (uint64_t)(x->signs[v / 8] >> (v % 8) & 1) << (4 * r + c);
        }
    }
}

void iq3s_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq3_s_block);
    const int64_t n_groups = n_rows / IQ3S_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ3S_R16_ROWS * row_bytes;
        struct iq3s_r16_block *o =
            (struct iq3s_r16_block *)((char *)dst + (size_t)g * IQ3S_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            memset(o->qh, 0, sizeof o->qh);
            memset(o->sg, 0, sizeof o->sg);
            for (int r = 0; r < IQ3S_R16_ROWS; r++)
                iq3s_r16_pack_row((const struct iq3_s_block *)(rows + r * row_bytes) + i, r, o);
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ3S_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq3s_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ3_S validate has accepted (finite d). */
static enum splash_status iq3s_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                            struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ3_S_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq3_s_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ3_S_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ3_S_R16: no data");
    return SPLASH_OK;
}

/* The two 4-value grid points of group l (0..3) of sub-block ib, as IQ3_S defines them. */
static inline void iq3s_r16_points(const struct iq3_s_block *b, int ib, int l, uint32_t *g1,
                                   uint32_t *g2)
{
    const uint8_t *qs = b->qs + 8 * ib;
    const uint32_t qh = b->qh[ib];
    *g1 = kq_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
    *g2 = kq_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
}

/* 2 * scale + 1 of sub-block ib. */
static inline int32_t iq3s_r16_ls(const struct iq3_s_block *x, int ib)
{
    return 2 * ((x->scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ3_S's arithmetic. */
static void iq3s_r16_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq3s_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ3S_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ3S_R16_ROWS; r++) {
            struct iq3_s_block x;
            iq3s_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
                const float db = d * (float)iq3s_r16_ls(&x, ib);
                for (int l = 0; l < 4; l++, y += 8) {
                    uint32_t g1, g2;
                    iq3s_r16_points(&x, ib, l, &g1, &g2);
                    const uint8_t signs = x.signs[4 * ib + l];
                    for (int j = 0; j < 4; j++) {
                        y[j] = db * (float)(uint8_t)(g1 >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                        y[j + 4] = db * (float)(uint8_t)(g2 >> 8 * j) *
                                   (signs >> (j + 4) & 1 ? -1.f : 1.f);
                    }
                }
            }
        }
    }
}

/* sumf plus d * d_a * (the block's integer sum) for one plain block and one Q8_K block,
 * in the plain reference's float steps (iq3_s.c), so that a row's blocks chained through
 * it give its bits. */
static float iq3s_r16_block_dot(float sumf, const struct iq3_s_block *x,
                                const struct splash_q8_k_block *y)
{
    const float d = splash_fp16_to_fp32(x->d) * y->d;
    const int8_t *q8 = y->qs;
    int32_t bsum = 0;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            uint32_t g1, g2;
            iq3s_r16_points(x, ib, l, &g1, &g2);
            const uint8_t signs = x->signs[4 * ib + l];
            for (int j = 0; j < 4; j++) {
                const int v1 = (uint8_t)(g1 >> 8 * j) * q8[j];
                const int v2 = (uint8_t)(g2 >> 8 * j) * q8[j + 4];
                sumi += signs >> j & 1 ? -v1 : v1;
                sumi += signs >> (j + 4) & 1 ? -v2 : v2;
            }
        }
        bsum += sumi * iq3s_r16_ls(x, ib);
    }
    return sumf + d * (float)bsum;
}

/* The reference: every (weight row, activation row) pair summed as the plain IQ3_S
 * reference sums it, so it gives the plain reference's bits. */
void iq3s_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ3S_R16_ROWS * IQ3S_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ3S_R16_ROWS) {
        const struct iq3s_r16_block *b =
            (const struct iq3s_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ3S_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq3_s_block x;
                    iq3s_r16_unpack_row(&b[i], r, &x);
                    sum = iq3s_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ3_S rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq3_s_block *x =
            (const struct iq3_s_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq3s_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = sum;
        }
    }
}

static const struct splash_kernel_row iq3s_r16_rows[] = {
#if defined(__x86_64__)
    /* the grid is looked up in registers with vpermi2b (VBMI); the rows after the last
     * group use the plain AVX2 row */
    {SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW |
         SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI,
     "avx512vnni", NULL, iq3s_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq3s_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq3_s_r16_type = {
    .name = "IQ3_S_R16",
    .gguf_type = -1,
    .block_elems = IQ3S_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq3s_r16_block),
    .bits_per_weight = 3.4375f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq3s_r16_validate,
    .to_float = iq3s_r16_to_float,
    .rows = iq3s_r16_rows,
    .n_rows = sizeof iq3s_r16_rows / sizeof iq3s_r16_rows[0],
    .row_group = IQ3S_R16_ROWS,
};
