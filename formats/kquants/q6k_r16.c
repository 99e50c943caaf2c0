/* Q6_K_R16: the load-time layout of Q6_K for the AVX-512 VNNI kernels (q6k_r16.h):
 * repack from plain rows, to_float, validate, the scalar reference kernel and the
 * descriptor. Exact: the same levels, scales and d as the plain blocks. */
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"
#include "formats/kquants/q6k_r16.h"

#if defined(__x86_64__)
KQ_DECL_MUL(q6k_r16_mul_q8k_avx512);
#endif

/* ---- layout ------------------------------------------------------------------ */

/* The 256 levels u (0..63) of a plain Q6_K block (q6_k.c's element map: value
 * 128 h + 32 k + l takes the low (k < 2) or high nibble of ql[64 h + 32 (k & 1) + l] and
 * bits 2k, 2k + 1 of qh[32 h + l]), in one pass a compiler vectorizes. */
static void q6k_plain_levels(const struct q6_k_block *b, uint8_t lv[SPLASH_QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t q0 = b->ql[64 * h + l], q1 = b->ql[64 * h + 32 + l];
            const uint8_t qh = b->qh[32 * h + l];
            uint8_t *o = lv + 128 * h + l;
            o[0] = (uint8_t)((q0 & 0xF) | (qh & 3) << 4);
            o[32] = (uint8_t)((q1 & 0xF) | ((qh >> 2) & 3) << 4);
            o[64] = (uint8_t)((q0 >> 4) | ((qh >> 4) & 3) << 4);
            o[96] = (uint8_t)((q1 >> 4) | ((qh >> 6) & 3) << 4);
        }
}

/* One Q6_K_R16 block from super-block i of 16 plain rows of nb blocks each. */
static void q6k_r16_pack_block(const struct q6_k_block *rows, int64_t nb, int64_t i,
                               uint8_t *dst)
{
    uint8_t lv[SPLASH_QK_K];
    for (int r = 0; r < Q6K_R16_ROWS; r++) {
        const struct q6_k_block *b = rows + r * nb + i;
        q6k_plain_levels(b, lv);
        for (int s = 0; s < 16; s++) {
            uint8_t *q = dst + Q6K_R16_QS + 192 * s + 4 * r;
            /* 4 levels per 32-bit word (each below 64, so the shifts stay in their byte) */
            uint32_t quad[4];
            memcpy(quad, lv + 16 * s, sizeof quad);
            for (int k = 0; k < 3; k++) {
                const uint32_t w = quad[k] << 2 | ((quad[3] >> (2 * k)) & 0x03030303u);
                memcpy(q + 64 * k, &w, 4);
            }
            dst[Q6K_R16_SCALES + 16 * s + r] = (uint8_t)b->scales[s];
        }
        memcpy(dst + Q6K_R16_D + 2 * r, &b->d, 2);
    }
}

void q6k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_rows / Q6K_R16_ROWS;
    const struct q6_k_block *s = src;
    uint8_t *d = dst;
    for (int64_t g = 0; g < n_groups; g++, s += Q6K_R16_ROWS * nb)
        for (int64_t i = 0; i < nb; i++, d += Q6K_R16_BYTES)
            q6k_r16_pack_block(s, nb, i, d);
    memcpy(d, s, (size_t)(n_rows - n_groups * Q6K_R16_ROWS) * nb * sizeof(struct q6_k_block));
}

static float q6k_r16_d(const uint8_t *blk, int r)
{
    return kq_h2f(kq_load_u16(blk + Q6K_R16_D + 2 * r));
}

static int q6k_r16_scale(const uint8_t *blk, int r, int s)
{
    return (int8_t)blk[Q6K_R16_SCALES + 16 * s + r];
}

/* ---- descriptor members ---------------------------------------------------------- */

