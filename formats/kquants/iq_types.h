/* The i-quant and Q1_0 format descriptors this directory serves (listed by plugin.c). */
#ifndef SPLASH_KQUANTS_IQ_TYPES_H
#define SPLASH_KQUANTS_IQ_TYPES_H

#include <stdint.h>

#include "splash/format.h"

extern const struct splash_format_type kq_iq1_s_type;
extern const struct splash_format_type kq_iq1_m_type;
extern const struct splash_format_type kq_iq2_xxs_type;
extern const struct splash_format_type kq_iq2_xs_type;
extern const struct splash_format_type kq_iq2_s_type;
extern const struct splash_format_type kq_iq3_xxs_type;
extern const struct splash_format_type kq_iq3_s_type;
extern const struct splash_format_type kq_iq4_nl_type;
extern const struct splash_format_type kq_iq4_xs_type;
extern const struct splash_format_type kq_q1_0_type;

extern const struct splash_format_type *const kq_iq_types[];
extern const uint32_t kq_iq_n_types;

#endif
