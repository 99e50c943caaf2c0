/* The kquants format plugin: GGML's legacy quants (Q4_0 .. Q8_1), K-quants
 * (Q2_K .. Q8_K) and the IQ family, one descriptor listing them all. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/kquants/kq_types.h"
#include "splash/format.h"
#include "splash/plugin.h"

/* Defined in iq_types.c by the IQ-family code. */
extern const struct splash_format_type *const kq_iq_types[];
extern const uint32_t kq_iq_n_types;
extern const struct splash_format_type kq_iq4_xs_r16_type; /* iq4xs_r16.c */
extern const struct splash_format_type kq_iq4_nl_r16_type; /* iq4nl_r16.c */
extern const struct splash_format_type kq_q3_k_r16_type;   /* q3k_r16.c */
extern const struct splash_format_type kq_q2_k_r16_type;   /* q2k_r16.c */
extern const struct splash_format_type kq_iq2_xxs_r16_type; /* iq2xxs_r16.c */
extern const struct splash_format_type kq_iq2_xs_r16_type;  /* iq2xs_r16.c */
extern const struct splash_format_type kq_iq3_xxs_r16_type; /* iq3xxs_r16.c */
extern const struct splash_format_type kq_iq3_s_r16_type;   /* iq3s_r16.c */
extern const struct splash_format_type kq_iq1_s_r16_type;   /* iq1s_r16.c */
extern const struct splash_format_type kq_iq1_m_r16_type;   /* iq1m_r16.c */
extern const struct splash_format_type kq_iq2_s_r16_type;   /* iq2s_r16.c */
extern const struct splash_format_type kq_q4_0_r16_type;    /* q40_r16.c */
extern const struct splash_format_type kq_q5_0_r16_type;    /* q50_r16.c */
extern const struct splash_format_type kq_q4_1_r16_type;    /* q41_r16.c */
extern const struct splash_format_type kq_q5_1_r16_type;    /* q51_r16.c */

static const struct splash_format_type *const kq_own_types[] = {
    &kq_q4_0_type, &kq_q4_1_type, &kq_q5_0_type, &kq_q5_1_type, &kq_q8_0_type, &kq_q8_1_type,
    &kq_q2_k_type, &kq_q3_k_type, &kq_q4_k_type, &kq_q5_k_type, &kq_q6_k_type, &kq_q8_k_type,
    &kq_q6_k_r16_type,
    &kq_q4_k_r16_type,
    &kq_q5_k_r16_type,
    &kq_q2_k_r16_type,
    &kq_iq4_xs_r16_type,
    &kq_iq4_nl_r16_type,
    &kq_q3_k_r16_type,
    &kq_iq3_xxs_r16_type,
    &kq_iq3_s_r16_type,
    &kq_iq1_s_r16_type,
    &kq_iq1_m_r16_type,
    &kq_iq2_xxs_r16_type,
    &kq_iq2_xs_r16_type,
    &kq_iq2_s_r16_type,
    &kq_q4_0_r16_type,
    &kq_q5_0_r16_type,
    &kq_q4_1_r16_type,
    &kq_q5_1_r16_type,
};
#define KQ_N_OWN (sizeof kq_own_types / sizeof kq_own_types[0])
#define KQ_MAX_TYPES 64

static const struct splash_format_type *kq_all_types[KQ_MAX_TYPES];

static struct splash_format_plugin kq_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "kquants", "0.1.0",
                                        struct splash_format_plugin),
    .types = kq_all_types,
    .n_types = 0,
    .checkpoint_formats = NULL,
};

static pthread_once_t kq_once = PTHREAD_ONCE_INIT;

static void kq_fill_types(void)
{
    uint32_t n = 0;
    for (size_t i = 0; i < KQ_N_OWN; i++)
        kq_all_types[n++] = kq_own_types[i];
    for (uint32_t i = 0; i < kq_iq_n_types && n < KQ_MAX_TYPES; i++)
        if (kq_iq_types[i])
            kq_all_types[n++] = kq_iq_types[i];
    kq_plugin.n_types = n;
}

static const struct splash_plugin_header *kquants_entry(const struct splash_host *host)
{
    (void)host;
    pthread_once(&kq_once, kq_fill_types);
    return &kq_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_kquants, kquants_entry)
