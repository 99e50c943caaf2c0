/* Q2_0_R16: the load-time layout of Q2_0 the AVX-512 VNNI kernels read fastest
 * (q20_r16.h). This file holds the layout's repack, validate, to_float and scalar
 * reference kernel for plain blocks of qk values, and the Q2_0_R16 descriptor; the SIMD
 * kernel is in q20_r16_avx512.c. */
#include "formats/pq2/q20_r16.h"

#include <inttypes.h>
#include <math.h>

#include "formats/pq2/pq2.h"
#include "formats/pq2/pq2_types.h"
#include "splash/format.h"
#include "splash/fp.h"

/* ---- layout ------------------------------------------------------------------- */

void q20_r16_repack_qk(int qk, int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / qk;
    const size_t bb = Q20_R16_PLAIN(qk), row_bytes = (size_t)nb * bb;
    const int64_t n_groups = n_rows / Q20_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *rows = (const uint8_t *)src + (size_t)g * Q20_R16_ROWS * row_bytes;
        uint8_t *o = (uint8_t *)dst + (size_t)g * Q20_R16_ROWS * row_bytes;
        memset(o, 0, Q20_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o += Q20_R16_BLOCK(qk))
            for (int l = 0; l < Q20_R16_ROWS; l++)
                q20_r16_pack_row(qk, rows + (size_t)l * row_bytes + (size_t)i * bb, l, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q20_R16_ROWS * row_bytes;
    memcpy((uint8_t *)dst + done, (const uint8_t *)src + done, (size_t)n_rows * row_bytes - done);
}

/* A repacked image has the plain rows' size; where its groups end (and so where its scale
 * bytes are) depends on the row length, which validate is not given, so only the size is
 * checked here: the engine makes the image at load from rows the plain type's validate has
 * accepted (no NaN or Inf d). */
enum splash_status q20_r16_validate_qk(const char *name, int qk, const void *data, size_t n_bytes,
                                       int64_t n_elems, struct splash_err *err)
{
    if (n_elems < 0 || n_elems % qk)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %" PRId64 " values is not a whole number of %d-value blocks",
                              name, n_elems, qk);
    const size_t want = (size_t)(n_elems / qk) * Q20_R16_PLAIN(qk);
    if (n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %" PRId64 " values, expected %zu", name, n_bytes,
                              n_elems, want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: no data", name);
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' qk values row by row, with the plain arithmetic
 * d (q - 1). */
void q20_r16_to_float_qk(int qk, const void *blocks, float *out, int64_t n)
{
    const uint8_t *b = blocks;
    uint8_t x[Q20_R16_PLAIN(PQ2_QK_PQ2_0)];
    for (int64_t i = 0; i < n / (Q20_R16_ROWS * qk); i++, b += Q20_R16_BLOCK(qk))
        for (int l = 0; l < Q20_R16_ROWS; l++, out += qk) {
            q20_r16_unpack_row(qk, b, l, x);
            const float d = splash_fp16_to_fp32((uint16_t)(x[0] | x[1] << 8));
            for (int e = 0; e < qk; e++)
                out[e] = d * (float)(((x[2 + e / 4] >> (2 * (e % 4))) & 3) - 1);
        }
}

/* ---- scalar reference ------------------------------------------------------------ */

/* acc plus one plain block's dot with its qk / 32 Q8_0 blocks, in the kernels' float steps
 * (q20_r16.h): the Q8_0 blocks' exact integer sums times their d, summed in order, then
 * times d_w into acc. */
static float q20_r16_block_dot(int qk, const uint8_t *x, const struct splash_q8_0_block *y,
                               float acc)
{
    float u = 0.0f;
    for (int h = 0; h < qk / SPLASH_QK8_0; h++) {
        int isum = 0;
        for (int j = 0; j < SPLASH_QK8_0; j++) {
            const int e = SPLASH_QK8_0 * h + j;
            isum += (((x[2 + e / 4] >> (2 * (e % 4))) & 3) - 1) * y[h].qs[j];
        }
        const float da = splash_fp16_to_fp32(y[h].d);
        u = h == 0 ? (float)isum * da : fmaf((float)isum, da, u);
    }
    return fmaf(u, splash_fp16_to_fp32((uint16_t)(x[0] | x[1] << 8)), acc);
}

void q20_r16_mul_ref_qk(int qk, PQ2_DECL_DOT((*plain_dot)), int64_t n, const void *w,
                        size_t w_stride, int64_t n_w, const void *act, size_t act_stride,
                        int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / qk;
    const int64_t n_full = n_w / Q20_R16_ROWS * Q20_R16_ROWS;
    uint8_t x[Q20_R16_PLAIN(PQ2_QK_PQ2_0)];
    for (int64_t j = 0; j < n_act; j++) {
        const struct splash_q8_0_block *y =
            (const struct splash_q8_0_block *)((const char *)act + (size_t)j * act_stride);
        float *o = out + (size_t)j * out_stride;
        for (int64_t g = 0; g < n_full; g += Q20_R16_ROWS) {
            const uint8_t *grp = (const uint8_t *)w + (size_t)g * w_stride;
            for (int l = 0; l < Q20_R16_ROWS; l++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    q20_r16_unpack_row(qk, grp + (size_t)i * Q20_R16_BLOCK(qk), l, x);
                    acc = q20_r16_block_dot(qk, x, y + i * (qk / SPLASH_QK8_0), acc);
                }
                o[g + l] = acc;
            }
        }
        /* the rows after the last whole group are plain rows */
        for (int64_t i = n_full; i < n_w; i++)
            plain_dot(n, &o[i], (const char *)w + (size_t)i * w_stride, y);
    }
}

/* ---- Q2_0_R16 ------------------------------------------------------------------- */

void q20_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    q20_r16_repack_qk(PQ2_QK_Q2_0, n, src, n_rows, dst);
}

static enum splash_status q20_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    return q20_r16_validate_qk("Q2_0_R16", PQ2_QK_Q2_0, data, n_bytes, n_elems, err);
}

static void q20_r16_to_float(const void *blocks, float *out, int64_t n)
{
    q20_r16_to_float_qk(PQ2_QK_Q2_0, blocks, out, n);
}

void q20_r16_mul_q8_0_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                          size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    q20_r16_mul_ref_qk(PQ2_QK_Q2_0, pq2_q2_0_dot_q8_0_ref, n, w, w_stride, n_w, act, act_stride,
                       n_act, out, out_stride);
}

static const struct splash_kernel_row q20_r16_rows[] = {
#if defined(__x86_64__)
    {PQ2_CPU_AVX512_ROW, "avx512vnni", NULL, q20_r16_mul_q8_0_avx512},
#endif
    {0, "scalar", NULL, q20_r16_mul_q8_0_ref},
};

const struct splash_format_type pq2_q2_0_r16_type = {
    .name = "Q2_0_R16",
    .gguf_type = -1,
    .block_elems = Q20_R16_ROWS * PQ2_QK_Q2_0,
    .block_bytes = Q20_R16_BLOCK(PQ2_QK_Q2_0),
    .bits_per_weight = 2.25f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q20_r16_validate,
    .to_float = q20_r16_to_float,
    .rows = q20_r16_rows,
    .n_rows = sizeof q20_r16_rows / sizeof q20_r16_rows[0],
    .row_group = Q20_R16_ROWS,
};
