/* Model benchmark: random-weight models of real shapes, built once and cached
 * under build/bench-models/, timed like llama-bench (prefill 512, decode 128, 2
 * threads) and set against the machine's read bandwidth.
 *
 * For each model: tokens/s of prefill and decode, bytes of weights one decoded
 * token reads, the 2-thread read bandwidth, the decode speed that bandwidth
 * allows (the bound) and the fraction of it reached. The Qwen3.5-0.8B shape is
 * also set against llama.cpp on this machine (146 tokens/s prefill, 47 decode,
 * Q4_K_M, 2 threads). gpt-oss-20b's layers (four of them) run in OpenAI's own mix
 * (MXFP4 experts, Q8_0 elsewhere), timed by llama-bench's method (pp512, tg128). A
 * Flint-shaped four layers (flint-bench-4l: sinks, sliding and no-RoPE layers, a dense
 * layer, 64 experts with an ungated shared one) run in Q4_K_M.
 *
 * usage: bench-model [-p N] [-n N] [-s SHAPE]   (default 512 and 128, every shape) */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/read_bandwidth.h"
#include "core/host_impl.h"
#include "core/meta.h"
#include "core/model_bench.h"
#include "core/model_load.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"
#include "core/threadpool.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define BW_BYTES (1ull << 30)         /* far larger than any cache, as bench-formats */
#define REF_PREFILL_TPS 146.0         /* llama.cpp, 0.8B shape, Q4_K_M, 2 threads */
#define REF_DECODE_TPS 47.0
#define MOE_SAMPLE_VALUES (16ll << 20) /* the MoE's expert tensors repeat sampled blocks */

/* ---- models --------------------------------------------------------------------- */

/* build/bench-models/ beside this binary's build/bench/ */
static void models_dir(char *out, size_t size)
{
    char exe[PATH_MAX - 32];
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

static int family_serves(const struct splash_registry *r, const char *arch)
{
    for (size_t i = 0; i < splash_registry_n_families(r); i++) {
        const char *const *a = splash_registry_family(r, i)->gguf_architectures;
        for (; a && *a; a++)
            if (!strcmp(*a, arch))
                return 1;
    }
    return 0;
}

/* Builds the model once; later runs reuse the file. */
static int ensure_model(const struct splash_registry *r, const char *dir, const char *shape_name,
                        const char *mix, int64_t max_sample, char *path, size_t size)
{
    snprintf(path, size, "%s/%s-%s.gguf", dir, shape_name, mix);
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0)
        return 0;
    struct splash_model_write_opts opts = {.mix = mix, .seed = 7, .n_threads = N_THREADS,
                                           .max_sample = max_sample};
    struct splash_model_write_stats stats;
    struct splash_err err = {{0}};
    printf("building %s (once) ...\n", path);
    fflush(stdout);
    if (splash_model_write_preset(r, shape_name, &opts, path, &stats, &err)) {
        fprintf(stderr, "bench-model: %s: %s\n", shape_name, err.msg);
        return -1;
    }
    printf("  %.1fM parameters, %.1f MiB, %.1f s\n", (double)stats.n_params / 1e6,
           (double)stats.file_bytes / (1024.0 * 1024.0), stats.seconds);
    return 0;
}

/* Weight bytes one decoded token reads: every tensor, but one row of an untied
 * token table and the used share of each expert tensor. */
static double decode_bytes(const struct splash_meta *m)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    int tied = api->tensor_find(m, "output.weight") == NULL;
    double used_share = 1.0;
    const char *arch = NULL;
    char key[96];
    int64_t n_expert = 0, n_used = 0;
    if (api->get_str(m, "general.architecture", &arch, NULL) == SPLASH_OK) {
        snprintf(key, sizeof key, "%s.expert_count", arch);
        api->get_i64(m, key, &n_expert, NULL);
        snprintf(key, sizeof key, "%s.expert_used_count", arch);
        api->get_i64(m, key, &n_used, NULL);
        if (n_expert > 0 && n_used > 0)
            used_share = (double)n_used / (double)n_expert;
    }
    double total = 0;
    for (size_t i = 0; i < api->n_tensors(m); i++) {
        const struct splash_tensor_info *t = api->tensor_at(m, i);
        double bytes = (double)t->n_bytes;
        if (!tied && !strcmp(t->name, "token_embd.weight"))
            bytes /= (double)t->ne[1];
        else if (strstr(t->name, "_exps."))
            bytes *= used_share;
        total += bytes;
    }
    return total;
}

