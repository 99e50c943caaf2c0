/* A third-party format plugin built against the installed headers alone: HELLO8, a toy
 * 8-bit weight format (blocks of 32 signed bytes under one float scale) with its own
 * GGUF type id. Its kernel row multiplies against Q8_0 activations, whose layout
 * splash/act.h gives, so the built-in kernels quantize the activations for it and a
 * model whose matrices are HELLO8 runs on any family that takes a quantized linear
 * format. `splash make-model --type HELLO8 --plugin-dir .` writes one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <splash/act.h>
#include <splash/format.h>
#include <splash/fp.h>

#define HELLO8_GGUF_TYPE 201 /* an id GGML does not use */
#define HELLO8_QK 32

struct hello8_block {
    float d;                 /* the scale: value = d * q */
    int8_t qs[HELLO8_QK];
};
_Static_assert(sizeof(struct hello8_block) == 36, "a HELLO8 block is 36 bytes");

static enum splash_status hello8_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                          struct splash_err *err)
{
    if (n_elems % HELLO8_QK || n_bytes != (size_t)(n_elems / HELLO8_QK) * sizeof(struct hello8_block))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "HELLO8: %zu bytes do not hold %lld values in 36-byte blocks of 32",
                              n_bytes, (long long)n_elems);
    const struct hello8_block *b = data;
    for (int64_t i = 0; i < n_elems / HELLO8_QK; i++) {
        float d;
        memcpy(&d, &b[i].d, sizeof d); /* the data need not be aligned for a float */
        if (!isfinite(d))
            return splash_err_set(err, SPLASH_ERR_INVALID, "HELLO8 block %lld: scale is not finite",
                                  (long long)i);
    }
    return SPLASH_OK;
}

static void hello8_to_float(const void *blocks, float *out, int64_t n)
{
    const struct hello8_block *b = blocks;
    for (int64_t i = 0; i < n / HELLO8_QK; i++)
        for (int j = 0; j < HELLO8_QK; j++)
            out[i * HELLO8_QK + j] = b[i].d * (float)b[i].qs[j];
}

static void hello8_from_float(const float *x, void *blocks, int64_t n, const float *imatrix)
{
    (void)imatrix;
    struct hello8_block *b = blocks;
    for (int64_t i = 0; i < n / HELLO8_QK; i++) {
        const float *v = x + i * HELLO8_QK;
        float amax = 0;
        for (int j = 0; j < HELLO8_QK; j++)
            amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
        b[i].d = amax / 127.0f;
        const float inv = amax > 0 ? 127.0f / amax : 0;
        for (int j = 0; j < HELLO8_QK; j++)
            b[i].qs[j] = (int8_t)lrintf(v[j] * inv);
    }
}

/* The scalar reference row: a HELLO8 weight row against a Q8_0 activation row. */
static void hello8_vec_dot_q8_0(int64_t n, float *s, const void *w_row, const void *act_row)
{
    const struct hello8_block *w = w_row;
    const struct splash_q8_0_block *a = act_row;
    float sum = 0;
    for (int64_t i = 0; i < n / HELLO8_QK; i++) {
        int32_t dot = 0;
        for (int j = 0; j < HELLO8_QK; j++)
            dot += (int32_t)w[i].qs[j] * (int32_t)a[i].qs[j];
        sum += w[i].d * splash_fp16_to_fp32(a[i].d) * (float)dot;
    }
    *s = sum;
}

_Static_assert(HELLO8_QK == SPLASH_QK8_0, "a HELLO8 block meets one Q8_0 activation block");

static const struct splash_kernel_row hello8_rows[] = {
    {.cpu_requires = 0, .isa = "scalar", .vec_dot = hello8_vec_dot_q8_0},
};

static const struct splash_format_type hello8_type = {
    .name = "HELLO8",
    .gguf_type = HELLO8_GGUF_TYPE,
    .block_elems = HELLO8_QK,
    .block_bytes = sizeof(struct hello8_block),
    .bits_per_weight = 9.0f,
    .act_type = "Q8_0",
    .flags = SPLASH_FORMAT_LINEAR,
    .validate = hello8_validate,
    .to_float = hello8_to_float,
    .from_float = hello8_from_float,
    .rows = hello8_rows,
    .n_rows = 1,
};

static const struct splash_format_type *const hello8_types[] = {&hello8_type};

static const struct splash_format_plugin hello8_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FORMAT, "hello8", "0.1",
                                        struct splash_format_plugin),
    .types = hello8_types,
    .n_types = 1,
};

static const struct splash_plugin_header *hello8_entry(const struct splash_host *host)
{
    host->log(SPLASH_LOG_DEBUG, "hello8", "registered");
    return &hello8_plugin.header;
}

SPLASH_PLUGIN_DEFINE(format_hello8, hello8_entry)
