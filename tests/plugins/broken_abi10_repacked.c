/* A broken ABI 1.0 format plugin: its type sets SPLASH_FORMAT_REPACKED, a flag of ABI 1.1,
 * whose row_group member 1.0 lacks. Copied into a full-size struct the type's row_group
 * reads 0, and the loader must refuse it; poison after the type (row_group 16) would make
 * a loader reading the type in place accept it. */
#include "tests/plugins/abi10_layout.h"

static enum splash_status validate(const void *data, size_t n_bytes, int64_t n_elems,
                                   struct splash_err *err)
{
    return SPLASH_OK;
}

static void to_float(const void *blocks, float *out, int64_t n)
{
}

static void mul_rows(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                     size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
}

static const struct splash_kernel_row rows[] = {{0, "scalar", NULL, mul_rows}};

static const struct format_type_abi10_slot r16 = {
    .type = {.name = "ABI10_R16", .gguf_type = -1, .block_elems = 16 * 32,
             .block_bytes = 16 * 36, .bits_per_weight = 9.0f, .act_type = "F32",
             .flags = SPLASH_FORMAT_REPACKED, .validate = validate, .to_float = to_float,
             .rows = rows, .n_rows = 1},
    .poison_row_group = 16,
};

static const struct format_type_abi10 *const types[] = {&r16.type};

static const struct format_plugin_abi10 plugin = {
    .header = ABI10_FORMAT_HEADER("broken_abi10_repacked"),
    .types = types,
    .n_types = 1,
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(broken_abi10_repacked, entry)
