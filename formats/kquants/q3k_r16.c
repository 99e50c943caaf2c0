/* Q3_K_R16: the load-time layout of Q3_K for the AVX-512 VNNI kernels (q3k_r16.h):
 * repack from plain rows, to_float, validate, the scalar reference kernel and the
 * descriptor. Exact: the same levels, scale fields and d as the plain blocks. */
#include "formats/kquants/q3k_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

#if defined(__x86_64__)
KQ_DECL_MUL(q3k_r16_mul_q8k_avx512);
#endif

/* ---- layout ------------------------------------------------------------------ */

/* The 256 levels u = q + 4 (0..7) of a plain Q3_K block (q3_k.c's element map: value
 * 128 h + 32 k + l takes bits 2k, 2k + 1 of qs[32 h + l] and bit 4h + k of hmask[l]). */
static void q3k_plain_levels(const struct q3_k_block *b, uint8_t lv[SPLASH_QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                lv[128 * h + 32 * k + l] = (uint8_t)(((b->qs[32 * h + l] >> (2 * k)) & 3) |
                                                     ((b->hmask[l] >> (4 * h + k)) & 1) << 2);
}

/* One Q3_K_R16 block from super-block i of 16 plain rows of nb blocks each. */
static void q3k_r16_pack_block(const struct q3_k_block *rows, int64_t nb, int64_t i,
                               uint8_t *dst)
{
    uint8_t lv[SPLASH_QK_K];
    memset(dst + Q3K_R16_LO, 0, Q3K_R16_D - Q3K_R16_LO);
    for (int r = 0; r < Q3K_R16_ROWS; r++) {
        const struct q3_k_block *b = rows + r * nb + i;
        q3k_plain_levels(b, lv);
        for (int p = 0; p < 8; p++)
            for (int c = 0; c < 4; c++) {
                const uint8_t *u = lv + 32 * p + c;
                const int x = u[12] | u[28] << 3; /* the fourth quads, 6 bits */
                for (int k = 0; k < 3; k++)
                    dst[Q3K_R16_QS + 192 * p + 64 * k + 4 * r + c] =
                        (uint8_t)(u[4 * k] << 2 | u[16 + 4 * k] << 5 | ((x >> (2 * k)) & 3));
            }
        int8_t sc[16];
        kq_q3k_unpack_scales(b->scales, sc);
        for (int s = 0; s < 16; s++) {
            const int t = sc[s] + 32, at = 16 * (s % 4) + r;
            dst[Q3K_R16_LO + 64 * (s / 8) + at] |= (uint8_t)((t & 0xF) << (4 * (s % 8 / 4)));
            dst[Q3K_R16_HI + at] |= (uint8_t)((t >> 4) << (2 * (s / 4)));
        }
        memcpy(dst + Q3K_R16_D + 2 * r, &b->d, 2);
    }
}

void q3k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_rows / Q3K_R16_ROWS;
    const struct q3_k_block *s = src;
    uint8_t *d = dst;
    for (int64_t g = 0; g < n_groups; g++, s += Q3K_R16_ROWS * nb)
        for (int64_t i = 0; i < nb; i++, d += Q3K_R16_BYTES)
            q3k_r16_pack_block(s, nb, i, d);
    /* the rows after the last whole group stay as they are */
    memcpy(d, s, (size_t)(n_rows - n_groups * Q3K_R16_ROWS) * nb * sizeof(struct q3_k_block));
}

static float q3k_r16_d(const uint8_t *blk, int r)
{
    return kq_h2f(kq_load_u16(blk + Q3K_R16_D + 2 * r));
}

/* ---- descriptor members ---------------------------------------------------------- */

