/* Streamed experts' bench: the Qwen3.6-35B-A3B shape's first four layers (make-model's
 * qwen35moe-35b-a3b-4l, expert tensors sampled), decoded with a store of 10%, 25%, 50%,
 * 75% and 100% of its routed experts (100%: all loaded, --expert-memory off). For each:
 * decode tokens/s over n tokens after a short prompt, the store's hit rate over that
 * decode, the experts' bytes read and the read rate while the forward waited. The model
 * file's pages are dropped from the page cache before each run (posix_fadvise, which any
 * user may do); reads go around the cache with O_DIRECT where the file system takes it.
 * Each store is that share of the experts' bytes plus its readers' staging and tables.
 * A store below one layer's experts of each format mix is refused, as --expert-memory
 * refuses it, and reported so.
 *
 * Two mixes by default. Q4_K_M, the issue's: its layers come in two mixes (layers 2 and 3
 * of four take Q6_K down projections, the reference's "more bits" layers), so the smallest
 * store is half the experts and 10% and 25% are refused. Q4_K_S: every layer's experts
 * Q4_K (its Q5_K down projections are the first eighth of the layers, none of four), one
 * mix, so a quarter of the experts (one layer) is the smallest store and only 10% is
 * refused.
 *
 * Measured on the 2-core test machine (one run, nice 10, 512 tokens, O_DIRECT reads, the
 * file's pages dropped before each run; decode tok/s, hit rate, GB/s while the forward
 * waited). Q4_K_M at load 0.6-1: 10% and 25% refused (the smallest store 931.7 MiB), 50%
 * 15.47 (0.653, 3.01), 75% 14.51 (0.828, 2.10), all loaded 16.19. Q4_K_S at load 8-13
 * (other work started): 10% refused (the smallest 433.2 MiB), 25% 7.30 (0.475, 1.80), 50%
 * 8.02 (0.657, 1.65), 75% 11.02 (0.825, 1.97), all loaded 9.86: the two mixes' speeds are
 * not comparable, their hit rates are. These random nets route uniformly, so a store holds
 * about its share of a step's experts before read-ahead.
 *
 * Reader depth (-r): each store runs once per reader count (SPLASH_EXPERT_READERS), the
 * counts interleaved, for -k rounds; the store's share then holds its slots with that
 * count's staging beside them.
 *
 * -f runs a model file or checkpoint directory instead of the built mixes (the tiny MLX
 * MoE under the tests' data, say); share 0 is the smallest store.
 *
 * usage: bench-experts [-n N] [-m MIX[,MIX...] | -f PATH] [-s PCT[,PCT...]] [-r N[,N...]]
 *        [-k ROUNDS]  (decoded tokens, default 512; mixes, default Q4_K_M,Q4_K_S; store
 *        shares in percent, default 10,25,50,75,100; reader counts, default the machine's;
 *        rounds, default 1) */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/modelgen/model_writer.h"
