/* A working format plugin built against ABI 1.0 (abi10_layout.h): one toy type, ABI10_I8
 * (blocks of 32 int8 codes after a float scale d; value = d * code), with a scalar row
 * against F32 activations. Each type is followed by poison where ABI 1.1's repack members
 * would be: the loader must copy the types into full-size structs, so they read as
 * NULL/0 and the plugin loads. */
#include <math.h>
#include <string.h>

#include "tests/plugins/abi10_layout.h"

#define I8_VALUES 32
#define I8_BYTES (4 + I8_VALUES)

static float block_d(const unsigned char *b)
{
    float d;
    memcpy(&d, b, 4);
    return d;
}

static enum splash_status validate(const void *data, size_t n_bytes, int64_t n_elems,
                                   struct splash_err *err)
{
    if (n_elems < 0 || n_elems % I8_VALUES || n_bytes != (size_t)(n_elems / I8_VALUES) * I8_BYTES)
        return splash_err_set(err, SPLASH_ERR_INVALID, "ABI10_I8: %zu bytes for %lld values",
                              n_bytes, (long long)n_elems);
    for (int64_t b = 0; b < n_elems / I8_VALUES; b++)
        if (!isfinite(block_d((const unsigned char *)data + b * I8_BYTES)))
            return splash_err_set(err, SPLASH_ERR_INVALID, "ABI10_I8: block %lld: d is not finite",
                                  (long long)b);
    return SPLASH_OK;
}

static void to_float(const void *blocks, float *out, int64_t n)
{
    const unsigned char *b = blocks;
    for (int64_t i = 0; i < n; i++)
        out[i] = block_d(b + i / I8_VALUES * I8_BYTES) *
                 (float)(signed char)b[i / I8_VALUES * I8_BYTES + 4 + i % I8_VALUES];
}

static void vec_dot(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const unsigned char *b = w_row;
    const float *a = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n; i += I8_VALUES, b += I8_BYTES) {
        float block = 0;
        for (int k = 0; k < I8_VALUES; k++)
            block += (float)(signed char)b[4 + k] * a[i + k];
        sum += block_d(b) * block;
    }
    *s = sum;
}

static void poison_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
}

static const struct splash_kernel_row rows[] = {{0, "scalar", vec_dot, NULL}};

static const struct format_type_abi10_slot i8 = {
    .type = {.name = "ABI10_I8", .gguf_type = -1, .block_elems = I8_VALUES,
             .block_bytes = I8_BYTES, .bits_per_weight = 9.0f, .act_type = "F32",
             .validate = validate, .to_float = to_float, .rows = rows, .n_rows = 1},
    .poison_repack_to = "ABI10_I8_R16",
    .poison_repack = poison_repack,
    .poison_row_group = 16,
};

static const struct format_type_abi10 *const types[] = {&i8.type};

static const struct format_plugin_abi10 plugin = {
    .header = ABI10_FORMAT_HEADER("abi10_format"),
    .types = types,
    .n_types = 1,
};

static const struct splash_plugin_header *entry(const struct splash_host *host)
{
    return &plugin.header;
}

SPLASH_PLUGIN_DEFINE(abi10_format, entry)
