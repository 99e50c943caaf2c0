/* AVX-512 VNNI kernel of Q5_1_R16 (q51_r16.h) against Q8_1 activations.
 *
 * A group block's qs[k] holds row r's code bytes 4k .. 4k + 3 in int32 lane r. vpermb
 * of a 64-entry table i & 15 takes the low nibbles out (the bits above a nibble do not
 * matter), and of the vpmultishiftqb-shifted bytes the high nibbles; a byte add of 16
 * under the block's fifth-bit mask for that vector (loaded straight into a mask register)
 * completes the codes q in 0..31, unsigned for vpdpbusd. The lookups run on port 5,
 * beside vpdpbusd on port 0. One vpdpbusd of such a vector against 4 activation bytes
 * broadcast from memory adds the 16 rows' exact sums of q a over 4 consecutive inputs to
 * an int32 vector, so 8 of them give each row's block sum. That is converted, scaled by
 * the block's t = d_w d_a (two vcvtph2ps decode the 16 rows' d and m from one 64-byte
 * line), added to m s_a and then to the row's total, in separate float steps. Lane r of
 * every vector is row r: no horizontal sums.
 *
 * These are Q5_1's plain and scalar rows' float steps (ggml's block order, q5_1.c), so
 * every (weight row, activation row) pair gets their bits in every tile of 1 or 2
 * activation rows. A tile
 * walks whole rows; a call takes each group's blocks from memory once, for its first
 * tile, and from L2 for the others (the per-call activation scales are converted once, on
 * the stack or the heap). A mat-vec streaming its rows from memory prefetches ahead. */
#include <immintrin.h>
#include <stdlib.h>

#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/q51_r16.h"
#include "formats/kquants/r16_q8_1.h"
#include "splash/r16_q8_0.h"

#define INLINE static inline __attribute__((always_inline))
/* A mat-vec over more weight bytes than R16_STREAM_BYTES (a piece of a matrix larger than
 * the caches) prefetches into L2 this far ahead of the block it reads. */
#define R16_STREAM_BYTES (256u << 10)
#define R16_PREFETCH 4096

/* A fifth-bit mask of the block (q51_r16.h) as a mask register (one kmovq load). */
INLINE __mmask64 q51_r16_kmask(const uint8_t *qh)
{
    uint64_t v;
    memcpy(&v, qh, 8);
    return _cvtu64_mask64(v);
}

/* Q5_1's codes: the nibbles plus 16 where the block's fifth bit is set. */
INLINE void q51_r16_codes(const struct q51_r16_block *b, int k, __m512i *lo, __m512i *hi)
{
    const __m512i k16 = _mm512_set1_epi8(16);
    *lo = _mm512_mask_add_epi8(*lo, q51_r16_kmask(b->qh[2 * k]), *lo, k16);
    *hi = _mm512_mask_add_epi8(*hi, q51_r16_kmask(b->qh[2 * k + 1]), *hi, k16);
}

R16_Q8_1_DEFINE_TILE_BLOCKWISE(q51_r16_tile, struct q51_r16_block, q51_r16_codes)

/* the rows after the last whole group are the plain format's */
R16_Q8_1_DEFINE_MUL(q51_r16_mul_q8_1_avx512, struct q51_r16_block, KQ_QK5_1, q51_r16_tile,
                    q5_1_mul_q8_1_avx2, R16_STREAM_BYTES)
