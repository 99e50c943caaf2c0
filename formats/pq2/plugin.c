/* The pq2 format plugin: Q2_0 (GGUF 42) and PQ2_0 (Prism ML's 142), 2-bit codes q
 * worth d (q - 1). The Hadamard input rotation PQ2_0 models need is a header helper
 * for families: include/splash/hadamard.h. */
#include "formats/pq2/pq2_types.h"
#include "splash/format.h"
#include "splash/plugin.h"

static const struct splash_format_type *const pq2_types[] = {&pq2_q2_0_type, &pq2_pq2_0_type,
                                                             &pq2_q2_0_r16_type,
                                                             &pq2_pq2_0_r16_type};

static const struct splash_format_plugin pq2_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "pq2", "0.1.0",
                                        struct splash_format_plugin),
    .types = pq2_types,
    .n_types = sizeof pq2_types / sizeof pq2_types[0],
    .checkpoint_formats = NULL,
};

static const struct splash_plugin_header *pq2_entry(const struct splash_host *host)
{
    (void)host;
    return &pq2_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_pq2, pq2_entry)
