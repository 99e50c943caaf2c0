/* IQ2_XXS_R16: the load-time layout of IQ2_XXS the AVX-512 VNNI kernels read fastest
 * (iq2xxs_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq2xxs_r16_avx512.c. */
#include "formats/kquants/iq2xxs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ2_XXS rows of n elements: the plain image and the repacked one. */
static size_t iq2xxs_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq2_xxs_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x. */
static void iq2xxs_r16_pack_row(const struct iq2_xxs_block *x, int r, struct iq2xxs_r16_block *o)
{
    o->d[r] = x->d;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        const uint32_t idx = kq_load_u32(x->qs + 4 * ib), aux = kq_load_u32(x->qs + 4 * ib + 2);
        for (int l = 0; l < 4; l++) {
            o->idx[ib][16 * l + r] = (uint8_t)(idx >> 8 * l);
            o->sg[ib][16 * l + r] = (uint8_t)((aux >> 7 * l & 127u) | (aux >> (28 + l) & 1u) << 7);
        }
    }
}

void iq2xxs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq2_xxs_block);
    const int64_t n_groups = n_rows / IQ2XXS_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ2XXS_R16_ROWS * row_bytes;
        struct iq2xxs_r16_block *o =
            (struct iq2xxs_r16_block *)((char *)dst + (size_t)g * IQ2XXS_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < IQ2XXS_R16_ROWS; r++)
                iq2xxs_r16_pack_row((const struct iq2_xxs_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ2XXS_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq2xxs_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ2_XXS validate has accepted (finite d). */
static enum splash_status iq2xxs_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                              struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ2_XXS_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq2_xxs_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ2_XXS_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ2_XXS_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ2_XXS's arithmetic. */
static void iq2xxs_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct iq2xxs_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ2XXS_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ2XXS_R16_ROWS; r++) {
            struct iq2_xxs_block x;
            iq2xxs_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
                const uint32_t idx = kq_load_u32(x.qs + 4 * ib);
                const uint32_t aux = kq_load_u32(x.qs + 4 * ib + 2);
                const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
                for (int l = 0; l < 4; l++, out += 8) {
                    const uint64_t g = kq_iq2xxs_grid[(idx >> 8 * l) & 0xff];
                    const uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                    for (int j = 0; j < 8; j++)
                        out[j] = db * (float)(uint8_t)(g >> 8 * j) * (signs >> j & 1 ? -1.f : 1.f);
                }
            }
        }
    }
}

/* sumf plus the dot of one plain block with one Q8_K block, in the plain reference's
 * steps (iq2_xxs.c): so a row's blocks chained through it, times 1/8, give its bits. */
static float iq2xxs_r16_block_dot(float sumf, const struct iq2_xxs_block *x,
                                  const struct splash_q8_k_block *y)
{
    const float d = splash_fp16_to_fp32(x->d) * y->d;
    const int8_t *q8 = y->qs;
    int32_t bsum = 0;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++) {
        const uint32_t idx = kq_load_u32(x->qs + 4 * ib);
        const uint32_t aux = kq_load_u32(x->qs + 4 * ib + 2);
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint64_t g = kq_iq2xxs_grid[(idx >> 8 * l) & 0xff];
            const uint8_t signs = kq_iq_signs8(aux >> 7 * l);
            for (int j = 0; j < 8; j++) {
                const int v = (uint8_t)(g >> 8 * j) * q8[j];
                sumi += signs >> j & 1 ? -v : v;
            }
        }
        bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
    }
    return sumf + d * (float)bsum;
}

/* The reference: every (weight row, activation row) pair summed as the plain IQ2_XXS
 * reference sums it, so it gives the plain reference's bits. */
void iq2xxs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ2XXS_R16_ROWS * IQ2XXS_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ2XXS_R16_ROWS) {
        const struct iq2xxs_r16_block *b =
            (const struct iq2xxs_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ2XXS_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq2_xxs_block x;
                    iq2xxs_r16_unpack_row(&b[i], r, &x);
                    sum = iq2xxs_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = 0.125f * sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ2_XXS rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq2_xxs_block *x =
            (const struct iq2_xxs_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq2xxs_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = 0.125f * sum;
        }
    }
}

static const struct splash_kernel_row iq2xxs_r16_rows[] = {
#if defined(__x86_64__)
    /* vpgatherdq fetches the grid points, vpermi2b (VBMI) completes the signs */
    {SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI |
         SPLASH_CPU_AVX512VBMI,
     "avx512vnni", NULL, iq2xxs_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq2xxs_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq2_xxs_r16_type = {
    .name = "IQ2_XXS_R16",
    .gguf_type = -1,
    .block_elems = IQ2XXS_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq2xxs_r16_block),
    .bits_per_weight = 2.0625f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq2xxs_r16_validate,
    .to_float = iq2xxs_r16_to_float,
    .rows = iq2xxs_r16_rows,
    .n_rows = sizeof iq2xxs_r16_rows / sizeof iq2xxs_r16_rows[0],
    .row_group = IQ2XXS_R16_ROWS,
};
