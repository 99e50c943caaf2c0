/* The affine plugin's format descriptors and the CPU bits its SIMD rows need. */
#ifndef SPLASH_AFFINE_TYPES_H
#define SPLASH_AFFINE_TYPES_H

#include <stdint.h>

#include "formats/affine/affine.h"
#include "splash/format.h"
#include "splash/host.h"

#define AFFINE_CPU_AVX2_ROW (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)
#define AFFINE_CPU_AVX512_ROW                                                                      \
    (AFFINE_CPU_AVX2_ROW | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |       \
     SPLASH_CPU_AVX512DQ | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI)

/* af2g32 .. af8g128 (plugin.c lists them in AFFINE_FOR_EACH order). */
#define AFFINE_DECL_TYPE(bits, group) extern const struct splash_format_type affine_b##bits##g##group##_type;
AFFINE_FOR_EACH(AFFINE_DECL_TYPE)
#undef AFFINE_DECL_TYPE

#endif
