/* kquants rows for Armv8.2 with the dot product extension (asimddp): sdot sums four int8
 * products into each int32 lane. The Makefile compiles this file with +dotprod. */
#define KQ_NEON_FN(name) name##_neon_dotprod
#define KQ_DOT16(acc, a, b) ((acc) = vdotq_s32((acc), (a), (b)))
#include "formats/kquants/kq_neon.h"
