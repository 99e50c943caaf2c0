/* NVFP4 blocks (GGUF type 40 and NVFP4_G, which carries the tensor scale g),
 * FP8 E4M3 blocks, and the kernel rows the plugin's files provide. */
#ifndef SPLASH_FORMATS_NVFP4_H
#define SPLASH_FORMATS_NVFP4_H

#include <stddef.h>
#include <stdint.h>

#include "splash/mul_rows.h"
#include <string.h>

#include "splash/act.h"
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

/* The shared mul_rows driver (include/splash/mul_rows.h) under this plugin's names. */
#define NVFP4_MAX_ACT_ROWS SPLASH_MAX_ACT_ROWS
#define NVFP4_UNROLL_ROWS SPLASH_UNROLL_ROWS
#define NVFP4_MUL_ROWS_DRIVER SPLASH_MUL_ROWS_DRIVER
#define NVFP4_ROW_FNS SPLASH_ROW_FNS

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
