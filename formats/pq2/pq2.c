/* Q2_0 and PQ2_0: validation, conversion, the reference quantizer and the scalar
 * kernels. The two types differ only in block length, so each routine takes it. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "formats/pq2/pq2.h"
#include "formats/pq2/pq2_types.h"
#include "formats/pq2/q20_r16.h"
#include "splash/format.h"
#include "splash/fp.h"

/* The block of qk weights at index i of a row: fp16 d, then qk / 4 code bytes. */
static inline const uint8_t *pq2_block_at(const void *row, int64_t i, int qk)
{
    return (const uint8_t *)row + (size_t)i * (size_t)(2 + qk / 4);
}

static inline uint16_t pq2_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline int pq2_code(const uint8_t *qs, int j)
{
    return (qs[j >> 2] >> (2 * (j & 3))) & 3;
}

static enum splash_status pq2_validate_qk(const char *name, int qk, const void *data,
                                          size_t n_bytes, int64_t n_elems,
                                          struct splash_err *err)
{
    const size_t block_bytes = (size_t)(2 + qk / 4);
    if (n_elems < 0 || n_elems % qk)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %" PRId64 " values is not a whole number of %d-value blocks",
                              name, n_elems, qk);
    const int64_t n_blocks = n_elems / qk;
    if (n_bytes != (size_t)n_blocks * block_bytes)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %" PRId64 " values, expected %zu", name, n_bytes,
                              n_elems, (size_t)n_blocks * block_bytes);
    for (int64_t i = 0; i < n_blocks; i++) {
        const uint16_t d = pq2_load_u16(pq2_block_at(data, i, qk));
        if ((d & 0x7c00u) == 0x7c00u)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s block %" PRId64 ": scale d is %s",
                                  name, i, (d & 0x3ffu) ? "NaN" : "Inf");
    }
    return SPLASH_OK;
}

static void pq2_to_float_qk(int qk, const void *blocks, float *out, int64_t n)
{
    for (int64_t i = 0; i < n / qk; i++, out += qk) {
        const uint8_t *b = pq2_block_at(blocks, i, qk);
        const float d = splash_fp16_to_fp32(pq2_load_u16(b));
        for (int j = 0; j < qk; j++)
            out[j] = d * (float)(pq2_code(b + 2, j) - 1);
    }
}

/* ggml's quantize_row_q2_0_ref rounding: d = max |x| over the block, code =
 * clamp(round(x / d) + 1, 0, 3) with round half away from zero and x / d taken as
 * x * (1 / d); d is stored as fp16 but the codes use the float d. In-range data never
 * reaches code 3 (+2 d); an all-zero block gets d = 0 and code 1. */
static void pq2_from_float_qk(int qk, const float *x, void *blocks, int64_t n)
{
    uint8_t *b = blocks;
    for (int64_t i = 0; i < n / qk; i++, x += qk, b += 2 + qk / 4) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
        const uint16_t dh = splash_fp32_to_fp16(amax);
        b[0] = (uint8_t)(dh & 0xff);
        b[1] = (uint8_t)(dh >> 8);
        memset(b + 2, 0, (size_t)qk / 4);
        for (int j = 0; j < qk; j++) {
            int q = (int)roundf(x[j] * id) + 1;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            b[2 + j / 4] |= (uint8_t)(q << (2 * (j & 3)));
        }
    }
}

/* Σ over blocks of d_w Σ over its Q8_0 blocks of d_a Σ (q - 1) a, each inner sum exact
 * in integers. */
static void pq2_dot_qk(int qk, int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct splash_q8_0_block *y = act_row;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk; i++) {
        const uint8_t *b = pq2_block_at(w_row, i, qk);
        const float dw = splash_fp16_to_fp32(pq2_load_u16(b));
        for (int k = 0; k < qk / SPLASH_QK8_0; k++, y++) {
            int sumi = 0;
            for (int j = 0; j < SPLASH_QK8_0; j++)
                sumi += (pq2_code(b + 2, k * SPLASH_QK8_0 + j) - 1) * y->qs[j];
            sum += (float)sumi * (dw * splash_fp16_to_fp32(y->d));
        }
    }
    *s = sum;
}

