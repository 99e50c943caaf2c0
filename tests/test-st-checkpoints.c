/* Safetensors checkpoints written here (round trips for coverage; the shared oracles in
 * test-st-target.c are the truth): every MLX mode x bits x group of models.md's table
 * through the loader into its format, and broken checkpoints refused naming the file and
 * the tensor. The base is the shared MLX stories checkpoint, its FFN projections
 * quantized again by this file's MLX quantizers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/meta.h"
#include "core/model_check.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "core/threadpool.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "tests/support/st_write.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define BASE "safetensors/qwen35-stories-mlx-4bit"
#define PREFIX "language_model.model.layers."
#define N_LAYERS 8

static const char *const projs[3] = {"gate_proj", "up_proj", "down_proj"};
static const char *const gguf_projs[3] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};

/* the base's FFN weights as floats, [layer][proj] rows x cols (HF's layout = GGUF's here) */
static float *ffn[N_LAYERS][3];
static int64_t ffn_rows[3], ffn_cols[3];

static const char *base_path(char *buf, size_t size, const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, BASE "%s%s", file ? "/" : "", file ? file : "");
    return test_testdata_path(buf, size, rel);
}

static int setup(void **state)
{
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    char dir[512];
    struct splash_meta *m;
    struct splash_err err = {{0}};
    if (splash_st_target_open(splash_registry_global(), base_path(dir, sizeof dir, NULL),
                              SPLASH_ST_DECODE_F32, &m, &err))
        return -1;
    const struct splash_meta_api *api = splash_meta_api_get();
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, gguf_projs[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            ffn_rows[p] = t->ne[1];
            ffn_cols[p] = t->ne[0];
            ffn[l][p] = malloc((size_t)(t->ne[0] * t->ne[1]) * sizeof(float));
            t->format->to_float(t->data, ffn[l][p], t->ne[0] * t->ne[1]);
        }
    splash_meta_close(m);
    return 0;
}

static int teardown(void **state)
{
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++)
            free(ffn[l][p]);
    return 0;
}

/* ---- MLX quantizers: the planes mlx-lm writes, and the values they decode to ---------- */

struct quant {
    const char *mode;
    int bits, group;
    int mode_only; /* the config's override names the mode alone (its defaults apply) */
};

static void put_code(uint8_t *stream, int64_t j, int bits, unsigned q)
{
    for (int b = 0; b < bits; b++)
        if (q >> b & 1)
            stream[(j * bits + b) / 8] |= (uint8_t)(1u << ((j * bits + b) % 8));
}

static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static unsigned e2m1_code(float x)
{
    unsigned best = 0;
    for (unsigned c = 1; c < 8; c++)
        if (fabsf(fabsf(x) - e2m1[c]) < fabsf(fabsf(x) - e2m1[best]))
            best = c;
    return best | (x < 0 && best ? 8u : 0u);
}

static float e2m1_value(unsigned code)
{
    return (code & 8 ? -1.0f : 1.0f) * e2m1[code & 7];
}

/* One row of cols weights into codes (cols * bits / 8 bytes), scales and biases (bytes of
 * the mode's scale type), and the values they decode to. */
static void quantize_row(const struct quant *q, const float *w, int64_t cols, uint8_t *codes,
                         uint8_t *scales, uint8_t *biases, float *out)
{
    memset(codes, 0, (size_t)(cols * q->bits / 8));
    for (int64_t g0 = 0, k = 0; g0 < cols; g0 += q->group, k++) {
        float mn = w[g0], mx = w[g0], amax = 0;
        for (int64_t j = g0; j < g0 + q->group; j++) {
            mn = fminf(mn, w[j]);
            mx = fmaxf(mx, w[j]);
            amax = fmaxf(amax, fabsf(w[j]));
        }
        if (!strcmp(q->mode, "affine")) {
            int levels = (1 << q->bits) - 1;
            uint16_t sb = splash_fp32_to_bf16(mx > mn ? (mx - mn) / (float)levels : 1e-6f),
                     bb = splash_fp32_to_bf16(mn);
            float s = splash_bf16_to_fp32(sb), b = splash_bf16_to_fp32(bb);
            memcpy(scales + 2 * k, &sb, 2);
            memcpy(biases + 2 * k, &bb, 2);
            for (int64_t j = g0; j < g0 + q->group; j++) {
                long c = lroundf((w[j] - b) / s);
                c = c < 0 ? 0 : c > levels ? levels : c;
                put_code(codes, j, q->bits, (unsigned)c);
                out[j] = s * (float)c + b;
            }
        } else {
            float s;
            if (!strcmp(q->mode, "mxfp4")) { /* E8M0: a power of two, amax / s within 6 */
                int e = amax > 0 ? (int)ceilf(log2f(amax / 6.0f)) : -127;
                e = e < -127 ? -127 : e > 127 ? 127 : e;
                scales[k] = (uint8_t)(e + 127);
                s = splash_e8m0_to_fp32(scales[k]);
            } else { /* E4M3: the nearest to amax / 6 */
                uint8_t best = 0;
                for (uint8_t c = 1; c < 0x7f; c++)
                    if (fabsf(splash_e4m3_to_fp32(c) - amax / 6.0f) <
                        fabsf(splash_e4m3_to_fp32(best) - amax / 6.0f))
                        best = c;
                scales[k] = best;
                s = splash_e4m3_to_fp32(best);
            }
            for (int64_t j = g0; j < g0 + q->group; j++) {
                unsigned c = s > 0 ? e2m1_code(w[j] / s) : 0;
                put_code(codes, j, 4, c);
                out[j] = s * e2m1_value(c);
            }
        }
    }
}