static int bench_one(const struct splash_registry *r, const char *path, int n_prompt, int n_gen,
                     double bandwidth, int reference)
{
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8,
                                     .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    if (splash_model_load(r, path, &opts, N_THREADS, &lm, &err)) {
        fprintf(stderr, "bench-model: %s\n", err.msg);
        return -1;
    }
    struct splash_bench_result res;
    if (splash_model_bench(lm, n_prompt, n_gen, 1, &res, &err)) {
        fprintf(stderr, "bench-model: %s: %s\n", path, err.msg);
        splash_model_unload(lm);
        return -1;
    }
    double bytes = decode_bytes(lm->meta);
    double bound = bandwidth > 0 ? bandwidth * 1e9 / bytes : 0;
    const char *name = strrchr(path, '/');
    printf("%s: %s\n", name ? name + 1 : path, lm->verdict.summary);
    printf("  prefill %4d tokens: %8.2f tokens/s", n_prompt, res.prefill_tps);
    if (reference)
        printf("   (llama.cpp %.0f: x%.2f)", REF_PREFILL_TPS, res.prefill_tps / REF_PREFILL_TPS);
    printf("\n  decode  %4d tokens: %8.2f tokens/s", n_gen, res.decode_tps);
    if (reference)
        printf("   (llama.cpp %.0f: x%.2f)", REF_DECODE_TPS, res.decode_tps / REF_DECODE_TPS);
    printf("\n  weights read per decoded token: %.1f MiB; bandwidth bound %.1f tokens/s; "
           "reached %.0f%%\n",
           bytes / (1024.0 * 1024.0), bound, bound > 0 ? 100.0 * res.decode_tps / bound : 0.0);
    fflush(stdout);
    splash_model_unload(lm);
    return 0;
}

/* A MoE shape of the architecture arch, its expert tensors sampled; 0, or 1 on a failure. */
static int bench_shape(const struct splash_registry *r, const char *dir, const char *arch,
                       const char *shape, const char *mix, int n_prompt, int n_gen, double bw)
{
    char path[PATH_MAX + 64];
    if (!family_serves(r, arch)) {
        printf("note: no family plugin serves %s: the %s shape is skipped\n", arch, shape);
        return 0;
    }
    return ensure_model(r, dir, shape, mix, MOE_SAMPLE_VALUES, path, sizeof path) ||
           bench_one(r, path, n_prompt, n_gen, bw, 0);
}

int main(int argc, char **argv)
{
    int n_prompt = 512, n_gen = 128;
    const char *only = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            n_prompt = 0; /* a flag without its value */
        else if (!strcmp(argv[i], "-p"))
            n_prompt = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-n"))
            n_gen = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-s"))
            only = argv[i + 1];
        else
            n_prompt = 0;
    }
    static const char *const shapes[] = {"qwen35-0.8b", "qwen35moe-35b-a3b-4l", "gpt-oss-20b-4l",
                                         "flint-bench-4l"};
    int known = !only;
    for (size_t i = 0; only && i < sizeof shapes / sizeof shapes[0]; i++)
        known |= !strcmp(only, shapes[i]);
    if (n_prompt < 1 || n_gen < 1 || !known) {
        fprintf(stderr, "usage: bench-model [-p N] [-n N] [-s qwen35-0.8b|qwen35moe-35b-a3b-4l|"
                        "gpt-oss-20b-4l|flint-bench-4l]\n");
        return 2;
    }
    /* the host answers plugins' format look-ups from the global registry */
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    char dir[PATH_MAX], path[PATH_MAX + 64];
    models_dir(path, sizeof path);
    mkdir(path, 0755);
    if (!realpath(path, dir)) {
        fprintf(stderr, "bench-model: %s: cannot create the model cache\n", path);
        return 1;
    }

    /* the bandwidth bench-formats measures, by the same code */
    uint64_t *buf = splash_alloc_aligned(64, BW_BYTES);
    double bw = 0;
    if (buf) {
        for (size_t i = 0; i < BW_BYTES / 8; i++)
            buf[i] = i;
        bw = read_bandwidth(buf, BW_BYTES / 8, N_THREADS);
        splash_free_aligned(buf);
    }
    printf("read bandwidth, %d threads (best of 5): %.1f GB/s\n", N_THREADS, bw);

    int rc = 0;
#define RUNS(name) (!only || !strcmp(only, name))
    if (RUNS("qwen35-0.8b") && (ensure_model(r, dir, "qwen35-0.8b", "Q4_K_M", 0, path, sizeof path) ||
                                bench_one(r, path, n_prompt, n_gen, bw, 1)))
        rc = 1;
    if (RUNS("qwen35moe-35b-a3b-4l"))
        rc |= bench_shape(r, dir, "qwen35moe", "qwen35moe-35b-a3b-4l", "Q4_K_M", n_prompt, n_gen,
                          bw);
    if (RUNS("gpt-oss-20b-4l"))
        rc |= bench_shape(r, dir, "gpt-oss", "gpt-oss-20b-4l", "MXFP4_MOE", n_prompt, n_gen, bw);
    if (RUNS("flint-bench-4l"))
        rc |= bench_shape(r, dir, "flint", "flint-bench-4l", "Q4_K_M", n_prompt, n_gen, bw);
    return rc;
}
