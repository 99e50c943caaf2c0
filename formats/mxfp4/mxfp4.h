/* GGUF MXFP4 blocks (OCP microscaling FP4: E2M1 codes, one E8M0 scale per 32)
 * and the kernel rows the plugin's ISA files provide. */
#ifndef SPLASH_FORMATS_MXFP4_H
#define SPLASH_FORMATS_MXFP4_H

#include <stddef.h>
#include <stdint.h>

#include "splash/mul_rows.h"
#include <string.h>

#include "splash/act.h"

#define MXFP4_QK 32

/* Element j (j < 16) is the low nibble of qs[j], element j + 16 its high nibble. */
struct mxfp4_block {
    uint8_t e;      /* E8M0 scale: 2^(e - 127); 0xff is NaN */
    uint8_t qs[16]; /* E2M1 codes */
};
_Static_assert(sizeof(struct mxfp4_block) == 17, "MXFP4 block is 17 bytes");

/* E2M1 values doubled, so every code is a small integer: the values the OCP MX
 * specification defines for the 16 FP4 codes, times two. The block scale is
 * halved to match, as GGUF readers do, which keeps dots exact integer sums. */
static const int8_t mxfp4_e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128): half the E8M0 value, bit-built (2^-128 and 2^-127 are subnormal). */
static inline float mxfp4_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The shared mul_rows driver (include/splash/mul_rows.h) under this plugin's names;
 * its first argument here counts blocks. */
#define MXFP4_MAX_ACT_ROWS SPLASH_MAX_ACT_ROWS
#define MXFP4_UNROLL_ROWS SPLASH_UNROLL_ROWS
#define MXFP4_MUL_ROWS_DRIVER SPLASH_MUL_ROWS_DRIVER
#define MXFP4_ROW_FNS SPLASH_ROW_FNS

#if defined(__x86_64__)
MXFP4_ROW_FNS(mxfp4_q8_avx2);
MXFP4_ROW_FNS(mxfp4_q8_avx512vnni);
#endif
#if defined(__aarch64__)
MXFP4_ROW_FNS(mxfp4_q8_neon);         /* Armv8.0 Advanced SIMD */
MXFP4_ROW_FNS(mxfp4_q8_neon_dotprod); /* Armv8.2 sdot */
#endif

#endif