/* The base with every FFN projection quantized by q (its config overriding those modules),
 * written to dir; expected[l][p] gets the values the planes decode to. */
static void write_requantized(const char *dir, const struct quant *q, float *expected[N_LAYERS][3])
{
    char path[1024];
    struct test_st_file f;
    assert_int_equal(test_st_read(base_path(path, sizeof path, "model.safetensors"), &f), 0);
    json_t *config = json_load_file(base_path(path, sizeof path, "config.json"), 0, NULL);
    assert_non_null(config);
    int affine = !strcmp(q->mode, "affine");
    size_t scale_bytes = affine ? 2 : 1;
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            int64_t rows = ffn_rows[p], cols = ffn_cols[p], groups = cols / q->group;
            size_t row_code = (size_t)(cols * q->bits / 8);
            uint8_t *codes = calloc((size_t)rows, row_code);
            uint8_t *scales = malloc((size_t)(rows * groups) * scale_bytes);
            uint8_t *biases = malloc((size_t)(rows * groups) * 2);
            expected[l][p] = malloc((size_t)(rows * cols) * sizeof(float));
            for (int64_t r = 0; r < rows; r++)
                quantize_row(q, ffn[l][p] + r * cols, cols, codes + r * row_code,
                             scales + (size_t)(r * groups) * scale_bytes,
                             biases + (size_t)(r * groups) * 2, expected[l][p] + r * cols);
            char module[200], name[256];
            snprintf(module, sizeof module, PREFIX "%d.mlp.%s", l, projs[p]);
            const char *parts[3] = {"weight", "scales", "biases"};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "%s.%s", module, parts[i]);
                test_st_remove(&f, name);
            }
            int64_t wshape[2] = {rows, (int64_t)row_code / 4}, sshape[2] = {rows, groups};
            snprintf(name, sizeof name, "%s.weight", module);
            test_st_add(&f, name, "U32", 2, wshape, codes, (size_t)rows * row_code);
            snprintf(name, sizeof name, "%s.scales", module);
            test_st_add(&f, name, affine ? "BF16" : "U8", 2, sshape, scales,
                        (size_t)(rows * groups) * scale_bytes);
            if (affine) {
                snprintf(name, sizeof name, "%s.biases", module);
                test_st_add(&f, name, "BF16", 2, sshape, biases, (size_t)(rows * groups) * 2);
            }
            json_t *o = q->mode_only ? json_pack("{s:s}", "mode", q->mode)
                                     : json_pack("{s:i, s:i, s:s}", "bits", q->bits,
                                                 "group_size", q->group, "mode", q->mode);
            json_object_set(json_object_get(config, "quantization"), module, o);
            json_object_set_new(json_object_get(config, "quantization_config"), module, o);
            free(codes);
            free(scales);
            free(biases);
        }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(test_st_write(&f, path), 0);
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
    test_st_free(&f);
}

