/* Prefix cache benchmark on the Qwen3.5-0.8B-shaped random model (the one bench-model
 * builds and caches under build/bench-models/), against the engine loop over its frame
 * protocol, in this process.
 *
 * 1. Next turn: a conversation of T tokens (turns closed by <|im_end|>), then its next
 *    turn (+200 tokens). The next turn's time to first token with the cache, against
 *    the same request on a cold engine (prefix cache off). Target: at most 2%.
 * 2. Shared system prompt: C concurrent conversations that share an S-token system
 *    prompt; prefill tokens computed and taken from the cache, and the wall time.
 * 3. The same conversations on the persistent SSD tier (every turn point copied at once,
 *    test hook SPLASH_TEST_WRITE_AHEAD_DELAY_MS=0): the bytes written as chains of KV
 *    pages (the system prompt's pages written once), against the same points written as
 *    whole seq_save blobs (test hook SPLASH_TEST_DISK_WHOLE=1, as before the pages file).
 *
 * usage: bench-cache [-T tokens] [-C conversations] [-S tokens] [-t threads] [-m GGUF]
 *        (16384, 32, 4096, 2 threads, the cached 0.8B-shaped model) */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/engine.h"
#include "server/engine/protocol.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"
#include "server/text/tokenizer/tokenizer.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define SHAPE "qwen35-0.8b"
#define NEXT_TURN 200

/* The process's CPU seconds (every thread): under a loaded machine a truer measure of
 * the work than wall time. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct engine_run {
    struct splash_engine_opts opts;
    pthread_t thread;
    int fd;
};

static void *engine_main(void *arg)
{
    struct engine_run *e = arg;
    splash_engine_main(&e->opts);
    return NULL;
}

static int engine_start(struct engine_run *e, const char *model, int threads, int64_t context,
                        int off);

static const char *persist_root; /* set: the persistent SSD tier under it */

static int engine_start(struct engine_run *e, const char *model, int threads, int64_t context,
                        int off)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
        return -1;
    memset(e, 0, sizeof *e);
    e->fd = sp[0];
    e->opts = (struct splash_engine_opts){.fd = sp[1], .model_path = model, .n_threads = threads,
                                          .max_context = context, .max_lanes = 32,
                                          .decode_share = 0.5, .prefix_cache_off = off};
    if (persist_root) {
        e->opts.cache_disk = 8ll << 30;
        e->opts.persistent_cache = 1;
        e->opts.cache_dir = persist_root;
    }
    if (pthread_create(&e->thread, NULL, engine_main, e))
        return -1;
    struct splash_frame f;
    struct splash_err err;
    if (splash_frame_read(e->fd, &f, &err) || f.type != SPLASH_FRAME_READY) {
        fprintf(stderr, "bench-cache: the engine did not start\n");
        return -1;
    }
    splash_frame_free(&f);
    return 0;
}

static void engine_stop(struct engine_run *e)
{
    struct splash_err err;
    splash_frame_write(e->fd, SPLASH_FRAME_SHUTDOWN, 0, NULL, &err);
    pthread_join(e->thread, NULL);
    close(e->fd);
    close(e->opts.fd);
}

static void submit(struct engine_run *e, uint64_t id, const int32_t *t, int n, int max_tokens,
                   int32_t reuse)
{
    struct splash_submit s = {.prompt = (int32_t *)t, .n_prompt = (size_t)n, .reuse_token = reuse};
    splash_gen_params_init(&s.params);
    s.params.max_tokens = max_tokens;
    s.params.sampling.temperature = 0;
    struct splash_err err;
    splash_frame_write_submit(e->fd, id, &s, &err);
}

struct outcome {
    double first_token, end;
    int64_t cached;
    int done, failed;
};

/* Until requests first..first+n-1 end. */
static int collect(struct engine_run *e, uint64_t first, int n, struct outcome *o)
{
    memset(o, 0, (size_t)n * sizeof *o);
    for (int left = n; left > 0;) {
        struct splash_frame f;
        struct splash_err err;
        if (splash_frame_read(e->fd, &f, &err))
            return -1;
        double t = now();
        if (f.id >= first && f.id < first + (uint64_t)n) {
            struct outcome *x = &o[f.id - first];
            if (f.type == SPLASH_FRAME_TOKENS && json_array_size(json_object_get(f.body, "t")) &&
                !x->first_token)
                x->first_token = t;
            if (f.type == SPLASH_FRAME_DONE) {
                x->cached = json_integer_value(json_object_get(f.body, "cached_tokens"));
                x->end = t;
                x->done = 1;
                left--;
            } else if (f.type == SPLASH_FRAME_ERROR) {
                fprintf(stderr, "bench-cache: request %llu: %s\n", (unsigned long long)f.id,
                        json_string_value(json_object_get(f.body, "message")));
                x->failed = 1;
                left--;
            }
        }
        splash_frame_free(&f);
    }
    return 0;
}

