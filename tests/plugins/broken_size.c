/* A descriptor shorter than ABI 1.0's minimum (the header alone). */
#include "splash/family.h"

static struct splash_plugin_header header = {
    .abi_major = SPLASH_ABI_MAJOR, .abi_minor = 0, .size = sizeof(struct splash_plugin_header),
    .kind = SPLASH_PLUGIN_FAMILY, .name = "broken_size", .version = "1.0"};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &header;
}

SPLASH_PLUGIN_DEFINE(broken_size, entry)
