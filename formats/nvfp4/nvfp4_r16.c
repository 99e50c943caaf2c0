/* NVFP4_R16: the load-time layout of NVFP4 the AVX-512 VNNI kernels read fastest
 * (nvfp4_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in nvfp4_r16_avx512.c. */
#include <math.h>

#include "formats/nvfp4/nvfp4_r16.h"
#include "splash/fp.h"

/* Bytes of n_rows NVFP4 rows of n elements: the plain image and the repacked one. */
static size_t nvfp4_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / NVFP4_QK) * sizeof(struct nvfp4_block) * (size_t)n_rows;
}

void nvfp4_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / NVFP4_QK;
    const size_t row_bytes = (size_t)nb * sizeof(struct nvfp4_block);
    const int64_t n_groups = n_rows / NVFP4_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * NVFP4_R16_ROWS * row_bytes;
        struct nvfp4_r16_block *o =
            (struct nvfp4_r16_block *)((char *)dst + (size_t)g * NVFP4_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            for (int r = 0; r < NVFP4_R16_ROWS; r++) {
                const struct nvfp4_block *x =
                    (const struct nvfp4_block *)(rows + (size_t)r * row_bytes) + i;
                for (int s = 0; s < 4; s++)
                    o->d[NVFP4_R16_DPOS(s, r)] = nvfp4_r16_canon(x->d[s]);
                for (int k = 0; k < 8; k++)
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
            }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * NVFP4_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, nvfp4_r16_image_bytes(n, n_rows) - done);
}

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked. Every scale byte of
 * NVFP4 (plain or canonical) decodes to a finite value, so there is nothing else to
 * refuse, as NVFP4's own validate finds. */
static enum splash_status nvfp4_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    if (n_elems < 0 || n_elems % NVFP4_QK)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "NVFP4_R16: %lld elements is not a multiple of the %d-element "
                              "row block",
                              (long long)n_elems, NVFP4_QK);
    const uint64_t want = (uint64_t)(n_elems / NVFP4_QK) * sizeof(struct nvfp4_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "NVFP4_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "NVFP4_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 64 values row by row: e2m1 * UE4M3 / 2 as NVFP4
 * computes it (w * 128 is that half scale, exactly). */
static void nvfp4_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct nvfp4_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (NVFP4_R16_ROWS * NVFP4_QK); i++) {
        for (int r = 0; r < NVFP4_R16_ROWS; r++, out += NVFP4_QK) {
            for (int s = 0; s < 4; s++) {
                const float d = nvfp4_r16_scale(b[i].d[NVFP4_R16_DPOS(s, r)]) * 128.0f;
                for (int j = 0; j < 8; j++) {
                    const uint8_t q = b[i].qs[2 * s + j / 4][4 * r + j % 4];
                    out[16 * s + j] = nvfp4_e2m1_x2[q & 0xf] * d;
                    out[16 * s + j + 8] = nvfp4_e2m1_x2[q >> 4] * d;
                }
            }
        }
    }
}

/* Sub-block s's exact integer dot: 16 doubled E2M1 values against their 16 activations. */
static int32_t nvfp4_r16_sub_dot(const uint8_t *qs, const int8_t *a)
{
    int32_t isum = 0;
    for (int j = 0; j < 8; j++)
        isum += nvfp4_e2m1_x2[qs[j] & 0xf] * a[j] + nvfp4_e2m1_x2[qs[j] >> 4] * a[j + 8];
    return isum;
}

/* acc plus one 64-value block (scale bytes c[4], canonical; codes qs[32] in the plain
 * order) against its two Q8_0 blocks, in the kernels' float steps (nvfp4_r16.h). */
static float nvfp4_r16_block_dot(const uint8_t c[4], const uint8_t *qs,
                                 const struct splash_q8_0_block *y, float acc)
{
    for (int q = 0; q < 2; q++) {
        const float i0 = (float)nvfp4_r16_sub_dot(qs + 16 * q, y[q].qs);
        const float i1 = (float)nvfp4_r16_sub_dot(qs + 16 * q + 8, y[q].qs + 16);
        const float p = fmaf(i1, nvfp4_r16_scale(c[2 * q + 1]), i0 * nvfp4_r16_scale(c[2 * q]));
        acc = fmaf(p, splash_fp16_to_fp32(y[q].d) * 128.0f, acc);
    }
    return acc;
}

/* The reference: every (weight row, activation row) pair summed block by block. */
void nvfp4_r16_mul_q8_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / NVFP4_QK;
    const int64_t n_full = n_w / NVFP4_R16_ROWS * NVFP4_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += NVFP4_R16_ROWS) {
            const struct nvfp4_r16_block *b =
                (const struct nvfp4_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < NVFP4_R16_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    uint8_t c[4], qs[32];
                    for (int s = 0; s < 4; s++)
                        c[s] = b[i].d[NVFP4_R16_DPOS(s, r)];
                    for (int k = 0; k < 8; k++)
                        memcpy(qs + 4 * k, &b[i].qs[k][4 * r], 4);
                    acc = nvfp4_r16_block_dot(c, qs, &y[2 * i], acc);
                }
                o[g + r] = acc;
            }
        }
        /* the rows after the last whole group are plain NVFP4 rows */
        for (int64_t i = n_full; i < n_w; i++) {
            const struct nvfp4_block *x =
                (const struct nvfp4_block *)((const char *)w + (size_t)i * w_stride);
            float acc = 0.0f;
            for (int64_t k = 0; k < nb; k++) {
                uint8_t c[4];
                for (int s = 0; s < 4; s++)
                    c[s] = nvfp4_r16_canon(x[k].d[s]);
                acc = nvfp4_r16_block_dot(c, x[k].qs, &y[2 * k], acc);
            }
            o[i] = acc;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

/* The CPU features of NVFP4's AVX-512 row (plugin.c), which the kernel's tail uses, and
 * VBMI for vpermb and vpmultishiftqb. */
#define NVFP4_R16_AVX512_BITS                                                                      \
    (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C | SPLASH_CPU_AVX512F |                     \
     SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512DQ | SPLASH_CPU_AVX512VNNI |     \
     SPLASH_CPU_AVX512VBMI)

static const struct splash_kernel_row nvfp4_r16_rows[] = {
#if defined(__x86_64__)
    {NVFP4_R16_AVX512_BITS, "avx512vnni", NULL, nvfp4_r16_mul_q8_avx512},
#endif
    {0, "scalar", NULL, nvfp4_r16_mul_q8_ref},
};

const struct splash_format_type nvfp4_r16_type = {
    .name = "NVFP4_R16",
    .gguf_type = -1,
    .block_elems = NVFP4_R16_ROWS * NVFP4_QK,
    .block_bytes = sizeof(struct nvfp4_r16_block),
    .bits_per_weight = 4.5f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = nvfp4_r16_validate,
    .to_float = nvfp4_r16_to_float,
    .rows = nvfp4_r16_rows,
    .n_rows = sizeof nvfp4_r16_rows / sizeof nvfp4_r16_rows[0],
    .row_group = NVFP4_R16_ROWS,
};
