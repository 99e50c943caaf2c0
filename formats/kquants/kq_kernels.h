/* Kernel entry points of the kquants plugin: <weight>_dot_<act>_<isa> computes
 * one dot product, <weight>_mul_<act>_<isa> fills an (n_act x n_w) block (see
 * struct splash_kernel_row). The _ref kernels are the scalar references. */
#ifndef SPLASH_KQUANTS_KERNELS_H
#define SPLASH_KQUANTS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define KQ_DECL_DOT(fn) void fn(int64_t n, float *s, const void *w_row, const void *act_row)
#define KQ_DECL_MUL(fn)                                                                            \
    void fn(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,              \
            size_t act_stride, int64_t n_act, float *out, size_t out_stride)

/* scalar references */
KQ_DECL_DOT(q4_0_dot_q8_0_ref);
KQ_DECL_DOT(q4_1_dot_q8_1_ref);
KQ_DECL_DOT(q5_0_dot_q8_0_ref);
KQ_DECL_DOT(q5_1_dot_q8_1_ref);
KQ_DECL_DOT(q8_0_dot_q8_0_ref);
KQ_DECL_DOT(q2k_dot_q8k_ref);
KQ_DECL_DOT(q3k_dot_q8k_ref);
KQ_DECL_DOT(q4k_dot_q8k_ref);
KQ_DECL_DOT(q5k_dot_q8k_ref);
KQ_DECL_DOT(q6k_dot_q8k_ref);

#if defined(__x86_64__)
/* AVX2 + FMA */
KQ_DECL_DOT(q4_0_dot_q8_0_avx2);
KQ_DECL_DOT(q4_1_dot_q8_1_avx2);
KQ_DECL_DOT(q5_0_dot_q8_0_avx2);
KQ_DECL_DOT(q5_1_dot_q8_1_avx2);
KQ_DECL_DOT(q8_0_dot_q8_0_avx2);
KQ_DECL_DOT(q2k_dot_q8k_avx2);
KQ_DECL_DOT(q3k_dot_q8k_avx2);
KQ_DECL_DOT(q4k_dot_q8k_avx2);
KQ_DECL_DOT(q5k_dot_q8k_avx2);
KQ_DECL_DOT(q6k_dot_q8k_avx2);
KQ_DECL_MUL(q4_0_mul_q8_0_avx2);
KQ_DECL_MUL(q4_1_mul_q8_1_avx2);
KQ_DECL_MUL(q5_0_mul_q8_0_avx2);
KQ_DECL_MUL(q5_1_mul_q8_1_avx2);
KQ_DECL_MUL(q8_0_mul_q8_0_avx2);
KQ_DECL_MUL(q2k_mul_q8k_avx2);
KQ_DECL_MUL(q3k_mul_q8k_avx2);
KQ_DECL_MUL(q4k_mul_q8k_avx2);
KQ_DECL_MUL(q5k_mul_q8k_avx2);
KQ_DECL_MUL(q6k_mul_q8k_avx2);

/* AVX-512 with VNNI */
KQ_DECL_DOT(q4_0_dot_q8_0_avx512);
KQ_DECL_DOT(q8_0_dot_q8_0_avx512);
KQ_DECL_DOT(q4k_dot_q8k_avx512);
KQ_DECL_DOT(q5k_dot_q8k_avx512);
KQ_DECL_DOT(q6k_dot_q8k_avx512);
KQ_DECL_MUL(q4_0_mul_q8_0_avx512);
KQ_DECL_MUL(q8_0_mul_q8_0_avx512);
KQ_DECL_MUL(q4k_mul_q8k_avx512);
KQ_DECL_MUL(q5k_mul_q8k_avx512);
KQ_DECL_MUL(q6k_mul_q8k_avx512);
#endif

#if defined(__aarch64__)
/* NEON (kq_neon.h): _neon for Armv8.0, _neon_dotprod with sdot */
#define KQ_DECL_NEON(isa)                                                                          \
    KQ_DECL_DOT(q8_0_dot_q8_0_##isa);                                                              \
    KQ_DECL_DOT(q4_0_dot_q8_0_##isa);                                                              \
    KQ_DECL_DOT(q4k_dot_q8k_##isa);                                                                \
    KQ_DECL_DOT(q6k_dot_q8k_##isa);                                                                \
    KQ_DECL_MUL(q8_0_mul_q8_0_##isa);                                                              \
    KQ_DECL_MUL(q4_0_mul_q8_0_##isa);                                                              \
    KQ_DECL_MUL(q4k_mul_q8k_##isa);                                                                \
    KQ_DECL_MUL(q6k_mul_q8k_##isa);                                                                \
    KQ_DECL_DOT(q5k_dot_q8k_##isa);                                                                \
    KQ_DECL_MUL(q5k_mul_q8k_##isa);                                                                \
    KQ_DECL_DOT(iq4nl_dot_q80_##isa);                                                              \
    KQ_DECL_MUL(iq4nl_mul_rows_q80_##isa);                                                         \
    KQ_DECL_DOT(iq4xs_dot_q8k_##isa);                                                              \
    KQ_DECL_MUL(iq4xs_mul_rows_q8k_##isa)
KQ_DECL_NEON(neon);
KQ_DECL_NEON(neon_dotprod);
/* i8mm (kquants_i8mm_neon.c): smmla mul_rows; their rows' vec_dot is the dotprod one */
KQ_DECL_MUL(q8_0_mul_q8_0_neon_i8mm);
KQ_DECL_MUL(q4_0_mul_q8_0_neon_i8mm);
KQ_DECL_MUL(q4k_mul_q8k_neon_i8mm);
#endif

#define KQ_CPU_NEON_ROW SPLASH_CPU_NEON
#define KQ_CPU_NEON_DOTPROD_ROW (SPLASH_CPU_NEON | SPLASH_CPU_NEON_DOTPROD)
#define KQ_CPU_NEON_I8MM_ROW (KQ_CPU_NEON_DOTPROD_ROW | SPLASH_CPU_NEON_I8MM)

#define KQ_CPU_AVX2_ROW (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA)
/* the AVX-512 kernels look bytes up with vpermb (VBMI) */
#define KQ_CPU_AVX512_ROW                                                                          \
    (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW |                 \
     SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512VNNI | SPLASH_CPU_AVX512VBMI)

#endif
