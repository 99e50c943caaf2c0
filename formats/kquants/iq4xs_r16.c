/* IQ4_XS_R16: the load-time layout of IQ4_XS the AVX-512 VNNI kernels read fastest
 * (iq4xs_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq4xs_r16_avx512.c. */
#include "formats/kquants/iq4xs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ4_XS rows of n elements: the plain image and the repacked one. */
static size_t iq4xs_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq4_xs_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x. */
static void iq4xs_r16_pack_row(const struct iq4_xs_block *x, int r, struct iq4xs_r16_block *o)
{
    uint32_t f[8];
    for (int j = 0; j < 8; j++)
        f[j] = (uint32_t)(iq4xs_r16_plain_ls(x, j) ^ 32);
    o->sc[r] = f[0] << 26 | f[1] << 20 | f[2] << 14 | f[3] << 8 | f[4] << 2 | f[7] >> 4;
    o->sh[r] = (uint16_t)(f[5] << 10 | f[6] << 4 | (f[7] & 15));
    o->d[r] = x->d;
    for (int k = 0; k < SPLASH_QK_K / 8; k++)
        memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
}

void iq4xs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq4_xs_block);
    const int64_t n_groups = n_rows / IQ4XS_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ4XS_R16_ROWS * row_bytes;
        struct iq4xs_r16_block *o =
            (struct iq4xs_r16_block *)((char *)dst + (size_t)g * IQ4XS_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < IQ4XS_R16_ROWS; r++)
                iq4xs_r16_pack_row((const struct iq4_xs_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ4XS_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq4xs_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ4_XS validate has accepted (finite d). */
static enum splash_status iq4xs_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ4_XS_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq4_xs_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ4_XS_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ4_XS_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ4_XS's arithmetic. */
static void iq4xs_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct iq4xs_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ4XS_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ4XS_R16_ROWS; r++) {
            struct iq4_xs_block x;
            iq4xs_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            const uint8_t *qs = x.qs;
            for (int j = 0; j < SPLASH_QK_K / 32; j++, qs += 16, out += 32) {
                const float dl = d * (float)(iq4xs_r16_plain_ls(&x, j) - 32);
                for (int l = 0; l < 16; l++) {
                    out[l] = dl * kq_iq4nl_values[qs[l] & 0xF];
                    out[l + 16] = dl * kq_iq4nl_values[qs[l] >> 4];
                }
            }
        }
    }
}

/* sumf plus the dot of one plain block with one Q8_K block, in the plain reference's
 * float steps (iq4_xs.c), so that a row's blocks chained through it give its bits. */
static float iq4xs_r16_block_dot(float sumf, const struct iq4_xs_block *x,
                                 const struct splash_q8_k_block *y)
{
    const float d4d8 = splash_fp16_to_fp32(x->d) * y->d;
    const uint8_t *qs = x->qs;
    const int8_t *q8 = y->qs;
    for (int j = 0; j < SPLASH_QK_K / 32; j++, qs += 16, q8 += 32) {
        const float dl = d4d8 * (float)(iq4xs_r16_plain_ls(x, j) - 32);
        int32_t s1 = 0, s2 = 0;
        for (int l = 0; l < 16; l++) {
            s1 += q8[l] * kq_iq4nl_values[qs[l] & 0xF];
            s2 += q8[l + 16] * kq_iq4nl_values[qs[l] >> 4];
        }
        sumf += dl * (float)(s1 + s2);
    }
    return sumf;
}

/* The reference: every (weight row, activation row) pair summed as the plain IQ4_XS
 * reference sums it, so it gives the plain reference's bits. */
void iq4xs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ4XS_R16_ROWS * IQ4XS_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ4XS_R16_ROWS) {
        const struct iq4xs_r16_block *b =
            (const struct iq4xs_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ4XS_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq4_xs_block x;
                    iq4xs_r16_unpack_row(&b[i], r, &x);
                    sum = iq4xs_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ4_XS rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq4_xs_block *x =
            (const struct iq4_xs_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq4xs_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = sum;
        }
    }
}

static const struct splash_kernel_row iq4xs_r16_rows[] = {
#if defined(__x86_64__)
    /* the plain IQ4_XS AVX-512 row's requirements (vpermb looks the levels up) */
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI |
         SPLASH_CPU_AVX512VBMI,
     "avx512vnni", NULL, iq4xs_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq4xs_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq4_xs_r16_type = {
    .name = "IQ4_XS_R16",
    .gguf_type = -1,
    .block_elems = IQ4XS_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq4xs_r16_block),
    .bits_per_weight = 4.25f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq4xs_r16_validate,
    .to_float = iq4xs_r16_to_float,
    .rows = iq4xs_r16_rows,
    .n_rows = sizeof iq4xs_r16_rows / sizeof iq4xs_r16_rows[0],
    .row_group = IQ4XS_R16_ROWS,
};
