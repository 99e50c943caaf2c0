/* NVFP4 blocks (GGUF type 40 and NVFP4_G, which carries the tensor scale g),
 * FP8 E4M3 blocks, and the kernel rows the plugin's files provide. */
#ifndef SPLASH_FORMATS_NVFP4_H
#define SPLASH_FORMATS_NVFP4_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/kquants/q8_blocks.h"
#include "splash/status.h"

struct splash_planes;

#define NVFP4_QK 64   /* values per GGUF block */
#define NVFP4_SUB 16  /* values per E4M3 scale */
#define NVFP4G_QK 256 /* values per NVFP4_G block */
#define FP8_QK 128    /* values per FP8_E4M3 block */

/* GGUF block_nvfp4. Sub-block s holds values 16s..16s+15 in qs[8s..8s+7]: value
 * 16s + j is the low nibble of qs[8s + j], value 16s + j + 8 its high nibble. */
struct nvfp4_block {
    uint8_t d[4];   /* UE4M3 scale per 16 values: bit 7 ignored, 0x7f reads as 0 */
    uint8_t qs[32]; /* E2M1 codes */
};
_Static_assert(sizeof(struct nvfp4_block) == 36, "NVFP4 block is 36 bytes");

/* Four GGUF blocks and the tensor scale g they share (ModelOpt's weight_scale_2,
 * compressed-tensors' 1 / weight_global_scale, 1 for MLX): 4.625 bits per weight. */
struct nvfp4g_block {
    float g;
    struct nvfp4_block b[4];
};
_Static_assert(sizeof(struct nvfp4g_block) == 148, "NVFP4_G block is 148 bytes");

/* FP8 E4M3 (OCP "fn") values times the block's g: a tensor's or a row's scale. */
struct fp8_block {
    float g;
    uint8_t q[FP8_QK];
};
_Static_assert(sizeof(struct fp8_block) == 132, "FP8_E4M3 block is 132 bytes");

/* E2M1 values doubled (the OCP MX FP4 values times two), paired with half scales
 * so dots are integer sums, as GGUF readers compute them. */
static const int8_t nvfp4_e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Half the UE4M3 scale, as GGUF's NVFP4 reads it: 0 and 0x7f are 0, bit 7 is not
 * looked at otherwise. Bit-built: (1 + m/8) 2^(e-8), or m 2^-10 when e is 0. */
static inline float nvfp4_ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7f)
        return 0.0f;
    uint32_t e = (x >> 3) & 0xfu, m = x & 0x7u;
    if (e == 0)
        return (float)m * 0x1p-10f;
    uint32_t bits = (e + 119u) << 23 | m << 20;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* FP8 E4M3 -> float, exact (0x7f and 0xff, NaN, are refused by validate). */
static inline float nvfp4_e4m3_value(uint8_t v)
{
    uint32_t e = (v >> 3) & 0xfu, m = v & 0x7u;
    float f;
    if (e == 0) {
        f = (float)m * 0x1p-9f;
    } else {
        uint32_t bits = (e + 120u) << 23 | m << 20;
        memcpy(&f, &bits, sizeof f);
    }
    return (v & 0x80) ? -f : f;
}

/* Most activation rows one mul_rows pass keeps in registers. */
#define NVFP4_MAX_ACT_ROWS 8
/* Loops over the pass's activation rows must unroll for the accumulators to stay in
 * registers (GCC keeps an array it indexes in a loop in memory). */
#define NVFP4_UNROLL_ROWS _Pragma("GCC unroll 8")

/* Calls fn(n, w_row, act_rows, act_stride, out, out_stride, NR) for every weight row and
 * every chunk of up to NVFP4_MAX_ACT_ROWS activation rows, NR a compile-time constant. */
#define NVFP4_MUL_ROWS_DRIVER(fn, n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride)   \
    do {                                                                                           \
        for (int64_t j0_ = 0; j0_ < (n_act); j0_ += NVFP4_MAX_ACT_ROWS) {                          \
            int64_t left_ = (n_act) - j0_;                                                         \
            int nr_ = left_ < NVFP4_MAX_ACT_ROWS ? (int)left_ : NVFP4_MAX_ACT_ROWS;                \
            const char *a_ = (const char *)(act) + (size_t)j0_ * (act_stride);                     \
            for (int64_t i_ = 0; i_ < (n_w); i_++) {                                               \
                const void *w_ = (const char *)(w) + (size_t)i_ * (w_stride);                      \
                float *o_ = (out) + (size_t)j0_ * (out_stride) + (size_t)i_;                       \
                switch (nr_) {                                                                     \
                case 1: fn(n, w_, a_, act_stride, o_, out_stride, 1); break;                       \
                case 2: fn(n, w_, a_, act_stride, o_, out_stride, 2); break;                       \
                case 3: fn(n, w_, a_, act_stride, o_, out_stride, 3); break;                       \
                case 4: fn(n, w_, a_, act_stride, o_, out_stride, 4); break;                       \
                case 5: fn(n, w_, a_, act_stride, o_, out_stride, 5); break;                       \
                case 6: fn(n, w_, a_, act_stride, o_, out_stride, 6); break;                       \
                case 7: fn(n, w_, a_, act_stride, o_, out_stride, 7); break;                       \
                default: fn(n, w_, a_, act_stride, o_, out_stride, 8); break;                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define NVFP4_ROW_FNS(prefix)                                                                      \
    void prefix##_dot(int64_t n, float *s, const void *w_row, const void *act_row);                \
    void prefix##_mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w,                 \
                           const void *act, size_t act_stride, int64_t n_act, float *out,          \
                           size_t out_stride)

#if defined(__x86_64__)
NVFP4_ROW_FNS(nvfp4_q8_avx2);
NVFP4_ROW_FNS(nvfp4g_q8_avx2);
NVFP4_ROW_FNS(nvfp4_q8_avx512vnni);
NVFP4_ROW_FNS(nvfp4g_q8_avx512vnni);
NVFP4_ROW_FNS(nvfp4_fp8_f32_avx2);
NVFP4_ROW_FNS(nvfp4_fp8_f32_avx512);
#endif

/* nvfp4_import.c: checkpoint planes into NVFP4_G and FP8_E4M3 blocks. */
enum splash_status nvfp4_g_import_planes(const struct splash_planes *src, void *dst_blocks,
                                         struct splash_err *err);
enum splash_status nvfp4_fp8_import_planes(const struct splash_planes *src, void *dst_blocks,
                                           struct splash_err *err);

#endif
