/* Q2_0 (GGUF type 42) and PQ2_0 (Prism ML's type 142): 2-bit codes q worth d (q - 1),
 * one fp16 d per 64 (Q2_0) or 128 (PQ2_0) weights. Element j of a block is bits
 * 2 (j % 4) .. 2 (j % 4) + 1 of qs[j / 4] (checked against ggml's q2_0 vectors in
 * testdata/quant). Activations are Q8_0 (splash/act.h). */
#ifndef SPLASH_PQ2_H
#define SPLASH_PQ2_H

#include <stddef.h>
#include <stdint.h>

#include "splash/act.h"

#define PQ2_QK_Q2_0 64
#define PQ2_QK_PQ2_0 128

struct pq2_q2_0_block {
    uint16_t d; /* fp16 */
    uint8_t qs[PQ2_QK_Q2_0 / 4];
};
_Static_assert(sizeof(struct pq2_q2_0_block) == 18, "Q2_0 block is 18 bytes");

struct pq2_pq2_0_block {
    uint16_t d; /* fp16 */
    uint8_t qs[PQ2_QK_PQ2_0 / 4];
};
_Static_assert(sizeof(struct pq2_pq2_0_block) == 34, "PQ2_0 block is 34 bytes");

#define PQ2_DECL_DOT(fn) void fn(int64_t n, float *s, const void *w_row, const void *act_row)
#define PQ2_DECL_MUL(fn)                                                                           \
    void fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,              \
            size_t act_stride, int64_t n_act, float *out, size_t out_stride)

/* scalar references (pq2.c) */
PQ2_DECL_DOT(pq2_q2_0_dot_q8_0_ref);
PQ2_DECL_DOT(pq2_pq2_0_dot_q8_0_ref);

#if defined(__x86_64__)
/* pq2_avx2.c: AVX2 + FMA */
PQ2_DECL_DOT(pq2_q2_0_dot_q8_0_avx2);
PQ2_DECL_DOT(pq2_pq2_0_dot_q8_0_avx2);
PQ2_DECL_MUL(pq2_q2_0_mul_q8_0_avx2);
PQ2_DECL_MUL(pq2_pq2_0_mul_q8_0_avx2);
/* pq2_avx512.c: AVX-512 F/BW/VL + VNNI + VBMI */
PQ2_DECL_DOT(pq2_q2_0_dot_q8_0_avx512);
PQ2_DECL_DOT(pq2_pq2_0_dot_q8_0_avx512);
PQ2_DECL_MUL(pq2_q2_0_mul_q8_0_avx512);
PQ2_DECL_MUL(pq2_pq2_0_mul_q8_0_avx512);
#endif

#endif
