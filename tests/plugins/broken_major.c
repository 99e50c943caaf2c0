/* Declares ABI 2.0: the loader must refuse it by name and version. */
#include "splash/family.h"

static struct splash_family_plugin plugin = {
    .header = {.abi_major = 2, .abi_minor = 0, .size = sizeof(struct splash_family_plugin),
               .kind = SPLASH_PLUGIN_FAMILY, .name = "broken_major", .version = "1.0"},
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(broken_major, entry)
