/* A family whose size preset names an architecture it does not claim (the loader refuses
 * it, naming the preset). */
#include "splash/family.h"
#include "tests/plugins/family_stubs.h"

static const char *const archs[] = {"preset-test", NULL};

static const struct splash_preset_value values[] = {
    {.key = "embedding_length", .kind = SPLASH_PRESET_U32, .num = 64}, {0}};

static const struct splash_family_preset presets[] = {
    {.name = "preset-test-tiny", .architecture = "someone-else", .n_vocab = 2048,
     .values = values},
    {0}};

static const struct splash_family_plugin plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "preset_test", "1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = archs,
    .check_config = check,
    .declare_tensors = declare,
    .presets = presets,
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(preset_test, entry)
