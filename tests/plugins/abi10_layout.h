/* The format descriptor of ABI 1.0, frozen as plugins built against it laid it out: struct
 * splash_format_type before ABI 1.1 appended its repack members (repack_to, repack,
 * row_group), and struct splash_format_plugin up to its 1.0 minimum (types, n_types). The
 * ABI 1.0 fixtures build their descriptors from these so the loader sees exactly what an
 * old plugin hands it. */
#ifndef SPLASH_TEST_ABI10_LAYOUT_H
#define SPLASH_TEST_ABI10_LAYOUT_H

#include <stddef.h>

#include "splash/format.h"

struct format_type_abi10 {
    const char *name;
    int32_t gguf_type;
    uint32_t block_elems;
    uint32_t block_bytes;
    float bits_per_weight;
    const char *act_type;
    uint32_t flags;
    enum splash_status (*validate)(const void *data, size_t n_bytes, int64_t n_elems,
                                   struct splash_err *err);
    void (*to_float)(const void *blocks, float *out, int64_t n);
    void (*from_float)(const float *x, void *blocks, int64_t n, const float *imatrix);
    const struct splash_kernel_row *rows;
    uint32_t n_rows;
    const char *mlx_mode;
    int32_t mlx_bits;
    int32_t mlx_group_size;
    enum splash_status (*import_planes)(const struct splash_planes *src, void *dst_blocks,
                                        struct splash_err *err);
};

/* 1.0's members are the prefix of today's: appending is the only change a minor may make. */
_Static_assert(sizeof(struct format_type_abi10) == offsetof(struct splash_format_type, repack_to),
               "ABI 1.0's struct splash_format_type is today's up to repack_to");
_Static_assert(offsetof(struct format_type_abi10, rows) == offsetof(struct splash_format_type, rows),
               "ABI 1.0 rows");
_Static_assert(offsetof(struct format_type_abi10, import_planes) ==
                   offsetof(struct splash_format_type, import_planes),
               "ABI 1.0 import_planes");

/* A 1.0 type followed by bytes a loader reading it in place would take for today's repack
 * members: they must never be read. */
struct format_type_abi10_slot {
    struct format_type_abi10 type;
    const char *poison_repack_to;
    void (*poison_repack)(int64_t n, const void *src, int64_t n_rows, void *dst);
    uint32_t poison_row_group;
};

struct format_plugin_abi10 {
    struct splash_plugin_header header;
    const struct format_type_abi10 *const *types;
    uint32_t n_types;
};

_Static_assert(offsetof(struct format_plugin_abi10, types) ==
                   offsetof(struct splash_format_plugin, types),
               "ABI 1.0 types");

#define ABI10_FORMAT_HEADER(name_)                                                                 \
    {                                                                                              \
        .abi_major = SPLASH_ABI_MAJOR, .abi_minor = 0,                                             \
        .size = (uint32_t)sizeof(struct format_plugin_abi10), .kind = SPLASH_PLUGIN_FORMAT,        \
        .name = (name_), .version = "1.0"                                                          \
    }

#endif
