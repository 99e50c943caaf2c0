/* The scans of a vocabulary's logits the sampler makes per token (sampling.c): argmax,
 * the logits' range and the count at or above a threshold. The NEON versions
 * (sampling_neon.c) give exactly the plain loops' results; sampling.c takes them where the
 * CPU reports NEON (SPLASH_FORCE_ISA=scalar: the plain loops). */
#ifndef SPLASH_ENGINE_SAMPLING_SCAN_H
#define SPLASH_ENGINE_SAMPLING_SCAN_H

#include <stdint.h>

#if defined(__aarch64__)
/* The first index of the largest of x[0..n) (NaN never larger; x[0] NaN gives 0). */
int32_t splash_argmax_neon(const float *x, int64_t n);
/* The smallest and largest of x[0..n), n >= 1; 0 when a NaN is among them (the caller
 * then takes the plain loop, which keeps the first value's NaN). */
int splash_logit_range_neon(const float *x, int32_t n, float *lo, float *hi);
/* How many of x[0..n) are >= thr, counted until at least stop are found (the count may
 * pass stop by less than 16). */
int32_t splash_count_at_least_neon(const float *x, int32_t n, float thr, int32_t stop);
#endif

#endif
