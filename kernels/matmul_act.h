/* Fast activation quantizers of the matrix products, byte-identical to the activation
 * format's reference from_float (tests/test-kernels.c checks them against it). */
#ifndef SPLASH_KERNELS_MATMUL_ACT_H
#define SPLASH_KERNELS_MATMUL_ACT_H

#include <stdint.h>

#include "splash/act.h"

/* Q8_K (GGUF type 15): float d, int8 qs[256], int16 bsums[16] per 256 values. */
#define MATMUL_Q8K_GGUF_TYPE 15
#define MATMUL_Q8K_BYTES 292
/* Q8_0 (GGUF type 8): fp16 d, int8 qs[32] per 32 values. */
#define MATMUL_Q80_GGUF_TYPE 8
#define MATMUL_Q80_BYTES 34

/* Split Q8_0 (kernels/act_split.c): n values (whole Q8_0 blocks) as a high and a low row of
 * Q8_0 blocks, x ~ d_hi hi + d_lo lo with d_hi = 128 d_lo and lo in [0, 127]: together a
 * 15-bit quantization, each block's largest value at ACT_SPLIT_LEVELS steps. */
#define ACT_SPLIT_LEVELS 16383.0f
void splash_act_q8_0_split(const float *x, void *hi_blocks, void *lo_blocks, int64_t n);

#if defined(__x86_64__)
void splash_act_q8k_avx512(const float *x, void *blocks, int64_t n);
#elif defined(__aarch64__)
void splash_act_q8k_neon(const float *x, void *blocks, int64_t n);
void splash_act_q8_0_neon(const float *x, void *blocks, int64_t n);
#endif

#endif
