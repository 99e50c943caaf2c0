/* The i-quant and Q1_0 descriptors, in GGUF type id order, for plugin.c to list. */
#include "formats/kquants/iq_types.h"

const struct splash_format_type *const kq_iq_types[] = {
    &kq_iq2_xxs_type, /* 16 */
    &kq_iq2_xs_type,  /* 17 */
    &kq_iq3_xxs_type, /* 18 */
    &kq_iq1_s_type,   /* 19 */
    &kq_iq4_nl_type,  /* 20 */
    &kq_iq3_s_type,   /* 21 */
    &kq_iq2_s_type,   /* 22 */
    &kq_iq4_xs_type,  /* 23 */
    &kq_iq1_m_type,   /* 29 */
    &kq_q1_0_type,    /* 41 */
};

const uint32_t kq_iq_n_types = sizeof kq_iq_types / sizeof kq_iq_types[0];
