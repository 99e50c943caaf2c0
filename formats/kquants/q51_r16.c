/* Q5_1_R16: the load-time layout of Q5_1 the AVX-512 VNNI kernels read fastest
 * (q51_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in q51_r16_avx512.c. */
#include "formats/kquants/q51_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"

/* Bytes of n_rows Q5_1 rows of n elements: the plain image and the repacked one. */
static size_t q51_r16_image_bytes(int64_t n, int64_t n_rows)
{
    return (size_t)(n / KQ_QK5_1) * sizeof(struct q5_1_block) * (size_t)n_rows;
}

void q51_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / KQ_QK5_1;
    const size_t row_bytes = (size_t)nb * sizeof(struct q5_1_block);
    const int64_t n_groups = n_rows / Q51_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q51_R16_ROWS * row_bytes;
        struct q51_r16_block *o =
            (struct q51_r16_block *)((char *)dst + (size_t)g * Q51_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++) {
            /* fifth bits of the low and high nibbles of qs[k], byte 4r + c at bit 4r + c */
            uint64_t lo[4] = {0}, hi[4] = {0};
            for (int r = 0; r < Q51_R16_ROWS; r++) {
                const struct q5_1_block *x =
                    (const struct q5_1_block *)(rows + (size_t)r * row_bytes) + i;
                o->d[r] = x->d;
                o->m[r] = x->m;
                uint32_t qh;
                memcpy(&qh, x->qh, 4);
                for (int k = 0; k < 4; k++) {
                    memcpy(&o->qs[k][4 * r], x->qs + 4 * k, 4);
                    for (int c = 0; c < 4; c++) {
                        lo[k] |= (uint64_t)(qh >> (4 * k + c) & 1) << (4 * r + c);
                        hi[k] |= (uint64_t)(qh >> (16 + 4 * k + c) & 1) << (4 * r + c);
                    }
                }
            }
            for (int k = 0; k < 4; k++)
                for (int b = 0; b < 8; b++) {
                    o->qh[2 * k][b] = (uint8_t)(lo[k] >> (8 * b));
                    o->qh[2 * k + 1][b] = (uint8_t)(hi[k] >> (8 * b));
                }
        }
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q51_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done, q51_r16_image_bytes(n, n_rows) - done);
}

/* The 16 rows' d and m of every block. */
#define Q51_R16_D(r)                                                                               \
    {                                                                                              \
        offsetof(struct q51_r16_block, d) + 2 * (r), 0, "d (row " #r ")"                           \
    }
#define Q51_R16_M(r)                                                                               \
    {                                                                                              \
        offsetof(struct q51_r16_block, m) + 2 * (r), 0, "m (row " #r ")"                           \
    }
#define Q51_R16_FIELD(r) Q51_R16_D(r), Q51_R16_M(r)
static const struct kq_scale_field q51_r16_fields[] = {
    Q51_R16_FIELD(0),  Q51_R16_FIELD(1),  Q51_R16_FIELD(2),  Q51_R16_FIELD(3),
    Q51_R16_FIELD(4),  Q51_R16_FIELD(5),  Q51_R16_FIELD(6),  Q51_R16_FIELD(7),
    Q51_R16_FIELD(8),  Q51_R16_FIELD(9),  Q51_R16_FIELD(10), Q51_R16_FIELD(11),
    Q51_R16_FIELD(12), Q51_R16_FIELD(13), Q51_R16_FIELD(14), Q51_R16_FIELD(15),
};
#undef Q51_R16_D
#undef Q51_R16_M
#undef Q51_R16_FIELD

/* Whole blocks of 16 rows only, each scale finite as Q5_1's validate wants: where an
 * image's plain tail rows start depends on the row length, which a validate is not given
 * (the plain rows are validated as Q5_1 before they are repacked). */
static enum splash_status q51_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    return kq_validate_blocks("Q5_1_R16", data, n_bytes, n_elems, Q51_R16_ROWS * KQ_QK5_1,
                              sizeof(struct q51_r16_block), q51_r16_fields,
                              sizeof q51_r16_fields / sizeof q51_r16_fields[0], err);
}

/* Value j's code (0..31) of a plain Q5_1 block. */
static int q51_r16_code(const struct q5_1_block *x, int j)
{
    const int nib = j < 16 ? x->qs[j] & 0xF : x->qs[j - 16] >> 4;
    return nib | (x->qh[j / 8] >> (j % 8) & 1) << 4;
}

/* Block by block, each the 16 rows' 32 values row by row, with Q5_1's arithmetic. */
static void q51_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q51_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q51_R16_ROWS * KQ_QK5_1); i++) {
        for (int r = 0; r < Q51_R16_ROWS; r++, out += KQ_QK5_1) {
            struct q5_1_block x;
            q51_r16_unpack_row(&b[i], r, &x);
            const float d = kq_h2f(x.d), m = kq_h2f(x.m);
            for (int j = 0; j < KQ_QK5_1; j++)
                out[j] = q51_r16_code(&x, j) * d + m;
        }
    }
}

/* One plain block against one Q8_1 block in ggml's block order (q5_1.c's scalar row):
 * the exact integer sum, then sum + ((d_w d_a) sumi + m s_a) in separate float steps. */
static float q51_r16_block_step(const struct q5_1_block *x, const struct splash_q8_1_block *y,
                                float sum)
{
    int sumi = 0;
    for (int j = 0; j < KQ_QK5_1; j++)
        sumi += q51_r16_code(x, j) * y->qs[j];
    const float part = (kq_h2f(x->d) * kq_h2f(y->d)) * (float)sumi;
    const float min = kq_h2f(x->m) * kq_h2f(y->s);
    return sum + (part + min);
}

/* The reference: every (weight row, activation row) pair summed block by block, the group
 * rows unpacked from the image and the rows after the last whole group as they are. */
void q51_r16_mul_q8_1_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / KQ_QK5_1;
    const int64_t n_full = n_w / Q51_R16_ROWS * Q51_R16_ROWS;
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_1_block *y =
            (const struct splash_q8_1_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += Q51_R16_ROWS) {
            const struct q51_r16_block *b =
                (const struct q51_r16_block *)((const char *)w + (size_t)g * w_stride);
            for (int r = 0; r < Q51_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct q5_1_block x;
                    q51_r16_unpack_row(&b[i], r, &x);
                    sum = q51_r16_block_step(&x, &y[i], sum);
                }
                o[g + r] = sum;
            }
        }
        for (int64_t i = n_full; i < n_w; i++) {
            const struct q5_1_block *x =
                (const struct q5_1_block *)((const char *)w + (size_t)i * w_stride);
            float sum = 0;
            for (int64_t k = 0; k < nb; k++)
                sum = q51_r16_block_step(&x[k], &y[k], sum);
            o[i] = sum;
        }
    }
}

/* ---- descriptor ---------------------------------------------------------------- */

static const struct splash_kernel_row q51_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q51_r16_mul_q8_1_avx512},
#endif
    {0, "scalar", NULL, q51_r16_mul_q8_1_ref},
};

const struct splash_format_type kq_q5_1_r16_type = {
    .name = "Q5_1_R16",
    .gguf_type = -1,
    .block_elems = Q51_R16_ROWS * KQ_QK5_1,
    .block_bytes = sizeof(struct q51_r16_block),
    .bits_per_weight = 6.0f,
    .act_type = "Q8_1",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q51_r16_validate,
    .to_float = q51_r16_to_float,
    .rows = q51_r16_rows,
    .n_rows = sizeof q51_r16_rows / sizeof q51_r16_rows[0],
    .row_group = Q51_R16_ROWS,
};