/* ---- Q2_0 ----------------------------------------------------------------- */

static enum splash_status pq2_q2_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                            struct splash_err *err)
{
    return pq2_validate_qk("Q2_0", PQ2_QK_Q2_0, data, n_bytes, n_elems, err);
}

static void pq2_q2_0_to_float(const void *blocks, float *out, int64_t n)
{
    pq2_to_float_qk(PQ2_QK_Q2_0, blocks, out, n);
}

static void pq2_q2_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    pq2_from_float_qk(PQ2_QK_Q2_0, x, blocks, n);
}

void pq2_q2_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_dot_qk(PQ2_QK_Q2_0, n, s, w_row, act_row);
}

static const struct splash_kernel_row pq2_q2_0_rows[] = {
#if defined(__x86_64__)
    {PQ2_CPU_AVX512_ROW, "avx512vnni", pq2_q2_0_dot_q8_0_avx512, pq2_q2_0_mul_q8_0_avx512},
    {PQ2_CPU_AVX2_ROW, "avx2", pq2_q2_0_dot_q8_0_avx2, pq2_q2_0_mul_q8_0_avx2},
#endif
    {0, "scalar", pq2_q2_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type pq2_q2_0_type = {
    .name = "Q2_0",
    .gguf_type = 42,
    .block_elems = PQ2_QK_Q2_0,
    .block_bytes = sizeof(struct pq2_q2_0_block),
    .bits_per_weight = 2.25f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .validate = pq2_q2_0_validate,
    .to_float = pq2_q2_0_to_float,
    .from_float = pq2_q2_0_from_float,
    .rows = pq2_q2_0_rows,
    .n_rows = sizeof pq2_q2_0_rows / sizeof pq2_q2_0_rows[0],
    .repack_to = "Q2_0_R16",
    .repack = q20_r16_repack,
};

/* ---- PQ2_0 ---------------------------------------------------------------- */

static enum splash_status pq2_pq2_0_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                             struct splash_err *err)
{
    return pq2_validate_qk("PQ2_0", PQ2_QK_PQ2_0, data, n_bytes, n_elems, err);
}

static void pq2_pq2_0_to_float(const void *blocks, float *out, int64_t n)
{
    pq2_to_float_qk(PQ2_QK_PQ2_0, blocks, out, n);
}

static void pq2_pq2_0_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    pq2_from_float_qk(PQ2_QK_PQ2_0, x, blocks, n);
}

void pq2_pq2_0_dot_q8_0_ref(int64_t n, float *s, const void *w_row, const void *act_row)
{
    pq2_dot_qk(PQ2_QK_PQ2_0, n, s, w_row, act_row);
}

static const struct splash_kernel_row pq2_pq2_0_rows[] = {
#if defined(__x86_64__)
    {PQ2_CPU_AVX512_ROW, "avx512vnni", pq2_pq2_0_dot_q8_0_avx512, pq2_pq2_0_mul_q8_0_avx512},
    {PQ2_CPU_AVX2_ROW, "avx2", pq2_pq2_0_dot_q8_0_avx2, pq2_pq2_0_mul_q8_0_avx2},
#endif
    {0, "scalar", pq2_pq2_0_dot_q8_0_ref, NULL},
};

const struct splash_format_type pq2_pq2_0_type = {
    .name = "PQ2_0",
    .gguf_type = 142,
    .block_elems = PQ2_QK_PQ2_0,
    .block_bytes = sizeof(struct pq2_pq2_0_block),
    .bits_per_weight = 2.125f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .validate = pq2_pq2_0_validate,
    .to_float = pq2_pq2_0_to_float,
    .from_float = pq2_pq2_0_from_float,
    .rows = pq2_pq2_0_rows,
    .n_rows = sizeof pq2_pq2_0_rows / sizeof pq2_pq2_0_rows[0],
    .repack_to = "PQ2_0_R16",
    .repack = pq20_r16_repack,
};