static const struct kq_scale_field q3k_r16_fields[Q3K_R16_ROWS] = {
    {Q3K_R16_D + 0, 0, "d (row 0)"},   {Q3K_R16_D + 2, 0, "d (row 1)"},
    {Q3K_R16_D + 4, 0, "d (row 2)"},   {Q3K_R16_D + 6, 0, "d (row 3)"},
    {Q3K_R16_D + 8, 0, "d (row 4)"},   {Q3K_R16_D + 10, 0, "d (row 5)"},
    {Q3K_R16_D + 12, 0, "d (row 6)"},  {Q3K_R16_D + 14, 0, "d (row 7)"},
    {Q3K_R16_D + 16, 0, "d (row 8)"},  {Q3K_R16_D + 18, 0, "d (row 9)"},
    {Q3K_R16_D + 20, 0, "d (row 10)"}, {Q3K_R16_D + 22, 0, "d (row 11)"},
    {Q3K_R16_D + 24, 0, "d (row 12)"}, {Q3K_R16_D + 26, 0, "d (row 13)"},
    {Q3K_R16_D + 28, 0, "d (row 14)"}, {Q3K_R16_D + 30, 0, "d (row 15)"},
};

/* Whole blocks of 16 rows only: where an image's plain tail rows start depends on the
 * row length, which a validate does not know (the plain rows are validated as Q3_K
 * before they are repacked). NaN/Inf d are refused like Q3_K's validate does. */
static enum splash_status q3k_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    return kq_validate_blocks("Q3_K_R16", data, n_bytes, n_elems, Q3K_R16_ROWS * SPLASH_QK_K,
                              Q3K_R16_BYTES, q3k_r16_fields, Q3K_R16_ROWS, err);
}

/* The 16 rows' 256 values each, row by row, as q3_k_to_float computes them. */
static void q3k_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const uint8_t *blk = blocks;
    for (int64_t i = 0; i < n / (Q3K_R16_ROWS * SPLASH_QK_K); i++, blk += Q3K_R16_BYTES)
        for (int r = 0; r < Q3K_R16_ROWS; r++) {
            const float d = q3k_r16_d(blk, r);
            for (int s = 0; s < 16; s++) {
                const float dl = d * (q3k_r16_field(blk, r, s) - 32);
                for (int j = 16 * s; j < 16 * s + 16; j++)
                    *out++ = dl * (q3k_r16_level(blk, r, j) - 4);
            }
        }
}

/* ---- scalar reference -------------------------------------------------------- */

/* Row r of a group against one activation row: q3k_dot_q8k_ref's integer sums and
 * float steps, read from the repacked blocks. */
static float q3k_r16_dot_ref(int64_t nb, const uint8_t *group, int r,
                             const struct splash_q8_k_block *y)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = group + i * Q3K_R16_BYTES;
        int isum = 0;
        for (int s = 0; s < 16; s++) {
            int ss = 0;
            for (int j = 16 * s; j < 16 * s + 16; j++)
                ss += (q3k_r16_level(blk, r, j) - 4) * y[i].qs[j];
            isum += (q3k_r16_field(blk, r, s) - 32) * ss;
        }
        sum += q3k_r16_d(blk, r) * y[i].d * isum;
    }
    return sum;
}

static KQ_DECL_MUL(q3k_r16_mul_q8k_ref)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_w / Q3K_R16_ROWS;
    const char *wb = w;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *group = (const uint8_t *)wb + g * Q3K_R16_ROWS * w_stride;
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + j * act_stride);
            for (int r = 0; r < Q3K_R16_ROWS; r++)
                out[j * out_stride + g * Q3K_R16_ROWS + r] = q3k_r16_dot_ref(nb, group, r, y);
        }
    }
    for (int64_t i = n_groups * Q3K_R16_ROWS; i < n_w; i++)
        for (int64_t j = 0; j < n_act; j++)
            q3k_dot_q8k_ref(n, &out[j * out_stride + i], wb + i * w_stride,
                            (const char *)act + j * act_stride);
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row q3k_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q3k_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, q3k_r16_mul_q8k_ref},
};

const struct splash_format_type kq_q3_k_r16_type = {
    .name = "Q3_K_R16",
    .gguf_type = -1,
    .block_elems = Q3K_R16_ROWS * SPLASH_QK_K,
    .block_bytes = Q3K_R16_BYTES,
    .bits_per_weight = 3.4375f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q3k_r16_validate,
    .to_float = q3k_r16_to_float,
    .rows = q3k_r16_rows,
    .n_rows = sizeof q3k_r16_rows / sizeof q3k_r16_rows[0],
    .row_group = Q3K_R16_ROWS,
};
