/* MLX against GGUF on the same weights: a Qwen3.5-0.8B-shaped random model written as
 * a GGUF Q4_0 (splash make-model's writer), then written again by this file as the MLX
 * checkpoint mlx-lm would make of those weights (mlx-lm's sanitized layout, affine 4-bit
 * in groups of 64, bf16 scales and biases), both built once under build/bench-models/.
 * Each is loaded and timed like bench-model (prefill 512, decode 128, 2 threads); the
 * ratio MLX / GGUF is printed for both.
 *
 * usage: bench-mlx [-p N] [-n N] */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/modelgen/model_writer.h"
#include "core/meta.h"
#include "core/model_bench.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "splash/format.h"
#include "splash/fp.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define SHAPE "qwen35-0.8b"
#define BITS 4
#define GROUP 64
#define PREFIX "language_model.model."

static void models_dir(char *out, size_t size)
{
    char exe[PATH_MAX - 256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, size, "build/bench-models");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, size, "%s/../bench-models", exe);
}

/* ---- the MLX checkpoint of a GGUF's weights ------------------------------------------ */

struct entry {
    char name[200];
    const char *dtype;
    int rank;
    int64_t shape[3];
    void *data;
    size_t bytes;
};

struct entries {
    struct entry *v;
    size_t n, cap;
};

static struct entry *push(struct entries *e, const char *name, const char *dtype, int rank,
                          int64_t s0, int64_t s1, int64_t s2, size_t bytes)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 512;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
    }
    struct entry *x = &e->v[e->n++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = dtype;
    x->rank = rank;
    x->shape[0] = s0;
    x->shape[1] = s1;
    x->shape[2] = s2;
    x->bytes = bytes;
    x->data = malloc(bytes);
    return x;
}

/* GGUF's tiled value heads back to the checkpoints' grouped order: block t = j hk + k
 * holds grouped head g = k r + j. */
static void untile(float *x, size_t blk, int64_t hv, int64_t hk)
{
    float *tmp = malloc(blk * (size_t)hv * sizeof *tmp);
    int64_t r = hv / hk;
    for (int64_t g = 0; g < hv; g++)
        memcpy(tmp + (size_t)g * blk, x + (size_t)((g % r) * hk + g / r) * blk, blk * sizeof *x);
    memcpy(x, tmp, blk * (size_t)hv * sizeof *x);
    free(tmp);
}

static void unpermute(float *x, int perm, int64_t rows, int64_t cols, int64_t hk, int64_t hv,
                      int64_t dk, int64_t dv)
{
    if (perm == ST_PERM_ROWS)
        untile(x, (size_t)(rows / hv * cols), hv, hk);
    else if (perm == ST_PERM_ROWS_V)
        untile(x + 2 * hk * dk * cols, (size_t)(dv * cols), hv, hk);
    else if (perm == ST_PERM_COLS)
        for (int64_t i = 0; i < rows; i++)
            untile(x + i * cols, (size_t)dv, hv, hk);
}

/* mlx-lm's affine quantizer: per group, scale (max - min) / 15 and bias min in bf16. */
static void affine_row(const float *w, int64_t cols, uint8_t *codes, uint16_t *scales,
                       uint16_t *biases)
{
    memset(codes, 0, (size_t)cols * BITS / 8);
    for (int64_t g0 = 0, k = 0; g0 < cols; g0 += GROUP, k++) {
        float mn = w[g0], mx = w[g0];
        for (int64_t j = g0; j < g0 + GROUP; j++) {
            mn = fminf(mn, w[j]);
            mx = fmaxf(mx, w[j]);
        }
        scales[k] = splash_fp32_to_bf16(mx > mn ? (mx - mn) / 15.0f : 1e-6f);
        biases[k] = splash_fp32_to_bf16(mn);
        float s = splash_bf16_to_fp32(scales[k]), b = splash_bf16_to_fp32(biases[k]);
        for (int64_t j = g0; j < g0 + GROUP; j++) {
            long q = lroundf((w[j] - b) / s);
            q = q < 0 ? 0 : q > 15 ? 15 : q;
            codes[j / 2] |= (uint8_t)(q << (4 * (j & 1)));
        }
    }
}

static const struct st_rule *rule_for(const char *gguf, int64_t *layer)
{
    *layer = -1;
    if (sscanf(gguf, "blk.%lld.", (long long *)layer) == 1) {
        const char *rest = strchr(gguf + 4, '.') + 1;
        for (size_t i = 0; i < st_n_layer_rules; i++)
            if (!strcmp(st_layer_rules[i].gguf, rest))
                return &st_layer_rules[i];
        return NULL;
    }
    for (size_t i = 0; i < st_n_global_rules; i++)
        if (!strcmp(st_global_rules[i].gguf, gguf))
            return &st_global_rules[i];
    return NULL;
}

