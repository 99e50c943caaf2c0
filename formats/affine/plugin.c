/* The affine format plugin: MLX affine quantization (w = s q + z per group) as
 * af<bits>g<group> formats, bits 2, 3, 4, 5, 6, 8 and groups of 32, 64, 128. */
#include "formats/affine/affine_types.h"
#include "splash/format.h"
#include "splash/plugin.h"

static const struct splash_format_plugin affine_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "affine", "0.1.0",
                                        struct splash_format_plugin),
    .types = affine_types,
    .n_types = AFFINE_N_TYPES,
    .checkpoint_formats = NULL,
};

static const struct splash_plugin_header *affine_entry(const struct splash_host *host)
{
    (void)host;
    return &affine_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_affine, affine_entry)