static json_t *status(struct engine_run *e)
{
    struct splash_err err;
    splash_frame_write(e->fd, SPLASH_FRAME_STATUS_REQ, 1u << 30, NULL, &err);
    for (;;) {
        struct splash_frame f;
        if (splash_frame_read(e->fd, &f, &err))
            return NULL;
        if (f.type == SPLASH_FRAME_STATUS)
            return f.body;
        splash_frame_free(&f);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static int32_t word(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int32_t)(rng_state % 30000) + 1000;
}

/* Turns of 150-650 tokens, each closed by the reuse token, to n tokens; then the
 * assistant's opening (3 tokens). */
static int conversation(int32_t *t, int n, int32_t reuse)
{
    int k = 0;
    while (k < n - 3) {
        int len = 150 + (int)(word() % 500);
        for (int i = 0; i < len && k < n - 4; i++)
            t[k++] = word();
        t[k++] = reuse;
    }
    for (int i = 0; i < 3; i++)
        t[k++] = word();
    return k;
}

static int next_turn(const char *model, int threads, int T, int32_t reuse)
{
    int32_t *first = malloc((size_t)(T + 8) * sizeof *first);
    int32_t *turn = malloc((size_t)(T + NEXT_TURN + 8) * sizeof *turn);
    int n_first = conversation(first, T, reuse);
    /* the next turn: the assistant's reply and a user message follow the last turn's end
     * (the previous turn's opening is replaced by the reply's) */
    int n2 = n_first - 3;
    memcpy(turn, first, (size_t)n2 * sizeof *turn);
    for (int i = 0; i < NEXT_TURN / 2 - 1; i++)
        turn[n2++] = word();
    turn[n2++] = reuse;
    for (int i = 0; i < NEXT_TURN / 2 - 4; i++)
        turn[n2++] = word();
    turn[n2++] = reuse;
    for (int i = 0; i < 3; i++)
        turn[n2++] = word();
    int64_t ctx = ((int64_t)n2 + 64 + 1023) / 1024 * 1024;
    struct engine_run e;
    struct outcome o;
    printf("next turn: a conversation of %d tokens, then its next turn of %d (+%d)\n", n_first,
           n2, n2 - n_first);
    fflush(stdout);
    if (engine_start(&e, model, threads, ctx, 0))
        return -1;
    double t0 = now(), c0 = cpu_now();
    submit(&e, 1, first, n_first, 1, reuse);
    collect(&e, 1, 1, &o);
    double warm_first = o.first_token - t0, warm_cpu = cpu_now() - c0;
    t0 = now();
    c0 = cpu_now();
    submit(&e, 2, turn, n2, 1, reuse);
    collect(&e, 2, 1, &o);
    double hit = o.first_token - t0, hit_cpu = cpu_now() - c0;
    int64_t cached = o.cached;
    engine_stop(&e);
    if (engine_start(&e, model, threads, ctx, 1))
        return -1;
    t0 = now();
    c0 = cpu_now();
    submit(&e, 1, turn, n2, 1, reuse);
    collect(&e, 1, 1, &o);
    double cold = o.first_token - t0, cold_cpu = cpu_now() - c0;
    /* the tokens the cached turn computed, as a prompt of their own on a cold engine */
    t0 = now();
    c0 = cpu_now();
    submit(&e, 2, turn + cached, n2 - (int)cached, 1, reuse);
    collect(&e, 2, 1, &o);
    double alone = o.first_token - t0, alone_cpu = cpu_now() - c0;
    engine_stop(&e);
    printf("  previous turn, cold:   TTFT %8.3f s  (CPU %8.3f s)\n", warm_first, warm_cpu);
    printf("  next turn, cold:       TTFT %8.3f s  (CPU %8.3f s)\n", cold, cold_cpu);
    printf("  next turn, cached:     TTFT %8.3f s  (CPU %8.3f s; %lld of %d tokens from the "
           "cache)\n", hit, hit_cpu, (long long)cached, n2);
    printf("  its %d new tokens alone, cold: TTFT %8.3f s  (CPU %8.3f s)\n", n2 - (int)cached,
           alone, alone_cpu);
    printf("  cached / cold: %.2f%% (target at most 2%%): %s; in CPU time %.2f%%\n",
           100.0 * hit / cold, hit <= 0.02 * cold ? "met" : "MISSED",
           100.0 * hit_cpu / cold_cpu);
    printf("  cached / new tokens alone: %.1f%% (target at most 102%%): %s; in CPU time "
           "%.1f%% (the alone run attends no history)\n",
           100.0 * hit / alone, hit <= 1.02 * alone ? "met" : "MISSED",
           100.0 * hit_cpu / alone_cpu);
    free(turn);
    free(first);
    return 0;
}

static int shared_prompt(const char *model, int threads, int C, int S, int32_t reuse)
{
    enum { USER = 64 };
    int n = S + 1 + USER + 1 + 3;
    int32_t *sys = malloc((size_t)S * sizeof *sys), *conv = malloc((size_t)C * n * sizeof *conv);
    for (int i = 0; i < S; i++)
        sys[i] = word();
    for (int c = 0; c < C; c++) {
        int32_t *t = conv + (size_t)c * n;
        memcpy(t, sys, (size_t)S * sizeof *t);
        t[S] = reuse;
        for (int i = 0; i < USER; i++)
            t[S + 1 + i] = word();
        t[S + 1 + USER] = reuse;
        for (int i = 0; i < 3; i++)
            t[S + 2 + USER + i] = word();
    }
    struct engine_run e;
    struct outcome *o = calloc((size_t)C, sizeof *o);
    printf("shared system prompt: %d conversations at once, a %d-token system prompt, %d tokens "
           "each\n", C, S, n);
    fflush(stdout);
    if (engine_start(&e, model, threads, ((int64_t)n + 64 + 1023) / 1024 * 1024, 0))
        return -1;
    double t0 = now();
    for (int c = 0; c < C; c++)
        submit(&e, 100 + (uint64_t)c, conv + (size_t)c * n, n, 4, reuse);
    collect(&e, 100, C, o);
    double wall = now() - t0;
    json_t *st = status(&e);
    json_t *pc = json_object_get(st, "prefix_cache");
    int64_t prefilled = json_integer_value(json_object_get(pc, "prefilled_tokens"));
    int64_t reused = json_integer_value(json_object_get(pc, "cached_tokens"));
    int hits = 0;
    for (int c = 0; c < C; c++)
        hits += o[c].cached > 0;
    printf("  prompt tokens %lld: prefilled %lld, from the cache %lld (%.1f%% saved); %d of %d "
           "requests hit; wall %.1f s\n",
           (long long)C * n, (long long)prefilled, (long long)reused,
           100.0 * (double)reused / ((double)C * n), hits, C, wall);
    printf("  cache: %s\n", json_dumps(pc, JSON_COMPACT));
    json_decref(st);
    engine_stop(&e);
    free(o);
    free(sys);
    free(conv);
    return 0;
}

/* The C conversations of shared_prompt on the persistent SSD tier, every turn point
 * copied: bytes written, as pages (whole = 0) or as whole blobs (whole = 1). */
static int shared_on_disk(const char *model, int threads, int C, int S, int32_t reuse,
                          int whole, int64_t *written)
{
    enum { USER = 64 };
    int n = S + 1 + USER + 1 + 3;
    int32_t *sys = malloc((size_t)S * sizeof *sys), *conv = malloc((size_t)C * n * sizeof *conv);
    uint64_t saved = rng_state;
    for (int i = 0; i < S; i++)
        sys[i] = word();
    for (int c = 0; c < C; c++) {
        int32_t *t = conv + (size_t)c * n;
        memcpy(t, sys, (size_t)S * sizeof *t);
        t[S] = reuse;
        for (int i = 0; i < USER; i++)
            t[S + 1 + i] = word();
        t[S + 1 + USER] = reuse;
        for (int i = 0; i < 3; i++)
            t[S + 2 + USER + i] = word();
    }
    rng_state = saved; /* both runs see the same conversations */
    char root[] = "/tmp/bench-cache-disk-XXXXXX";
    if (!mkdtemp(root))
        return -1;
    persist_root = root;
    setenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS", "0", 1);
    if (whole)
        setenv("SPLASH_TEST_DISK_WHOLE", "1", 1);
    struct engine_run e;
    int rc = engine_start(&e, model, threads, ((int64_t)n + 64 + 1023) / 1024 * 1024, 0);
    unsetenv("SPLASH_TEST_WRITE_AHEAD_DELAY_MS");
    unsetenv("SPLASH_TEST_DISK_WHOLE");
    persist_root = NULL;
    struct outcome *o = calloc((size_t)C, sizeof *o);
    if (!rc) {
        for (int c = 0; c < C; c++)
            submit(&e, 100 + (uint64_t)c, conv + (size_t)c * n, n, 4, reuse);
        collect(&e, 100, C, o);
        /* the copies ahead: until none is under way and the count holds for 2 s */
        int64_t last = -1;
        double since = now();
        json_t *disk = NULL, *st = NULL;
        for (;;) {
            json_decref(st);
            st = status(&e);
            disk = json_object_get(json_object_get(st, "prefix_cache"), "disk");
            int64_t w = json_integer_value(json_object_get(disk, "written_bytes"));
            if (w != last || json_integer_value(json_object_get(disk, "writes_in_flight"))) {
                last = w;
                since = now();
            } else if (now() - since > 2.0) {
                break;
            }
            struct timespec ts = {0, 200 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        json_t *pages = json_object_get(disk, "pages"), *states = json_object_get(disk, "states");
        *written = last;
        printf("  %s: %lld points written, %.1f MiB; pages %lld (%.1f MiB, %lld references "
               "shared), states %lld (%.1f MiB)\n",
               whole ? "as whole blobs (before)" : "as chains of pages (after)",
               (long long)json_integer_value(json_object_get(disk, "writes")),
               (double)last / 1048576.0, (long long)json_integer_value(json_object_get(pages, "count")),
               (double)json_integer_value(json_object_get(pages, "bytes")) / 1048576.0,
               (long long)json_integer_value(json_object_get(pages, "shared")),
               (long long)json_integer_value(json_object_get(states, "count")),
               (double)json_integer_value(json_object_get(states, "bytes")) / 1048576.0);
        json_decref(st);
        engine_stop(&e);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "bench-cache: %s stays\n", root);
    free(o);
    free(sys);
    free(conv);
    return rc;
}

static void exe_dir(char *out, size_t size)
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, size, "build/bench");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, size, "%s", exe);
}

