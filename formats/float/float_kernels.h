/* Kernel rows of the float plugin (F32, F16, BF16), shared by its ISA files. */
#ifndef SPLASH_FORMATS_FLOAT_KERNELS_H
#define SPLASH_FORMATS_FLOAT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "splash/mul_rows.h"

/* The shared mul_rows driver (include/splash/mul_rows.h) under this plugin's names. */
#define FLOAT_MAX_ACT_ROWS SPLASH_MAX_ACT_ROWS
#define FLOAT_UNROLL_ROWS SPLASH_UNROLL_ROWS
#define FLOAT_MUL_ROWS_DRIVER SPLASH_MUL_ROWS_DRIVER
#define FLOAT_ROW_FNS SPLASH_ROW_FNS

#if defined(__x86_64__)
FLOAT_ROW_FNS(float_f32_avx2);
FLOAT_ROW_FNS(float_f16_avx2);
FLOAT_ROW_FNS(float_bf16_avx2);
FLOAT_ROW_FNS(float_f32_avx512);
FLOAT_ROW_FNS(float_f16_avx512);
FLOAT_ROW_FNS(float_bf16_avx512bf16);
#endif

#endif
