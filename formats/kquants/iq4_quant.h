/* The IQ4_NL / IQ4_XS reference quantizer (shared: IQ4_XS is eight IQ4_NL sub-blocks). */
#ifndef SPLASH_KQUANTS_IQ4_QUANT_H
#define SPLASH_KQUANTS_IQ4_QUANT_H

#include <stdint.h>

/* Index of the IQ4 level nearest to v (ties to the lower level). */
int kq_iq4_nearest(float v);

/* Quantizes n values (32 or 256) into 4-bit level indices packed as the blocks store them
 * (q4, n / 2 bytes), writing the fp16 block scale to *d. For n == 256 the 6-bit sub-scales
 * go to *scales_h and scales_l; for n == 32 those are unused (may be NULL). imatrix
 * (may be NULL) weighs each value's error. */
void kq_iq4_quantize(int n, const float *x, const float *imatrix, uint16_t *d, uint8_t *q4,
                     uint16_t *scales_h, uint8_t *scales_l);

#endif
