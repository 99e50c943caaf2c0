/* The pq2 plugin's format descriptors and the CPU bits its SIMD rows need. */
#ifndef SPLASH_PQ2_TYPES_H
#define SPLASH_PQ2_TYPES_H

#include "splash/format.h"
#include "splash/host.h"

#define PQ2_CPU_AVX2_ROW (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)
#define PQ2_CPU_AVX512_ROW                                                                         \
    (PQ2_CPU_AVX2_ROW | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |          \
     SPLASH_CPU_AVX512DQ | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI)

extern const struct splash_format_type pq2_q2_0_type;
extern const struct splash_format_type pq2_pq2_0_type;
extern const struct splash_format_type pq2_q2_0_r16_type;
extern const struct splash_format_type pq2_pq2_0_r16_type;

#endif