static void round_trip(const struct quant *q, const char *format)
{
    char dir[256];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    float *expected[N_LAYERS][3];
    write_requantized(dir, q, expected);
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    if (splash_st_target_open(splash_registry_global(), dir, 0, &m, &err))
        fail_msg("%s %d-bit g%d: %s", q->mode, q->bits, q->group, err.msg);
    const struct splash_meta_api *api = splash_meta_api_get();
    double worst = 0;
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, gguf_projs[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            assert_non_null(t);
            assert_string_equal(t->type_name, format);
            int64_t n = ffn_rows[p] * ffn_cols[p];
            assert_int_equal(t->ne[0] * t->ne[1], n);
            float *x = malloc((size_t)n * sizeof *x);
            t->format->to_float(t->data, x, n);
            for (int64_t i = 0; i < n; i++) {
                double d = fabs((double)x[i] - expected[l][p][i]);
                if (d > 1e-6 * (fabs(expected[l][p][i]) + 1e-3))
                    fail_msg("%s: %s value %lld: %g, the planes hold %g", format, name,
                             (long long)i, x[i], expected[l][p][i]);
                worst = d > worst ? d : worst;
            }
            free(x);
            free(expected[l][p]);
        }
    printf("  %-8s %s %d-bit, groups of %2d: 24 projections decode as written (max %.2g)\n",
           format, q->mode, q->bits, q->group, worst);
    splash_meta_close(m);
    test_st_rmdir(dir);
}

static void test_mlx_affine_every_bits_group(void **state)
{
    static const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    for (size_t b = 0; b < 6; b++)
        for (size_t g = 0; g < 3; g++) {
            struct quant q = {"affine", bits[b], groups[g], 0};
            char format[16];
            snprintf(format, sizeof format, "af%dg%d", bits[b], groups[g]);
            round_trip(&q, format);
        }
}

static void test_mlx_mxfp4(void **state)
{
    struct quant q = {"mxfp4", 4, 32, 0};
    round_trip(&q, "MXFP4_MLX");
}

static void test_mlx_nvfp4(void **state)
{
    struct quant q = {"nvfp4", 4, 16, 0};
    round_trip(&q, "NVFP4_G");
}

/* An override naming only its mode takes that mode's bits and group (mlx-lm's defaults),
 * not the block's affine 4-bit/64. */
static void test_mlx_mode_defaults(void **state)
{
    struct quant mx = {"mxfp4", 4, 32, 1}, nv = {"nvfp4", 4, 16, 1};
    round_trip(&mx, "MXFP4_MLX");
    round_trip(&nv, "NVFP4_G");
}

/* ---- FP8 and compressed-tensors on the Model Optimizer base ------------------------- */

#define MO_BASE "safetensors/qwen35-stories-modelopt-nvfp4"
#define MO_PREFIX "model.language_model.layers."

