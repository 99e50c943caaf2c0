/* MXFP4 rows for Armv8.2 with the dot product extension (asimddp): sdot sums four int8
 * products into each int32 lane. The Makefile compiles this file with +dotprod. */
#define MXFP4_NEON_FN(name) mxfp4_q8_neon_dotprod_##name
#define MXFP4_DOT16(acc, a, b) ((acc) = vdotq_s32((acc), (a), (b)))
#include "formats/mxfp4/mxfp4_neon.h"
