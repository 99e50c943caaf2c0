/* Activation layouts (GGML's Q8_0, Q8_1, Q8_K blocks): the bytes a format's kernel rows
 * read when its act_type names one of them. Installed, so a format plugin built outside
 * the tree reads the same layout as the built-in ones. */
#ifndef SPLASH_ACT_H
#define SPLASH_ACT_H

#include <stdint.h>

#define SPLASH_QK8_0 32
#define SPLASH_QK_K 256

struct splash_q8_0_block {
    uint16_t d; /* fp16 scale */
    int8_t qs[SPLASH_QK8_0];
};
_Static_assert(sizeof(struct splash_q8_0_block) == 34, "q8_0 block is 34 bytes");

struct splash_q8_1_block {
    uint16_t d; /* fp16 scale */
    uint16_t s; /* fp16 d * sum(qs) */
    int8_t qs[SPLASH_QK8_0];
};
_Static_assert(sizeof(struct splash_q8_1_block) == 36, "q8_1 block is 36 bytes");

struct splash_q8_k_block {
    float d;
    int8_t qs[SPLASH_QK_K];
    int16_t bsums[SPLASH_QK_K / 16]; /* sums of each 16 qs */
};
_Static_assert(sizeof(struct splash_q8_k_block) == 292, "q8_K block is 292 bytes");

#endif