/* The nearest E4M3 code to x (|x| <= 448). */
static uint8_t e4m3_code(float x)
{
    float a = fabsf(x);
    uint8_t lo = 0, hi = 0x7e;
    while (hi - lo > 1) { /* codes 0..0x7e increase with their value */
        uint8_t mid = (uint8_t)((lo + hi) / 2);
        if (splash_e4m3_to_fp32(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    uint8_t c = a - splash_e4m3_to_fp32(lo) <= splash_e4m3_to_fp32(hi) - a ? lo : hi;
    return (uint8_t)(c | (x < 0 && c ? 0x80 : 0));
}

enum mo_kind { MO_FP8_TENSOR, CT_FP8_TENSOR, CT_FP8_CHANNEL, CT_FP8_CHANNEL_BF16, CT_NVFP4 };

/* One module's tensors for kind, replacing the base's, and the values they decode to. */
static void write_module(struct test_st_file *f, const char *module, enum mo_kind kind,
                         const float *w, int64_t rows, int64_t cols, float *out)
{
    const char *suffix[] = {"weight", "weight_scale", "weight_scale_2", "input_scale",
                            "weight_packed", "weight_global_scale"};
    char name[256];
    for (size_t i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%s.%s", module, suffix[i]);
        test_st_remove(f, name);
    }
    int64_t shape[2] = {rows, cols}, one[1] = {1};
    size_t n = (size_t)(rows * cols);
    uint8_t *codes = calloc(n, 1);
    float *scales = malloc((size_t)rows * sizeof *scales);
    if (kind == CT_NVFP4) {
        float amax = 0;
        for (size_t i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(w[i]));
        float gs = 448.0f * 6.0f / amax; /* weight_global_scale: 1 / g */
        float g = (float)(1.0 / (double)gs);
        uint8_t *sc = malloc(n / 16);
        for (size_t b = 0; b < n / 16; b++) {
            float bmax = 0;
            for (size_t j = 0; j < 16; j++)
                bmax = fmaxf(bmax, fabsf(w[16 * b + j]));
            sc[b] = e4m3_code(bmax / 6.0f / g);
            float s = g * splash_e4m3_to_fp32(sc[b]);
            for (size_t j = 0; j < 16; j++) {
                unsigned c = s > 0 ? e2m1_code(w[16 * b + j] / s) : 0;
                codes[(16 * b + j) / 2] |= (uint8_t)(c << (4 * (j & 1)));
                out[16 * b + j] = s * e2m1_value(c);
            }
        }
        int64_t pshape[2] = {rows, cols / 2}, sshape[2] = {rows, cols / 16};
        snprintf(name, sizeof name, "%s.weight_packed", module);
        test_st_add(f, name, "U8", 2, pshape, codes, n / 2);
        snprintf(name, sizeof name, "%s.weight_scale", module);
        test_st_add(f, name, "F8_E4M3", 2, sshape, sc, n / 16);
        snprintf(name, sizeof name, "%s.weight_global_scale", module);
        test_st_add(f, name, "F32", 1, one, &gs, 4);
        free(sc);
    } else {
        int per_row = kind == CT_FP8_CHANNEL || kind == CT_FP8_CHANNEL_BF16;
        int bf16 = kind == CT_FP8_CHANNEL_BF16;
        float amax_all = 0;
        for (size_t i = 0; i < n; i++)
            amax_all = fmaxf(amax_all, fabsf(w[i]));
        for (int64_t r = 0; r < rows; r++) {
            float amax = 0;
            for (int64_t j = 0; j < cols; j++)
                amax = fmaxf(amax, fabsf(w[r * cols + j]));
            scales[r] = (per_row ? amax : amax_all) / 448.0f;
            if (bf16) /* the scale as the file holds it */
                scales[r] = splash_bf16_to_fp32(splash_fp32_to_bf16(scales[r] * 1.01f));
            for (int64_t j = 0; j < cols; j++) {
                codes[r * cols + j] = e4m3_code(w[r * cols + j] / scales[r]);
                out[r * cols + j] = scales[r] * splash_e4m3_to_fp32(codes[r * cols + j]);
            }
        }
        snprintf(name, sizeof name, "%s.weight", module);
        test_st_add(f, name, "F8_E4M3", 2, shape, codes, n);
        int64_t cshape[2] = {rows, 1};
        snprintf(name, sizeof name, "%s.weight_scale", module);
        if (bf16) {
            uint16_t *h = malloc((size_t)rows * 2);
            for (int64_t r = 0; r < rows; r++)
                h[r] = splash_fp32_to_bf16(scales[r]);
            test_st_add(f, name, "BF16", 2, cshape, h, (size_t)rows * 2);
            free(h);
        } else if (per_row)
            test_st_add(f, name, "F32", 2, cshape, scales, (size_t)rows * 4);
        else
            test_st_add(f, name, "F32", kind == MO_FP8_TENSOR ? 0 : 1, one, scales, 4);
    }
    free(codes);
    free(scales);
}

static json_t *mo_config(enum mo_kind kind)
{
    if (kind == MO_FP8_TENSOR)
        return json_pack("{s:s, s:s, s:[s, s]}", "quant_method", "modelopt", "quant_algo", "FP8",
                         "ignore", "model.language_model.layers.*.linear_attn.in_proj_a",
                         "model.language_model.layers.*.linear_attn.in_proj_b");
    json_t *weights =
        kind == CT_NVFP4
            ? json_pack("{s:i, s:s, s:s, s:i}", "num_bits", 4, "type", "float", "strategy",
                        "tensor_group", "group_size", 16)
            : json_pack("{s:i, s:s, s:s}", "num_bits", 8, "type", "float", "strategy",
                        kind == CT_FP8_TENSOR ? "tensor" : "channel");
    const char *format = kind == CT_NVFP4 ? "nvfp4-pack-quantized" : "float-quantized";
    return json_pack("{s:s, s:s, s:{s:{s:[s], s:o, s:s}}, s:[s]}", "quant_method",
                     "compressed-tensors", "format", format, "config_groups", "group_0",
                     "targets", "Linear", "weights", weights, "format", format, "ignore",
                     "re:.*linear_attn\\.in_proj_[ab]$");
}

/* The Model Optimizer base with every FFN projection written as kind: the loader gives
 * the format's blocks decoding to the values written. */
static void mo_round_trip(enum mo_kind kind, const char *label, const char *format)
{
    char rel[256], path[1024], dir[256];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    snprintf(rel, sizeof rel, MO_BASE);
    test_testdata_path(path, sizeof path, rel);
    assert_int_equal(splash_st_target_open(splash_registry_global(), path, SPLASH_ST_DECODE_F32,
                                           &m, &err),
                     SPLASH_OK);
    const struct splash_meta_api *api = splash_meta_api_get();
    struct test_st_file f;
    snprintf(rel, sizeof rel, MO_BASE "/model.safetensors");
    assert_int_equal(test_st_read(test_testdata_path(path, sizeof path, rel), &f), 0);
    float *expected[N_LAYERS][3];
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96], module[200];
            snprintf(name, sizeof name, "blk.%d.%s", l, gguf_projs[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            int64_t n = t->ne[0] * t->ne[1];
            float *w = malloc((size_t)n * sizeof *w);
            t->format->to_float(t->data, w, n);
            expected[l][p] = malloc((size_t)n * sizeof(float));
            snprintf(module, sizeof module, MO_PREFIX "%d.mlp.%s", l, projs[p]);
            write_module(&f, module, kind, w, t->ne[1], t->ne[0], expected[l][p]);
            free(w);
        }
    splash_meta_close(m);
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(test_st_write(&f, path), 0);
    test_st_free(&f);
    snprintf(rel, sizeof rel, MO_BASE "/config.json");
    json_t *config = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    json_object_set_new(config, "quantization_config", mo_config(kind));
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
    m = NULL;
    if (splash_st_target_open(splash_registry_global(), dir, 0, &m, &err))
        fail_msg("%s: %s", label, err.msg);
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, gguf_projs[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            assert_string_equal(t->type_name, format);
            int64_t n = t->ne[0] * t->ne[1];
            float *x = malloc((size_t)n * sizeof *x);
            t->format->to_float(t->data, x, n);
            for (int64_t i = 0; i < n; i++)
                if (fabs((double)x[i] - expected[l][p][i]) > 1e-6 * (fabs(expected[l][p][i]) + 1e-6))
                    fail_msg("%s: %s value %lld: %g, written %g", label, name, (long long)i, x[i],
                             expected[l][p][i]);
            free(x);
            free(expected[l][p]);
        }
    printf("  %-30s 24 projections load as %s, decoding as written\n", label, format);
    splash_meta_close(m);
    test_st_rmdir(dir);
}

static void test_modelopt_fp8_per_tensor(void **state)
{
    mo_round_trip(MO_FP8_TENSOR, "Model Optimizer FP8", "FP8_E4M3");
}

static void test_ct_fp8_per_tensor(void **state)
{
    mo_round_trip(CT_FP8_TENSOR, "compressed-tensors FP8 tensor", "FP8_E4M3");
}

static void test_ct_fp8_per_channel(void **state)
{
    mo_round_trip(CT_FP8_CHANNEL, "compressed-tensors FP8 channel", "FP8_E4M3");
}

static void test_ct_fp8_per_channel_bf16(void **state)
{
    mo_round_trip(CT_FP8_CHANNEL_BF16, "compressed-tensors FP8 bf16", "FP8_E4M3");
}

static void test_ct_nvfp4(void **state)
{
    mo_round_trip(CT_NVFP4, "compressed-tensors NVFP4", "NVFP4_G");
}

/* ---- broken checkpoints ------------------------------------------------------------ */

/* A copy of the base whose model.safetensors edit() changed (config too, when given). */
static void write_edited(const char *dir, void (*edit)(struct test_st_file *f, json_t *config))
{
    char path[1024];
    struct test_st_file f;
    assert_int_equal(test_st_read(base_path(path, sizeof path, "model.safetensors"), &f), 0);
    json_t *config = json_load_file(base_path(path, sizeof path, "config.json"), 0, NULL);
    if (edit)
        edit(&f, config);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(test_st_write(&f, path), 0);
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
    test_st_free(&f);
}

/* Opening dir fails with a message holding every one of the NULL-terminated strings. */
static void refused(const char *dir, ...)
{
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    enum splash_status st = splash_st_target_open(splash_registry_global(), dir, 0, &m, &err);
    if (st == SPLASH_OK) {
        splash_meta_close(m);
        fail_msg("%s loaded", dir);
    }
    printf("  refused: %s\n", err.msg);
    va_list ap;
    va_start(ap, dir);
    for (const char *s; (s = va_arg(ap, const char *));)
        if (!strstr(err.msg, s))
            fail_msg("the message does not name %s: %s", s, err.msg);
    va_end(ap);
}

static void test_truncated_shard(void **state)
{
    char dir[256], path[512];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_edited(dir, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "r+");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, size - 1000), 0);
    refused(dir, "model.safetensors", NULL);
    test_st_rmdir(dir);
}

static void drop_scales(struct test_st_file *f, json_t *config)
{
    assert_true(test_st_remove(f, PREFIX "2.mlp.up_proj.scales"));
}

static void test_missing_scales(void **state)
{
    char dir[256];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_edited(dir, drop_scales);
    refused(dir, "model.safetensors", PREFIX "2.mlp.up_proj", "scales", NULL);
    test_st_rmdir(dir);
}

static void codes_as_i32(struct test_st_file *f, json_t *config)
{
    struct test_st_tensor *t = test_st_find(f, PREFIX "1.mlp.down_proj.weight");
    snprintf(t->dtype, sizeof t->dtype, "I32");
}

static void test_codes_dtype(void **state)
{
    char dir[256];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_edited(dir, codes_as_i32);
    refused(dir, "model.safetensors", PREFIX "1.mlp.down_proj.weight", "I32", "U32", NULL);
    test_st_rmdir(dir);
}

/* The config says 8 bits for a module stored at 4. */
static void config_8bit(struct test_st_file *f, json_t *config)
{
    json_t *o = json_pack("{s:i, s:i}", "bits", 8, "group_size", 64);
    json_object_set(json_object_get(config, "quantization"), PREFIX "1.mlp.gate_proj", o);
    json_object_set_new(json_object_get(config, "quantization_config"), PREFIX "1.mlp.gate_proj", o);
}

static void test_shape_disagrees_with_config(void **state)
{
    char dir[256];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_edited(dir, config_8bit);
    refused(dir, "model.safetensors", PREFIX "1.mlp.gate_proj.scales", "8 bits", NULL);
    test_st_rmdir(dir);
}

static void test_index_names_missing_shard(void **state)
{
    char dir[256], path[512];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_edited(dir, NULL);
    char from[512];
    snprintf(from, sizeof from, "%s/model.safetensors", dir);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    assert_int_equal(rename(from, path), 0);
    struct test_st_file f;
    assert_int_equal(test_st_read(path, &f), 0);
    json_t *map = json_object();
    for (size_t i = 0; i < f.n; i++)
        json_object_set_new(map, f.t[i].name, json_string("model-00001-of-00002.safetensors"));
    json_object_set_new(map, PREFIX "0.mlp.up_proj.scales",
                        json_string("model-00002-of-00002.safetensors"));
    json_t *index = json_pack("{s:{}, s:o}", "metadata", "weight_map", map);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    assert_int_equal(json_dump_file(index, path, 0), 0);
    json_decref(index);
    test_st_free(&f);
    refused(dir, "model.safetensors.index.json", "model-00002-of-00002.safetensors", NULL);
    test_st_rmdir(dir);
}

/* A MoE whose router does not renormalise its top-k is refused (the family does). */
static void test_moe_norm_topk_false(void **state)
{
    char dir[256], path[1024], rel[256], link[512];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/model.safetensors");
    snprintf(link, sizeof link, "%s/model.safetensors", dir);
    char *target = realpath(test_testdata_path(path, sizeof path, rel), NULL);
    assert_non_null(target);
    assert_int_equal(symlink(target, link), 0);
    free(target);
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/config.json");
    json_t *config = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    json_object_set_new(json_object_get(config, "text_config"), "norm_topk_prob", json_false());
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
    struct splash_check_result res;
    struct splash_err err = {{0}};
    assert_int_not_equal(splash_model_check(splash_registry_global(), dir, &res, &err), SPLASH_OK);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "expert_weights_norm: false"));
    splash_check_result_free(&res);
    test_st_rmdir(dir);
}

