/* PQ2_0_R16: PQ2_0 rows (128-value blocks) in Q2_0_R16's load-time layout (q20_r16.h,
 * whose routines take the block length): the descriptor and its thin wrappers. The SIMD
 * kernel is q20_r16_avx512.c's, instantiated for 128-value blocks. */
#include "formats/pq2/pq2.h"
#include "formats/pq2/pq2_types.h"
#include "formats/pq2/q20_r16.h"
#include "splash/format.h"

void pq20_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    q20_r16_repack_qk(PQ2_QK_PQ2_0, n, src, n_rows, dst);
}

static enum splash_status pq20_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                            struct splash_err *err)
{
    return q20_r16_validate_qk("PQ2_0_R16", PQ2_QK_PQ2_0, data, n_bytes, n_elems, err);
}

static void pq20_r16_to_float(const void *blocks, float *out, int64_t n)
{
    q20_r16_to_float_qk(PQ2_QK_PQ2_0, blocks, out, n);
}

void pq20_r16_mul_q8_0_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                           size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    q20_r16_mul_ref_qk(PQ2_QK_PQ2_0, pq2_pq2_0_dot_q8_0_ref, n, w, w_stride, n_w, act, act_stride,
                       n_act, out, out_stride);
}

static const struct splash_kernel_row pq20_r16_rows[] = {
#if defined(__x86_64__)
    {PQ2_CPU_AVX512_ROW, "avx512vnni", NULL, pq20_r16_mul_q8_0_avx512},
#endif
    {0, "scalar", NULL, pq20_r16_mul_q8_0_ref},
};

const struct splash_format_type pq2_pq2_0_r16_type = {
    .name = "PQ2_0_R16",
    .gguf_type = -1,
    .block_elems = Q20_R16_ROWS * PQ2_QK_PQ2_0,
    .block_bytes = Q20_R16_BLOCK(PQ2_QK_PQ2_0),
    .bits_per_weight = 2.125f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = pq20_r16_validate,
    .to_float = pq20_r16_to_float,
    .rows = pq20_r16_rows,
    .n_rows = sizeof pq20_r16_rows / sizeof pq20_r16_rows[0],
    .row_group = Q20_R16_ROWS,
};
