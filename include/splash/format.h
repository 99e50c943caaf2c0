/* Quantization-format plugins: each format is a table row (block geometry,
 * validation, conversion, and kernel rows ending in the scalar reference). */
#ifndef SPLASH_FORMAT_H
#define SPLASH_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/plugin.h"
#include "splash/status.h"

/* One kernel row. The core takes the first row whose cpu_requires bits the CPU
 * has; the last row of every table must be the scalar reference (cpu_requires 0).
 * SPLASH_FORCE_ISA=scalar makes the core take the reference row. */
struct splash_kernel_row {
    uint64_t cpu_requires; /* all SPLASH_CPU_* bits the row needs; 0 = portable C */
    const char *isa;       /* "avx512vnni", "avx2", "neon", "scalar" */
    /* *s = dot(weight row, activation row) over n elements (n a multiple of the
     * weight block and of the activation block). Thread-safe, no allocation. */
    void (*vec_dot)(int64_t n, float *s, const void *w_row, const void *act_row);
    /* (optional) defaults to a loop over vec_dot. For i < n_w and j < n_act:
     * out[j * out_stride + i] = dot(w + i * w_stride, act + j * act_stride).
     * Reads each weight row once for all activation rows (prefill, drafts). */
    void (*mul_rows)(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                     size_t act_stride, int64_t n_act, float *out, size_t out_stride);
};

/* Planes of a safetensors checkpoint's quantized weight (MLX, Model Optimizer,
 * compressed-tensors), handed to import_planes to build this format's blocks. */
struct splash_planes {
    int64_t rows, cols;      /* logical weight shape: rows outputs x cols inputs */
    const void *codes;       /* MLX: U32 words, LSB-first; ModelOpt/CT: U8, low nibble first */
    int32_t codes_dtype;     /* enum splash_dtype */
    const void *scales;      /* one per group, row-major [rows][cols / group] */
    int32_t scales_dtype;
    const void *biases;      /* affine only, like scales; NULL otherwise */
    int32_t biases_dtype;
    double global_scale;     /* the tensor's g (1 when none) */
    const float *row_scales; /* FP8 per-row scale, or NULL */
};

#define SPLASH_FORMAT_ACTIVATION_ONLY (1u << 0) /* Q8_K and friends: no vec_dot rows */
#define SPLASH_FORMAT_FLOAT (1u << 1)           /* F32, F16, BF16: unquantized values */
#define SPLASH_FORMAT_REPACKED (1u << 2)        /* a load-time layout of another format (ABI 1.1) */
/* its products are multiplied by a per-tensor F32 scale stored beside the weight (NAME.scale:
 * one value, or one per expert), as llama.cpp's NVFP4 GGUFs keep one */
#define SPLASH_FORMAT_TENSOR_SCALE (1u << 3)
/* a quantized layout for weight matrices: model-check accepts it wherever a family takes a
 * quantized linear tensor (ABI 1.2; for plugins built before, the core sets it on every
 * type with a GGUF id and kernel rows that is neither float, activation-only nor
 * repacked) */
#define SPLASH_FORMAT_LINEAR (1u << 4)
/* its reference multiplies float activations (MLX's affine layers: x @ dequantized w), so
 * Q8_0 activations would move its products further than the checkpoint's own arithmetic
 * does: in the first layers the core gives its kernels each Q8_0 row twice, the value's
 * high part and its remainder (a 15-bit quantization), and adds the two products (ABI 1.5;
 * the core reads it only from plugins built against 1.5 or later) */
#define SPLASH_FORMAT_FINE_ACT (1u << 5)

struct splash_format_type {
    const char *name;         /* "Q4_K", "MXFP4", "af4g64", "BF16" */
    int32_t gguf_type;        /* GGUF type id, or -1 when GGUF has none */
    uint32_t block_elems;     /* elements per block */
    uint32_t block_bytes;     /* bytes per block (pinned by _Static_assert) */
    float bits_per_weight;
    const char *act_type;     /* name of the format activations are quantized to for
                                 vec_dot ("Q8_K", "Q8_0", "F32"); NULL if activation-only */
    uint32_t flags;           /* SPLASH_FORMAT_* */

    /* Checks n_bytes of hostile blocks holding n_elems values (sizes, NaN/Inf scales
     * where the format forbids them). err names the block; the caller adds the tensor. */
    enum splash_status (*validate)(const void *data, size_t n_bytes, int64_t n_elems,
                                   struct splash_err *err);
    /* n elements (a multiple of block_elems) to float. */
    void (*to_float)(const void *blocks, float *out, int64_t n);
    /* (optional) reference quantizer; imatrix may be NULL. NULL = no quantizer. */
    void (*from_float)(const float *x, void *blocks, int64_t n, const float *imatrix);

    const struct splash_kernel_row *rows; /* ends in the scalar row; NULL if activation-only */
    uint32_t n_rows;

    /* Claims for safetensors checkpoints: MLX quantization mode ("affine", "mxfp4",
     * "nvfp4") with bits and group size; NULL/0 when the type has no MLX form. */
    const char *mlx_mode;
    int32_t mlx_bits;
    int32_t mlx_group_size;
    /* (optional) builds this format's blocks from checkpoint planes; NULL = cannot. */
    enum splash_status (*import_planes)(const struct splash_planes *src, void *dst_blocks,
                                        struct splash_err *err);

    /* ---- ABI 1.1: load-time repack into the layout the kernels read fastest. The core
     * reads these members only from plugins built against ABI 1.1 or later. ---- */
    /* On a plain format: the name of a SPLASH_FORMAT_REPACKED format of the same plugin,
     * or NULL. The core converts each matrix at load with repack when the CPU has a
     * SIMD row of that format (never under SPLASH_FORCE_ISA=scalar). */
    const char *repack_to;
    /* Writes n_rows rows of n elements (this format's rows, contiguous) into repack_to's
     * layout at dst, of the same size: whole groups of row_group rows interleaved, then
     * the remaining rows (fewer than a group) copied as they are. */
    void (*repack)(int64_t n, const void *src, int64_t n_rows, void *dst);
    /* On a SPLASH_FORMAT_REPACKED format: rows per interleaved group (at least 2). A block
     * is one block position of a whole group (block_elems = row_group x the plain
     * block's elements), and to_float gives its values row by row. Its kernel rows'
     * mul_rows take n_w rows starting at a group boundary, as repack lays them out
     * (w_stride is the plain format's row bytes; fewer than row_group rows, in the plain
     * layout, only at the matrix's end); their vec_dot may be NULL. */
    uint32_t row_group;
};

struct splash_format_plugin {
    struct splash_plugin_header header; /* kind = SPLASH_PLUGIN_FORMAT */
    const struct splash_format_type *const *types;
    uint32_t n_types;
    /* NULL-terminated checkpoint formats the plugin imports, as
     * "<quant_method>:<format>": "modelopt:NVFP4", "compressed-tensors:nvfp4-pack-quantized". */
    const char *const *checkpoint_formats;
};

/* Row size in bytes of n elements, or 0 if n is not a multiple of the block. */
static inline size_t splash_format_row_bytes(const struct splash_format_type *f, int64_t n)
{
    if (n < 0 || n % f->block_elems)
        return 0;
    return (size_t)(n / f->block_elems) * f->block_bytes;
}

#endif
