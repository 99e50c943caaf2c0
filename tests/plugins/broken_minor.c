/* Built against a newer minor ABI (1.9) than this core speaks. */
#include "splash/family.h"

static struct splash_family_plugin plugin = {
    .header = {.abi_major = SPLASH_ABI_MAJOR, .abi_minor = 9,
               .size = sizeof(struct splash_family_plugin), .kind = SPLASH_PLUGIN_FAMILY,
               .name = "broken_minor", .version = "1.0"},
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(broken_minor, entry)