int main(int argc, char **argv)
{
    int T = 16384, C = 32, S = 4096, threads = 2;
    const char *other = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-T"))
            T = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-C"))
            C = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-S"))
            S = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-t"))
            threads = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-m"))
            other = argv[i + 1];
    }
    if (T < 1024 || C < 1 || C > 32 || S < 64 || threads < 1) {
        fprintf(stderr, "usage: bench-cache [-T tokens >= 1024] [-C conversations <= 32] "
                        "[-S tokens >= 64] [-t threads] [-m GGUF]\n");
        return 2;
    }
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    char bin[PATH_MAX - 64], model[PATH_MAX + 64];
    exe_dir(bin, sizeof bin);
    if (other) {
        snprintf(model, sizeof model, "%s", other);
    } else {
        snprintf(model, sizeof model, "%s/../bench-models", bin);
        mkdir(model, 0755);
        snprintf(model, sizeof model, "%s/../bench-models/%s-Q4_K_M.gguf", bin, SHAPE);
        struct stat sb;
        if (stat(model, &sb) != 0) {
            struct splash_model_write_opts opts = {
                .mix = "Q4_K_M", .seed = 7, .n_threads = threads, .max_sample = 0};
            struct splash_model_write_stats stats;
            struct splash_err err = {{0}};
            printf("building %s (once) ...\n", model);
            if (splash_model_write_preset(r, SHAPE, &opts, model, &stats, &err)) {
                fprintf(stderr, "bench-cache: %s: %s\n", SHAPE, err.msg);
                return 1;
            }
        }
    }
    struct splash_tokenizer *tok;
    struct splash_err err;
    int32_t reuse = -1;
    if (splash_tokenizer_load(model, &tok, &err) == SPLASH_OK) {
        reuse = splash_tokenizer_find_special(tok, "<|im_end|>");
        splash_tokenizer_destroy(tok);
    }
    if (reuse < 0) {
        fprintf(stderr, "bench-cache: %s has no <|im_end|> token\n", model);
        return 1;
    }
    printf("prefix cache benchmark: %s, %d threads\n", model, threads);
    int rc = next_turn(model, threads, T, reuse) ? 1 : 0;
    uint64_t before_disk = rng_state;
    rc |= shared_prompt(model, threads, C, S, reuse) ? 1 : 0;
    printf("shared system prompt on the SSD tier: the same %d conversations, every turn point "
           "copied\n", C);
    fflush(stdout);
    int64_t as_pages = 0, as_whole = 0;
    rng_state = before_disk;
    rc |= shared_on_disk(model, threads, C, S, reuse, 0, &as_pages) ? 1 : 0;
    rng_state = before_disk;
    rc |= shared_on_disk(model, threads, C, S, reuse, 1, &as_whole) ? 1 : 0;
    if (as_whole > 0)
        printf("  written as pages / as whole blobs: %.1f%%\n",
               100.0 * (double)as_pages / (double)as_whole);
    return rc;
}