static int write_entries(const struct entries *e, const char *path)
{
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < e->n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < e->v[i].rank; d++)
            json_array_append_new(shape, json_integer(e->v[i].shape[d]));
        json_object_set_new(h, e->v[i].name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", e->v[i].dtype, "shape",
                                      shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + e->v[i].bytes)));
        off += e->v[i].bytes;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    FILE *f = fopen(path, "wb");
    int bad = !f;
    if (f) {
        uint64_t n = padded;
        bad |= fwrite(&n, 8, 1, f) != 1 || fwrite(text, 1, len, f) != len;
        for (size_t i = len; i < padded; i++)
            bad |= fputc(' ', f) == EOF;
        for (size_t i = 0; i < e->n; i++)
            bad |= fwrite(e->v[i].data, 1, e->v[i].bytes, f) != e->v[i].bytes;
        bad |= fclose(f) != 0;
    }
    free(text);
    return bad ? -1 : 0;
}

/* The MLX directory of the GGUF's weights: every tensor decoded, mapped back through the
 * loader's own rules (st_names.c), projections quantized affine 4-bit / 64. */
static int write_mlx(const struct splash_registry *r, const char *gguf, const char *dir)
{
    struct splash_meta *m;
    struct splash_err err = {{0}};
    if (splash_meta_open_gguf(gguf, 0, &m, &err)) {
        fprintf(stderr, "bench-mlx: %s\n", err.msg);
        return -1;
    }
    splash_meta_bind_formats(m, r);
    const struct splash_meta_api *api = splash_meta_api_get();
    int64_t hk, hv, dk, inner, layers, embd, heads, kv, hd, ff, ctx, conv, interval, rot;
    double eps, base;
    api->get_i64(m, "qwen35.ssm.group_count", &hk, NULL);
    api->get_i64(m, "qwen35.ssm.time_step_rank", &hv, NULL);
    api->get_i64(m, "qwen35.ssm.state_size", &dk, NULL);
    api->get_i64(m, "qwen35.ssm.inner_size", &inner, NULL);
    api->get_i64(m, "qwen35.block_count", &layers, NULL);
    api->get_i64(m, "qwen35.embedding_length", &embd, NULL);
    api->get_i64(m, "qwen35.attention.head_count", &heads, NULL);
    api->get_i64(m, "qwen35.attention.head_count_kv", &kv, NULL);
    api->get_i64(m, "qwen35.attention.key_length", &hd, NULL);
    api->get_i64(m, "qwen35.feed_forward_length", &ff, NULL);
    api->get_i64(m, "qwen35.context_length", &ctx, NULL);
    api->get_i64(m, "qwen35.ssm.conv_kernel", &conv, NULL);
    api->get_i64(m, "qwen35.full_attention_interval", &interval, NULL);
    api->get_i64(m, "qwen35.rope.dimension_count", &rot, NULL);
    api->get_f64(m, "qwen35.attention.layer_norm_rms_epsilon", &eps, NULL);
    api->get_f64(m, "qwen35.rope.freq_base", &base, NULL);
    int64_t dv = inner / hv;
    struct entries e = {0};
    for (size_t i = 0; i < api->n_tensors(m); i++) {
        const struct splash_tensor_info *t = api->tensor_at(m, i);
        int64_t layer;
        const struct st_rule *rule = rule_for(t->name, &layer);
        if (!rule || rule->kind == ST_EXPERTS) {
            fprintf(stderr, "bench-mlx: %s has no MLX name\n", t->name);
            splash_meta_close(m);
            return -1;
        }
        int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2], n = cols * rows;
        float *x = malloc((size_t)n * sizeof *x);
        t->format->to_float(t->data, x, n);
        unpermute(x, rule->perm, rule->kind == ST_CONV ? rows : rows, cols, hk, hv, dk, dv);
        char name[200];
        if (layer >= 0)
            snprintf(name, sizeof name, PREFIX "layers.%lld.%s", (long long)layer, rule->hf);
        else
            snprintf(name, sizeof name, PREFIX "%s", rule->hf);
        char full[220];
        if (rule->kind == ST_LINEAR) {
            int64_t groups = cols / GROUP;
            snprintf(full, sizeof full, "%s.weight", name);
            struct entry *w = push(&e, full, "U32", 2, rows, cols * BITS / 32, 0,
                                   (size_t)(rows * cols * BITS / 8));
            snprintf(full, sizeof full, "%s.scales", name);
            struct entry *s = push(&e, full, "BF16", 2, rows, groups, 0, (size_t)(rows * groups) * 2);
            snprintf(full, sizeof full, "%s.biases", name);
            struct entry *b = push(&e, full, "BF16", 2, rows, groups, 0, (size_t)(rows * groups) * 2);
            for (int64_t k = 0; k < rows; k++)
                affine_row(x + k * cols, cols, (uint8_t *)w->data + k * cols * BITS / 8,
                           (uint16_t *)s->data + k * groups, (uint16_t *)b->data + k * groups);
        } else if (rule->kind == ST_A_LOG) {
            struct entry *a = push(&e, name, "F32", 1, n, 0, 0, (size_t)n * 4);
            for (int64_t k = 0; k < n; k++)
                ((float *)a->data)[k] = logf(-x[k]);
        } else {
            /* norms (the +1 stays baked in, as mlx-lm keeps it), dt_bias, conv [C, K, 1] */
            struct entry *f = rule->kind == ST_CONV
                                  ? push(&e, name, "BF16", 3, rows, cols, 1, (size_t)n * 2)
                                  : push(&e, name, "BF16", 1, n, 0, 0, (size_t)n * 2);
            for (int64_t k = 0; k < n; k++)
                ((uint16_t *)f->data)[k] = splash_fp32_to_bf16(x[k]);
        }
        free(x);
    }
    int64_t vocab = api->tensor_find(m, "token_embd.weight")->ne[1];
    splash_meta_close(m);
    mkdir(dir, 0755);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = write_entries(&e, path);
    for (size_t i = 0; i < e.n; i++)
        free(e.v[i].data);
    free(e.v);
    json_t *q = json_pack("{s:i, s:i, s:s}", "bits", BITS, "group_size", GROUP, "mode", "affine");
    json_t *text = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:{s:f, s:f, s:[i, i, i]}, s:b}",
        "model_type", "qwen3_5_text", "hidden_size", (json_int_t)embd, "num_hidden_layers",
        (json_int_t)layers, "intermediate_size", (json_int_t)ff, "max_position_embeddings",
        (json_int_t)ctx, "num_attention_heads", (json_int_t)heads, "num_key_value_heads",
        (json_int_t)kv, "head_dim", (json_int_t)hd, "rms_norm_eps", eps, "full_attention_interval",
        (json_int_t)interval, "linear_conv_kernel_dim", (json_int_t)conv, "linear_key_head_dim",
        (json_int_t)dk, "linear_num_key_heads", (json_int_t)hk, "linear_num_value_heads",
        (json_int_t)hv, "linear_value_head_dim", (json_int_t)dv, "vocab_size",
        (json_int_t)vocab, "rope_parameters",
        "rope_theta", base, "partial_rotary_factor", (double)rot / (double)hd, "mrope_section", 11,
        11, 10, "tie_word_embeddings", 1);
    json_t *config = json_pack("{s:s, s:O, s:o, s:o, s:b}", "model_type", "qwen3_5",
                               "quantization", q, "quantization_config", q, "text_config", text,
                               "tie_word_embeddings", 1);
    snprintf(path, sizeof path, "%s/config.json", dir);
    rc |= json_dump_file(config, path, JSON_INDENT(1));
    json_decref(config);
    return rc ? -1 : 0;
}

