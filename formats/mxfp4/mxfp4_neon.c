/* MXFP4 rows for Armv8.0 Advanced SIMD (no dot product): int8 products widen to int16
 * (vmull_s8, |w a| <= 12 * 128) and pairwise into int32 lanes. */
#define MXFP4_NEON_FN(name) mxfp4_q8_neon_##name
#define MXFP4_DOT16(acc, a, b)                                                                     \
    do {                                                                                           \
        const int8x16_t a_ = (a), b_ = (b);                                                        \
        (acc) = vpadalq_s16((acc), vmull_s8(vget_low_s8(a_), vget_low_s8(b_)));                    \
        (acc) = vpadalq_s16((acc), vmull_high_s8(a_, b_));                                         \
    } while (0)
#include "formats/mxfp4/mxfp4_neon.h"