#include "core/family.h"
#include "core/model_load.h"
#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2
#define SHAPE "qwen35moe-35b-a3b-4l"
#define SAMPLE_VALUES (16ll << 20)
#define PROMPT 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* build/bench-models/ beside this binary's build/bench/, the model built once */
static int ensure_model(const struct splash_registry *r, const char *mix, char *path, size_t size)
{
    char exe[PATH_MAX - 256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    char dir[PATH_MAX - 128];
    snprintf(dir, sizeof dir, "%s/../bench-models", n > 0 ? exe : "build/bench");
    mkdir(dir, 0755);
    snprintf(path, size, "%s/%s-%s.gguf", dir, SHAPE, mix);
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0)
        return 0;
    struct splash_model_write_opts opts = {.mix = mix, .seed = 7, .n_threads = N_THREADS,
                                           .max_sample = SAMPLE_VALUES};
    struct splash_model_write_stats stats;
    struct splash_err err = {{0}};
    printf("building %s (once) ...\n", path);
    fflush(stdout);
    if (splash_model_write_preset(r, SHAPE, &opts, path, &stats, &err)) {
        fprintf(stderr, "bench-experts: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Decodes n tokens after PROMPT, teacher-forced on a fixed pseudo-random sequence. */
static int run(const struct splash_registry *r, const char *path, double share, uint64_t bytes,
               int n)
{
    struct splash_model_opts mo = {.kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32,
                                   .max_context = 4096, .expert_memory = bytes};
    struct splash_loaded_model *lm;
    struct splash_err err = {{0}};
    drop_cache(path);
    if (splash_model_load(r, path, &mo, N_THREADS, &lm, &err)) {
        printf("  %3.0f%%  refused: %s\n", share * 100, err.msg);
        return 0;
    }
    const struct splash_family_plugin *f = lm->family;
    int32_t *tokens = malloc((size_t)(PROMPT + n) * sizeof *tokens);
    float *logits = malloc((size_t)lm->info.n_vocab * sizeof *logits);
    uint32_t x = 12345;
    for (int i = 0; i < PROMPT + n; i++) {
        x = x * 1664525u + 1013904223u;
        tokens[i] = (int32_t)(x % (uint32_t)lm->info.n_vocab);
    }
    void *seq;
    int rc = 0;
    if (f->seq_create(lm->model, &seq, &err)) {
        fprintf(stderr, "bench-experts: %s\n", err.msg);
        rc = 1;
        goto out;
    }
    struct splash_lane lane = {.seq = seq, .tokens = tokens, .n_tokens = PROMPT, .logits = logits};
    struct splash_expert_stats s0, s1;
    if (splash_family_forward(f, lm->model, &lane, 1, &err))
        goto failed;
    int streamed = splash_family_expert_stats(f, lm->model, &s0);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        lane.tokens = tokens + PROMPT + i;
        lane.pos0 = PROMPT + i;
        lane.n_tokens = 1;
        if (splash_family_forward(f, lm->model, &lane, 1, &err))
            goto failed;
    }
    double dt = now_s() - t0;
    if (streamed) {
        splash_family_expert_stats(f, lm->model, &s1);
        uint64_t routed = s1.decode.routed - s0.decode.routed, read = s1.decode.read - s0.decode.read;
        double gb = (double)(s1.decode.bytes_read - s0.decode.bytes_read) / 1e9;
        double wait = s1.decode.read_seconds - s0.decode.read_seconds;
        uint64_t ahead = s1.decode.read_ahead - s0.decode.read_ahead,
                 used = s1.decode.read_ahead_used - s0.decode.read_ahead_used;
        printf("  %3.0f%%  %2d readers  store %7.1f MiB (%4d of %d slots)  decode %6.2f tok/s  hit rate %.3f "
               "(%.3f resident before any read)  read ahead %llu, used %llu  read %.2f GB "
               "(%.2f GB/s while waiting, %.1f s waited)  %s\n",
               share * 100, s1.readers, (double)s1.cap_bytes / 1048576.0, s1.slots, s1.experts, n / dt,
               routed ? 1.0 - (double)read / (double)routed : 0.0,
               routed ? 1.0 - (double)(read + used) / (double)routed : 0.0,
               (unsigned long long)ahead, (unsigned long long)used, gb,
               wait > 0 ? gb / wait : 0.0, wait, s1.direct ? "O_DIRECT" : "page cache");
    } else {
        printf("  %3.0f%%  all %.1f MiB of experts loaded  decode %6.2f tok/s\n", share * 100,
               (double)lm->info.routed_expert_bytes / 1048576.0, n / dt);
    }
    goto done;
failed:
    fprintf(stderr, "bench-experts: %s\n", err.msg);
    rc = 1;
done:
    f->seq_destroy(lm->model, seq);
out:
    free(tokens);
    free(logits);
    splash_model_unload(lm);
    return rc;
}

#define MAX_LIST 16

/* A comma list of numbers; its count, or -1 when one is not a number in [lo, hi]. */
static int parse_list(const char *v, double lo, double hi, double *out)
{
    int n = 0;
    for (const char *at = v; *at;) {
        char *end;
        double x = strtod(at, &end);
        if (end == at || x < lo || x > hi || n == MAX_LIST || (*end && *end != ','))
            return -1;
        out[n++] = x;
        at = *end ? end + 1 : end;
    }
    return n;
}

/* SPLASH_EXPERT_READERS for the next load (0: the machine's default). */
static void set_readers(int readers)
{
    char v[16];
    snprintf(v, sizeof v, "%d", readers);
    if (readers > 0)
        setenv("SPLASH_EXPERT_READERS", v, 1);
    else
        unsetenv("SPLASH_EXPERT_READERS");
}

/* The routed experts' bytes and the store's staging and tables beside its slots, from a
 * load at the smallest store with these readers. */
static int measure_store(const struct splash_registry *r, const char *path, uint64_t *routed,
                         uint64_t *overhead)
{
    struct splash_model_opts mo = {.kv_format = SPLASH_KV_INT8, .max_context = 4096,
                                   .expert_memory = SPLASH_EXPERTS_SMALLEST};
    struct splash_loaded_model *lm;
    struct splash_err err = {{0}};
    if (splash_model_load(r, path, &mo, N_THREADS, &lm, &err)) {
        fprintf(stderr, "bench-experts: %s\n", err.msg);
        return -1;
    }
    *routed = lm->info.routed_expert_bytes;
    struct splash_expert_stats s;
    splash_family_expert_stats(lm->family, lm->model, &s);
    *overhead = s.cap_bytes - s.arena_bytes;
    splash_model_unload(lm);
    return 0;
}

/* One mix's rows: its model built once, then each share of its routed experts, each with
 * every reader count in turn, for `rounds` rounds. */
static int bench_mix(const struct splash_registry *r, const char *mix, const char *file, int n,
                     const double *shares, int n_shares, const double *readers, int n_readers,
                     int rounds)
{
    char path[PATH_MAX];
    if (file)
        snprintf(path, sizeof path, "%s", file);
    else if (ensure_model(r, mix, path, sizeof path))
        return 1;
    uint64_t routed = 0, overhead[MAX_LIST];
    for (int k = 0; k < n_readers; k++) {
        set_readers((int)readers[k]);
        if (measure_store(r, path, &routed, &overhead[k]))
            return 1;
    }
    printf("%s %s: %.1f MiB of routed experts, %d tokens decoded, %d threads\n",
           file ? file : SHAPE, file ? "" : mix,
           (double)routed / 1048576.0, n, N_THREADS);
    fflush(stdout);
    int rc = 0;
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < n_shares; i++)
            for (int k = 0; k < n_readers; k++) {
                double share = shares[i] / 100.0;
                set_readers((int)readers[k]);
                uint64_t bytes = share >= 1.0   ? 0
                                 : share <= 0.0 ? SPLASH_EXPERTS_SMALLEST
                                                : (uint64_t)(share * (double)routed) + overhead[k];
                rc |= run(r, path, share, bytes, n);
                fflush(stdout);
                if (share >= 1.0)
                    break; /* all loaded: no readers */
            }
    return rc;
}

int main(int argc, char **argv)
{
    int n = 512, rounds = 1, n_shares = 5, n_readers = 1;
    char mixes[256] = "Q4_K_M,Q4_K_S";
    const char *file = NULL;
    double shares[MAX_LIST] = {10, 25, 50, 75, 100}, readers[MAX_LIST] = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc && strlen(argv[i + 1]) < sizeof mixes) {
            snprintf(mixes, sizeof mixes, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc &&
                   (n_shares = parse_list(argv[i + 1], 0, 100, shares)) > 0) {
            i++;
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc &&
                   (n_readers = parse_list(argv[i + 1], 1, 64, readers)) > 0) {
            i++;
        } else if (!strcmp(argv[i], "-f") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(argv[i], "-k") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench-experts [-n N] [-m MIX[,MIX...] | -f PATH] [-s PCT[,PCT...]] "
                            "[-r N[,N...]] [-k ROUNDS]\n");
            return 2;
        }
    }
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    int rc = 0;
    if (file)
        return bench_mix(r, NULL, file, n, shares, n_shares, readers, n_readers, rounds);
    for (char *save, *mix = strtok_r(mixes, ",", &save); mix; mix = strtok_r(NULL, ",", &save))
        rc |= bench_mix(r, mix, NULL, n, shares, n_shares, readers, n_readers, rounds);
    return rc;
}