/* Experts stored one module each (experts.<e>.<proj>, as transformers names them) load
 * into the same stacked matrices as MLX's switch_mlp: the MoE base split per expert. */
static void test_experts_per_module(void **state)
{
    char rel[256], path[1024], dir[256];
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit");
    test_testdata_path(path, sizeof path, rel);
    struct splash_meta *stacked = NULL, *split = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_st_target_open(splash_registry_global(), path, 0, &stacked, &err),
                     SPLASH_OK);
    struct test_st_file f;
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/model.safetensors");
    assert_int_equal(test_st_read(test_testdata_path(path, sizeof path, rel), &f), 0);
    const char *parts[3] = {"weight", "scales", "biases"};
    int split_tensors = 0;
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 3; i++) {
                char name[256];
                snprintf(name, sizeof name, PREFIX "%d.mlp.switch_mlp.%s.%s", l, projs[p], parts[i]);
                struct test_st_tensor *t = test_st_find(&f, name);
                assert_non_null(t);
                struct test_st_tensor whole = *t;
                whole.data = malloc(t->n_bytes);
                memcpy(whole.data, t->data, t->n_bytes);
                test_st_remove(&f, name);
                size_t per = whole.n_bytes / (size_t)whole.shape[0];
                for (int64_t e = 0; e < whole.shape[0]; e++) {
                    snprintf(name, sizeof name, PREFIX "%d.mlp.experts.%lld.%s.%s", l,
                             (long long)e, projs[p], parts[i]);
                    test_st_add(&f, name, whole.dtype, 2, whole.shape + 1,
                                (uint8_t *)whole.data + (size_t)e * per, per);
                    split_tensors++;
                }
                free(whole.data);
            }
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(test_st_write(&f, path), 0);
    test_st_free(&f);
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/config.json");
    json_t *config = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
    if (splash_st_target_open(splash_registry_global(), dir, 0, &split, &err))
        fail_msg("%s", err.msg);
    const struct splash_meta_api *api = splash_meta_api_get();
    assert_int_equal(api->n_tensors(split), api->n_tensors(stacked));
    const char *exps[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, exps[p]);
            const struct splash_tensor_info *a = api->tensor_find(stacked, name),
                                            *b = api->tensor_find(split, name);
            assert_non_null(b);
            assert_int_equal(a->n_bytes, b->n_bytes);
            assert_int_equal(b->ne[2], 8);
            assert_memory_equal(a->data, b->data, a->n_bytes);
        }
    printf("  %d per-expert tensors stack into the switch_mlp matrices byte for byte\n",
           split_tensors);
    splash_meta_close(split);
    splash_meta_close(stacked);
    /* such experts cannot be read alone from one stack of planes: an --expert-memory size
     * is refused saying why, and auto's smallest store loads them whole */
    struct splash_pool *pool = splash_pool_create(1);
    struct splash_model_opts mo = {.pool = pool, .kv_format = SPLASH_KV_BF16,
                                   .expert_memory = 1u << 20};
    struct splash_loaded_model *lm = NULL;
    assert_int_equal(splash_model_load(splash_registry_global(), dir, &mo, 1, &lm, &err),
                     SPLASH_ERR_UNSUPPORTED);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "--expert-memory"));
    assert_non_null(strstr(err.msg, "exps.weight"));
    assert_non_null(strstr(err.msg, "imported one module each"));
    mo.expert_memory = SPLASH_EXPERTS_SMALLEST;
    if (splash_model_load(splash_registry_global(), dir, &mo, 1, &lm, &err))
        fail_msg("%s", err.msg);
    assert_true(lm->info.routed_expert_bytes > 0);
    assert_int_equal(lm->info.expert_store_bytes, 0);
    splash_model_unload(lm);
    splash_pool_destroy(pool);
    test_st_rmdir(dir);
}

