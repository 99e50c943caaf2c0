/* The format descriptors this plugin defines (one per file) and the kernels
 * the descriptors' rows point at. */
#ifndef SPLASH_KQUANTS_TYPES_H
#define SPLASH_KQUANTS_TYPES_H

#include "splash/format.h"

extern const struct splash_format_type kq_q4_0_type;
extern const struct splash_format_type kq_q4_1_type;
extern const struct splash_format_type kq_q5_0_type;
extern const struct splash_format_type kq_q5_1_type;
extern const struct splash_format_type kq_q8_0_type;
extern const struct splash_format_type kq_q8_1_type;
extern const struct splash_format_type kq_q2_k_type;
extern const struct splash_format_type kq_q3_k_type;
extern const struct splash_format_type kq_q4_k_type;
extern const struct splash_format_type kq_q5_k_type;
extern const struct splash_format_type kq_q6_k_type;
extern const struct splash_format_type kq_q8_k_type;
extern const struct splash_format_type kq_q6_k_r16_type;
extern const struct splash_format_type kq_q4_k_r16_type;
extern const struct splash_format_type kq_q5_k_r16_type; /* q5k_r16.c */
void q6k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst); /* Q6_K -> Q6_K_R16 */

#endif
