/* The affine format plugin: MLX affine quantization (w = s q + z per group) as
 * af<bits>g<group> formats, bits 2, 3, 4, 5, 6, 8 and groups of 32, 64, 128, and the
 * 4-bit and 8-bit types' load-time repacked layouts af<bits>g<group>_R16. */
#include "formats/affine/affine_r16.h"
#include "formats/affine/affine_types.h"
#include "splash/format.h"
#include "splash/plugin.h"

#define AFFINE_PLUGIN_TYPE(bits, group) &affine_b##bits##g##group##_type,
#define AFFINE_PLUGIN_R16_TYPE(bits, group) &affine_b##bits##g##group##_r16_type,
static const struct splash_format_type *const affine_plugin_types[] = {
    AFFINE_FOR_EACH(AFFINE_PLUGIN_TYPE) AFFINE_R16_FOR_EACH(AFFINE_PLUGIN_R16_TYPE)};

static const struct splash_format_plugin affine_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "affine", "0.1.0",
                                        struct splash_format_plugin),
    .types = affine_plugin_types,
    .n_types = sizeof affine_plugin_types / sizeof affine_plugin_types[0],
    .checkpoint_formats = NULL,
};

static const struct splash_plugin_header *affine_entry(const struct splash_host *host)
{
    (void)host;
    return &affine_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_affine, affine_entry)