/* transformers 5 fuses a layer's experts into two float parameters: mlp.experts.gate_up_proj
 * [E, 2F, H] (each expert's gate rows, then its up rows) and mlp.experts.down_proj [E, H, F].
 * The MoE base decoded to F32 and written that way loads into the same stacked matrices
 * byte for byte; a gate_up_proj whose rows disagree with config.json is refused naming it. */
static void write_fused(const char *dir, const struct splash_meta *dec, int64_t ff_config)
{
    char rel[256], path[1024];
    const struct splash_meta_api *api = splash_meta_api_get();
    struct test_st_file f;
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/model.safetensors");
    assert_int_equal(test_st_read(test_testdata_path(path, sizeof path, rel), &f), 0);
    const char *parts[3] = {"weight", "scales", "biases"};
    for (int l = 0; l < 4; l++) {
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 3; i++) {
                char name[256];
                snprintf(name, sizeof name, PREFIX "%d.mlp.switch_mlp.%s.%s", l, projs[p], parts[i]);
                assert_true(test_st_remove(&f, name));
            }
        char name[256];
        const struct splash_tensor_info *t[3];
        const char *exps[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "blk.%d.%s", l, exps[p]);
            t[p] = api->tensor_find(dec, name);
            assert_non_null(t[p]);
            assert_string_equal(t[p]->type_name, "F32");
        }
        const int64_t E = t[0]->ne[2], F = t[0]->ne[1], H = t[0]->ne[0];
        const size_t part = (size_t)(F * H) * sizeof(float);
        uint8_t *gate_up = malloc(2 * part * (size_t)E);
        assert_non_null(gate_up);
        for (int64_t e = 0; e < E; e++)
            for (int h = 0; h < 2; h++)
                memcpy(gate_up + (size_t)(2 * e + h) * part,
                       (const uint8_t *)t[h]->data + (size_t)e * part, part);
        const int64_t gu_shape[3] = {E, 2 * F, H}, down_shape[3] = {E, H, F};
        snprintf(name, sizeof name, PREFIX "%d.mlp.experts.gate_up_proj", l);
        test_st_add(&f, name, "F32", 3, gu_shape, gate_up, 2 * part * (size_t)E);
        snprintf(name, sizeof name, PREFIX "%d.mlp.experts.down_proj", l);
        test_st_add(&f, name, "F32", 3, down_shape, t[2]->data, t[2]->n_bytes);
        free(gate_up);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(test_st_write(&f, path), 0);
    test_st_free(&f);
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit/config.json");
    json_t *config = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    if (ff_config)
        json_object_set_new(json_object_get(config, "text_config"), "moe_intermediate_size",
                            json_integer(ff_config));
    assert_int_equal(test_st_write_config(dir, config), 0);
    json_decref(config);
}

