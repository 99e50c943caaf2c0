/* A broken format plugin: its type takes GGML's Q8_0 id (8) with blocks of another size,
 * so files of type 8 would be read with the wrong geometry; the loader refuses it. Its
 * second type brings a new id (202), which a refused plugin must not leave claimed. */
#include "splash/format.h"

static enum splash_status validate(const void *data, size_t n_bytes, int64_t n_elems,
                                   struct splash_err *err)
{
    return SPLASH_OK;
}

static void to_float(const void *blocks, float *out, int64_t n)
{
}

static void vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = 0;
}

static const struct splash_kernel_row rows[] = {{0, "scalar", vec_dot, NULL}};

static const struct splash_format_type fresh = {
    .name = "FRESH202", .gguf_type = 202, .block_elems = 32, .block_bytes = 40,
    .bits_per_weight = 10.0f, .act_type = "F32", .flags = SPLASH_FORMAT_LINEAR,
    .validate = validate, .to_float = to_float, .rows = rows, .n_rows = 1};

static const struct splash_format_type wrong = {
    .name = "NOT_Q8_0", .gguf_type = 8, .block_elems = 32, .block_bytes = 36,
    .bits_per_weight = 9.0f, .act_type = "F32", .flags = SPLASH_FORMAT_LINEAR,
    .validate = validate, .to_float = to_float, .rows = rows, .n_rows = 1};

static const struct splash_format_type *const types[] = {&fresh, &wrong};

static const struct splash_format_plugin plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "broken_gguf_geometry", "0.1",
                                        struct splash_format_plugin),
    .types = types,
    .n_types = 2,
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(broken_gguf_geometry, entry)
