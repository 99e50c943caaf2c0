/* AVX-512 VNNI kernel of Q4_1_R16 (q41_r16.h) against Q8_1 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * of a 64-entry table i & 15 takes the low nibbles out (the bits above a nibble do not
 * matter), and of the vpmultishiftqb-shifted bytes the high nibbles: the codes q in
 * 0..15, unsigned for vpdpbusd. Both run on port 5, beside vpdpbusd on port 0, where a
 * mask or shift would compete with it. One vpdpbusd of such a vector against 4
 * activation bytes broadcast from memory gives the 16 rows' exact sums of q a over 4
 * consecutive inputs: values 4l .. 4l + 3 of the block for the plain kernel's lane l
 * (q41_r16.h), so 8 of them give the 8 lane sums of 16 rows. Each is converted and
 * added by FMA, with the block's t = d_w d_a (two vcvtph2ps decode the 16 rows' d and m
 * from one 64-byte line), to its own lane total, and m s_a to a ninth; the end adds them
 * in the plain kernel's order. Lane r of every vector is row r: no horizontal sums.
 *
 * These are Q4_1's AVX2 kernel's float steps, so every (weight row, activation row) pair
 * gets its bits (and the scalar row's) in every tile of 1 or 2 activation rows. A tile
 * walks whole rows; a call takes each group's blocks from memory once, for its first
 * tile, and from L2 for the others (the per-call activation scales are converted once, on
 * the stack or the heap). A mat-vec streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/q41_r16.h"
#include "formats/kquants/r16_q8_1.h"
#include "splash/r16_q8_0.h"

#define INLINE static inline __attribute__((always_inline))
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches) prefetches into L2 this far ahead of the block it reads. */
#define R16_STREAM_BYTES (256u << 10)
#define R16_PREFETCH 4096

/* Q4_1's codes are the nibbles themselves. */
INLINE void q41_r16_codes(const struct q41_r16_block *b, int k, __m512i *lo, __m512i *hi)
{
    (void)b, (void)k, (void)lo, (void)hi;
}

R16_Q8_1_DEFINE_TILE(q41_r16_tile, struct q41_r16_block, q41_r16_codes)

/* the rows after the last whole group are the plain format's */
R16_Q8_1_DEFINE_MUL(q41_r16_mul_q8_1_avx512, struct q41_r16_block, KQ_QK4_1, q41_r16_tile,
                    q4_1_mul_q8_1_avx2, R16_STREAM_BYTES)