static void test_experts_fused(void **state)
{
    char rel[256], path[1024], dir[256];
    snprintf(rel, sizeof rel, "safetensors/qwen35moe-tiny-mlx-4bit");
    test_testdata_path(path, sizeof path, rel);
    struct splash_meta *dec = NULL, *fused = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_st_target_open(splash_registry_global(), path, SPLASH_ST_DECODE_F32,
                                           &dec, &err),
                     SPLASH_OK);
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_fused(dir, dec, 0);
    if (splash_st_target_open(splash_registry_global(), dir, 0, &fused, &err))
        fail_msg("%s", err.msg);
    const struct splash_meta_api *api = splash_meta_api_get();
    assert_int_equal(api->n_tensors(fused), api->n_tensors(dec));
    const char *exps[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, exps[p]);
            const struct splash_tensor_info *a = api->tensor_find(dec, name),
                                            *b = api->tensor_find(fused, name);
            if (!b)
                fail_msg("%s is missing from the fused checkpoint's model", name);
            assert_string_equal(b->type_name, "F32");
            for (int k = 0; k < 4; k++)
                assert_int_equal(a->ne[k], b->ne[k]);
            assert_int_equal(a->n_bytes, b->n_bytes);
            assert_memory_equal(a->data, b->data, a->n_bytes);
        }
    printf("  fused gate_up_proj and down_proj of 4 layers split into the stacked matrices\n");
    splash_meta_close(fused);
    test_st_rmdir(dir);

    /* config.json's expert width disagrees with the fused rows */
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    write_fused(dir, dec, 64);
    refused(dir, "model.safetensors", "mlp.experts.gate_up_proj", "moe_intermediate_size 64",
            NULL);
    test_st_rmdir(dir);
    splash_meta_close(dec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlx_affine_every_bits_group),
        cmocka_unit_test(test_mlx_mxfp4),
        cmocka_unit_test(test_mlx_nvfp4),
        cmocka_unit_test(test_mlx_mode_defaults),
        cmocka_unit_test(test_modelopt_fp8_per_tensor),
        cmocka_unit_test(test_ct_fp8_per_tensor),
        cmocka_unit_test(test_ct_fp8_per_channel),
        cmocka_unit_test(test_ct_fp8_per_channel_bf16),
        cmocka_unit_test(test_ct_nvfp4),
        cmocka_unit_test(test_truncated_shard),
        cmocka_unit_test(test_missing_scales),
        cmocka_unit_test(test_codes_dtype),
        cmocka_unit_test(test_shape_disagrees_with_config),
        cmocka_unit_test(test_index_names_missing_shard),
        cmocka_unit_test(test_moe_norm_topk_false),
        cmocka_unit_test(test_experts_per_module),
        cmocka_unit_test(test_experts_fused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