static const struct kq_scale_field q6k_r16_fields[Q6K_R16_ROWS] = {
    {Q6K_R16_D + 0, 0, "d (row 0)"},   {Q6K_R16_D + 2, 0, "d (row 1)"},
    {Q6K_R16_D + 4, 0, "d (row 2)"},   {Q6K_R16_D + 6, 0, "d (row 3)"},
    {Q6K_R16_D + 8, 0, "d (row 4)"},   {Q6K_R16_D + 10, 0, "d (row 5)"},
    {Q6K_R16_D + 12, 0, "d (row 6)"},  {Q6K_R16_D + 14, 0, "d (row 7)"},
    {Q6K_R16_D + 16, 0, "d (row 8)"},  {Q6K_R16_D + 18, 0, "d (row 9)"},
    {Q6K_R16_D + 20, 0, "d (row 10)"}, {Q6K_R16_D + 22, 0, "d (row 11)"},
    {Q6K_R16_D + 24, 0, "d (row 12)"}, {Q6K_R16_D + 26, 0, "d (row 13)"},
    {Q6K_R16_D + 28, 0, "d (row 14)"}, {Q6K_R16_D + 30, 0, "d (row 15)"},
};

/* Whole blocks of 16 rows only: where an image's plain tail rows start depends on the
 * row length, which a validate does not know (the plain rows are validated as Q6_K
 * before they are repacked). */
static enum splash_status q6k_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    return kq_validate_blocks("Q6_K_R16", data, n_bytes, n_elems, Q6K_R16_ROWS * SPLASH_QK_K,
                              Q6K_R16_BYTES, q6k_r16_fields, Q6K_R16_ROWS, err);
}

/* The 16 rows' 256 values each, row by row, as q6_k_to_float computes them. */
static void q6k_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const uint8_t *blk = blocks;
    for (int64_t i = 0; i < n / (Q6K_R16_ROWS * SPLASH_QK_K); i++, blk += Q6K_R16_BYTES)
        for (int r = 0; r < Q6K_R16_ROWS; r++, out += SPLASH_QK_K) {
            const float d = q6k_r16_d(blk, r);
            for (int j = 0; j < SPLASH_QK_K; j++)
                out[j] = d * q6k_r16_scale(blk, r, j / 16) * (q6k_r16_level(blk, r, j) - 32);
        }
}

/* ---- scalar reference -------------------------------------------------------- */

/* Row r of a group against one activation row: q6k_dot_q8k_ref's integer sums and
 * float steps, read from the repacked blocks. */
static float q6k_r16_dot_ref(int64_t nb, const uint8_t *group, int r,
                             const struct splash_q8_k_block *y)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = group + i * Q6K_R16_BYTES;
        int isum = 0;
        for (int s = 0; s < 16; s++) {
            int ss = 0;
            for (int j = 16 * s; j < 16 * s + 16; j++)
                ss += (q6k_r16_level(blk, r, j) - 32) * y[i].qs[j];
            isum += q6k_r16_scale(blk, r, s) * ss;
        }
        sum += q6k_r16_d(blk, r) * y[i].d * isum;
    }
    return sum;
}

static KQ_DECL_MUL(q6k_r16_mul_q8k_ref)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_groups = n_w / Q6K_R16_ROWS;
    const char *wb = w;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *group = (const uint8_t *)wb + g * Q6K_R16_ROWS * w_stride;
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + j * act_stride);
            for (int r = 0; r < Q6K_R16_ROWS; r++)
                out[j * out_stride + g * Q6K_R16_ROWS + r] = q6k_r16_dot_ref(nb, group, r, y);
        }
    }
    for (int64_t i = n_groups * Q6K_R16_ROWS; i < n_w; i++)
        for (int64_t j = 0; j < n_act; j++)
            q6k_dot_q8k_ref(n, &out[j * out_stride + i], wb + i * w_stride,
                            (const char *)act + j * act_stride);
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row q6k_r16_rows[] = {
#if defined(__x86_64__)
    /* vpermb gathers the fourth quad's bit pairs */
    {KQ_CPU_AVX512_ROW | SPLASH_CPU_AVX512VBMI, "avx512vnni", NULL, q6k_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, q6k_r16_mul_q8k_ref},
};

const struct splash_format_type kq_q6_k_r16_type = {
    .name = "Q6_K_R16",
    .gguf_type = -1,
    .block_elems = Q6K_R16_ROWS * SPLASH_QK_K,
    .block_bytes = Q6K_R16_BYTES,
    .bits_per_weight = 6.5625f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q6k_r16_validate,
    .to_float = q6k_r16_to_float,
    .rows = q6k_r16_rows,
    .n_rows = sizeof q6k_r16_rows / sizeof q6k_r16_rows[0],
    .row_group = Q6K_R16_ROWS,
};