/* ---- timing ------------------------------------------------------------------------- */

static int bench(const struct splash_registry *r, const char *path, int n_prompt, int n_gen,
                 struct splash_bench_result *res)
{
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8,
                                     .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    if (splash_model_load(r, path, &opts, N_THREADS, &lm, &err) ||
        splash_model_bench(lm, n_prompt, n_gen, 1, res, &err)) {
        fprintf(stderr, "bench-mlx: %s: %s\n", path, err.msg);
        splash_model_unload(lm);
        return -1;
    }
    printf("  %-40s %7.1f MiB  prefill %7.1f tok/s  decode %6.1f tok/s\n", strrchr(path, '/') + 1,
           (double)lm->info.weight_bytes / (1024.0 * 1024.0), res->prefill_tps, res->decode_tps);
    splash_model_unload(lm);
    return 0;
}

int main(int argc, char **argv)
{
    int n_prompt = 512, n_gen = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-p"))
            n_prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n"))
            n_gen = atoi(argv[i + 1]);
    }
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    char dir[PATH_MAX - 128], gguf[PATH_MAX], mlx[PATH_MAX - 64];
    models_dir(dir, sizeof dir);
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/" SHAPE "-Q4_0.gguf", dir);
    snprintf(mlx, sizeof mlx, "%s/" SHAPE "-mlx-4bit", dir);
    struct stat sb;
    if (stat(gguf, &sb) != 0) {
        struct splash_model_write_opts opts = {.mix = "Q4_0", .seed = 7, .n_threads = N_THREADS};
        struct splash_model_write_stats stats;
        struct splash_err err = {{0}};
        printf("building %s (once) ...\n", gguf);
        fflush(stdout);
        if (splash_model_write_preset(r, SHAPE, &opts, gguf, &stats, &err)) {
            fprintf(stderr, "bench-mlx: %s\n", err.msg);
            return 1;
        }
    }
    char st_file[PATH_MAX + 32];
    snprintf(st_file, sizeof st_file, "%s/model.safetensors", mlx);
    if (stat(st_file, &sb) != 0) {
        printf("writing %s from its weights (once) ...\n", mlx);
        fflush(stdout);
        if (write_mlx(r, gguf, mlx))
            return 1;
    }
    struct splash_bench_result g, x;
    printf("prefill %d, decode %d, %d threads\n", n_prompt, n_gen, N_THREADS);
    if (bench(r, gguf, n_prompt, n_gen, &g) || bench(r, mlx, n_prompt, n_gen, &x))
        return 1;
    printf("  MLX affine 4-bit/64 vs GGUF Q4_0: prefill %.2fx, decode %.2fx\n",
           x.prefill_tps / g.prefill_tps, x.decode_tps / g.decode_tps);
    return 0;
}
