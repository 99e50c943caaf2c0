/* IQ2_XS_R16: the load-time layout of IQ2_XS the AVX-512 VNNI kernels read fastest
 * (iq2xs_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq2xs_r16_avx512.c. */
#include "formats/kquants/iq2xs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ2_XS rows of n elements: the plain image and the repacked one. */
static size_t iq2xs_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq2_xs_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x. */
static void iq2xs_r16_pack_row(const struct iq2_xs_block *x, int r, struct iq2xs_r16_block *o)
{
    o->d[r] = x->d;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        o->sc[ib][r] = x->scales[ib];
        for (int l = 0; l < 4; l++) {
            const unsigned v = x->qs[4 * ib + l];
            o->q[ib][16 * l + r] = (uint16_t)((v & 511u) << 7 | v >> 9);
        }
    }
}

void iq2xs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq2_xs_block);
    const int64_t n_groups = n_rows / IQ2XS_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ2XS_R16_ROWS * row_bytes;
        struct iq2xs_r16_block *o =
            (struct iq2xs_r16_block *)((char *)dst + (size_t)g * IQ2XS_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < IQ2XS_R16_ROWS; r++)
                iq2xs_r16_pack_row((const struct iq2_xs_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ2XS_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq2xs_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ2_XS validate has accepted (finite d). */
static enum splash_status iq2xs_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ2_XS_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq2_xs_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ2_XS_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ2_XS_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ2_XS's arithmetic. */
static void iq2xs_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct iq2xs_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ2XS_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ2XS_R16_ROWS; r++) {
            struct iq2_xs_block x;
            iq2xs_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
                float db[2];
                db[0] = d * (0.5f + (float)(x.scales[ib] & 0xf)) * 0.25f;
                db[1] = d * (0.5f + (float)(x.scales[ib] >> 4)) * 0.25f;
                for (int l = 0; l < 4; l++, out += 8) {
                    const uint16_t q = x.qs[4 * ib + l];
                    const uint64_t g = kq_iq2xs_grid[q & 511];
                    const uint8_t signs = kq_iq_signs8(q >> 9);
                    for (int j = 0; j < 8; j++)
                        out[j] = db[l / 2] * (float)(uint8_t)(g >> 8 * j) *
                                 (signs >> j & 1 ? -1.f : 1.f);
                }
            }
        }
    }
}

/* sumf plus the dot of one plain block with one Q8_K block, in the plain reference's
 * steps (iq2_xs.c): so a row's blocks chained through it, times 1/8, give its bits. */
static float iq2xs_r16_block_dot(float sumf, const struct iq2_xs_block *x,
                                 const struct splash_q8_k_block *y)
{
    const float d = splash_fp16_to_fp32(x->d) * y->d;
    const int8_t *q8 = y->qs;
    int32_t bsum = 0;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        for (int h = 0; h < 2; h++) {
            const int32_t ls = 2 * ((x->scales[ib] >> 4 * h) & 0xf) + 1;
            int32_t sumi = 0;
            for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                const uint16_t q = x->qs[4 * ib + l];
                const uint64_t g = kq_iq2xs_grid[q & 511];
                const uint8_t signs = kq_iq_signs8(q >> 9);
                for (int j = 0; j < 8; j++) {
                    const int v = (uint8_t)(g >> 8 * j) * q8[j];
                    sumi += signs >> j & 1 ? -v : v;
                }
            }
            bsum += sumi * ls;
        }
    }
    return sumf + d * (float)bsum;
}

/* The reference: every (weight row, activation row) pair summed as the plain IQ2_XS
 * reference sums it, so it gives the plain reference's bits. */
void iq2xs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ2XS_R16_ROWS * IQ2XS_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ2XS_R16_ROWS) {
        const struct iq2xs_r16_block *b =
            (const struct iq2xs_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ2XS_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq2_xs_block x;
                    iq2xs_r16_unpack_row(&b[i], r, &x);
                    sum = iq2xs_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = 0.125f * sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ2_XS rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq2_xs_block *x =
            (const struct iq2_xs_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq2xs_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = 0.125f * sum;
        }
    }
}

static const struct splash_kernel_row iq2xs_r16_rows[] = {
#if defined(__x86_64__)
    /* vpgatherdq fetches the grid points, vpermi2b (VBMI) completes the signs */
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI |
         SPLASH_CPU_AVX512VBMI,
     "avx512vnni", NULL, iq2xs_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq2xs_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq2_xs_r16_type = {
    .name = "IQ2_XS_R16",
    .gguf_type = -1,
    .block_elems = IQ2XS_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq2xs_r16_block),
    .bits_per_weight = 2.3125f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq2xs_r16_validate,
    .to_float = iq2xs_r16_to_float,
    .rows = iq2xs_r16_rows,
    .n_rows = sizeof iq2xs_r16_rows / sizeof iq2xs_r16_rows[0],
    .row_group = IQ2XS_R16_ROWS,
};
