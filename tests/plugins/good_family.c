/* A minimal valid family plugin for the loader tests. */
#include "splash/family.h"
#include "tests/plugins/family_stubs.h"

static const char *const archs[] = {"loader-test", NULL};

static const struct splash_family_plugin plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "loader_test", "1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = archs,
    .check_config = check,
    .declare_tensors = declare,
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(loader_test, entry)
