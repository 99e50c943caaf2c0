/* IQ3_XXS_R16: the load-time layout of IQ3_XXS the AVX-512 VNNI kernels read fastest
 * (iq3xxs_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in iq3xxs_r16_avx512.c. */
#include "formats/kquants/iq3xxs_r16.h"
#include "formats/kquants/iq_blocks.h"
#include "formats/kquants/iq_common.h"
#include "formats/kquants/iq_grids.h"

/* Bytes of n_rows IQ3_XXS rows of n elements: the plain image and the repacked one. */
static size_t iq3xxs_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / SPLASH_QK_K) * sizeof(struct iq3_xxs_block) * (size_t)n_rows;
}

/* Row r of a group block from its plain block x. */
static void iq3xxs_r16_pack_row(const struct iq3_xxs_block *x, int r, struct iq3xxs_r16_block *o)
{
    o->d[r] = x->d;
    for (int k = 0; k < SPLASH_QK_K / 4; k++)
        o->qs[k / 4][4 * r + k % 4] = x->qs[k];
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++)
        memcpy(&o->aux[ib][r], x->qs + SPLASH_QK_K / 4 + 4 * ib, 4);
}

void iq3xxs_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct iq3_xxs_block);
    const int64_t n_groups = n_rows / IQ3XXS_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * IQ3XXS_R16_ROWS * row_bytes;
        struct iq3xxs_r16_block *o =
            (struct iq3xxs_r16_block *)((char *)dst + (size_t)g * IQ3XXS_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < IQ3XXS_R16_ROWS; r++)
                iq3xxs_r16_pack_row((const struct iq3_xxs_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * IQ3XXS_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, iq3xxs_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain IQ3_XXS validate has accepted (finite d). */
static enum splash_status iq3xxs_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                              struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ3_XXS_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct iq3_xxs_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "IQ3_XXS_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "IQ3_XXS_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with IQ3_XXS's arithmetic. */
static void iq3xxs_r16_to_float(const void *blocks, float *y, int64_t n)
{
    const struct iq3xxs_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (IQ3XXS_R16_ROWS * SPLASH_QK_K); i++) {
        for (int r = 0; r < IQ3XXS_R16_ROWS; r++) {
            struct iq3_xxs_block x;
            iq3xxs_r16_unpack_row(&b[i], r, &x);
            const float d = splash_fp16_to_fp32(x.d);
            const uint8_t *qs = x.qs;
            for (int ib = 0; ib < SPLASH_QK_K / 32; ib++, qs += 8) {
                const uint32_t aux = kq_load_u32(x.qs + SPLASH_QK_K / 4 + 4 * ib);
                const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
                for (int l = 0; l < 4; l++, y += 8) {
                    const uint8_t signs = kq_iq_signs8(aux >> 7 * l);
                    const uint32_t g1 = kq_iq3xxs_grid[qs[2 * l]],
                                   g2 = kq_iq3xxs_grid[qs[2 * l + 1]];
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
 * in the plain reference's float steps (iq3_xxs.c), so that a row's blocks chained
 * through it, then times 1/4, give its bits. */
static float iq3xxs_r16_block_dot(float sumf, const struct iq3_xxs_block *x,
                                  const struct splash_q8_k_block *y)
{
    const float d = splash_fp16_to_fp32(x->d) * y->d;
    const uint8_t *qs = x->qs;
    const int8_t *q8 = y->qs;
    int32_t bsum = 0;
    for (int ib = 0; ib < SPLASH_QK_K / 32; ib++, qs += 8) {
        const uint32_t aux = kq_load_u32(x->qs + SPLASH_QK_K / 4 + 4 * ib);
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint8_t signs = kq_iq_signs8(aux >> 7 * l);
            const uint32_t g1 = kq_iq3xxs_grid[qs[2 * l]], g2 = kq_iq3xxs_grid[qs[2 * l + 1]];
            for (int j = 0; j < 4; j++) {
                const int v1 = (uint8_t)(g1 >> 8 * j) * q8[j];
                const int v2 = (uint8_t)(g2 >> 8 * j) * q8[j + 4];
                sumi += signs >> j & 1 ? -v1 : v1;
                sumi += signs >> (j + 4) & 1 ? -v2 : v2;
            }
        }
        bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
    }
    return sumf + d * (float)bsum;
}

/* The reference: every (weight row, activation row) pair summed as the plain IQ3_XXS
 * reference sums it, so it gives the plain reference's bits. */
void iq3xxs_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                            size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / IQ3XXS_R16_ROWS * IQ3XXS_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += IQ3XXS_R16_ROWS) {
        const struct iq3xxs_r16_block *b =
            (const struct iq3xxs_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < IQ3XXS_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct iq3_xxs_block x;
                    iq3xxs_r16_unpack_row(&b[i], r, &x);
                    sum = iq3xxs_r16_block_dot(sum, &x, &y[i]);
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = 0.25f * sum;
            }
        }
    }
    /* the rows after the last whole group are plain IQ3_XXS rows */
    for (int64_t i = n_full; i < n_w; i++) {
        const struct iq3_xxs_block *x =
            (const struct iq3_xxs_block *)((const char *)w + (size_t)i * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = iq3xxs_r16_block_dot(sum, &x[k], &y[k]);
            out[(size_t)j * out_stride + (size_t)i] = 0.25f * sum;
        }
    }
}

static const struct splash_kernel_row iq3xxs_r16_rows[] = {
#if defined(__x86_64__)
    /* vpgatherdd looks the grid up; vpmultishiftqb and vpermi2b (VBMI) expand the signs;
     * the rows after the last group use the plain AVX2 row */
    {SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW |
         SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI,
     "avx512vnni", NULL, iq3xxs_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, iq3xxs_r16_mul_q8k_ref},
};

const struct splash_format_type kq_iq3_xxs_r16_type = {
    .name = "IQ3_XXS_R16",
    .gguf_type = -1,
    .block_elems = IQ3XXS_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct iq3xxs_r16_block),
    .bits_per_weight = 3.0625f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = iq3xxs_r16_validate,
    .to_float = iq3xxs_r16_to_float,
    .rows = iq3xxs_r16_rows,
    .n_rows = sizeof iq3xxs_r16_rows / sizeof iq3xxs_r16_rows[0],
    .row_group = IQ3XXS_R16_ROWS,
};
