/* `splash bench`: prefill and decode speed of a model, like llama-bench's pp and tg tests. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/model_cmds.h"
#include "core/meta.h"
#include "core/model_bench.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/threadpool.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: splash bench --model-dir PATH [-p 512] [-n 128] [-r 1] [--threads N] "
               "[--json]\n"
               "  Times a prefill of -p tokens in one batch and a decode of -n tokens one at a\n"
               "  time (each from an empty sequence, after a warm-up), -r times each.\n");
}

static int parse_int(const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "splash bench: %s: '%s' (%ld to %ld)\n", opt, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int splash_cmd_bench(int argc, char **argv)
{
    const char *model_dir = NULL;
    int n_prompt = 512, n_gen = 128, reps = 1, threads = 0, as_json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            as_json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "splash bench: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model-dir") || !strcmp(a, "-m")) {
            model_dir = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (parse_int(a, v, 0, 1 << 20, &n_prompt))
                return 2;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (parse_int(a, v, 0, 1 << 20, &n_gen))
                return 2;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (parse_int(a, v, 1, 1000, &reps))
                return 2;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (parse_int(a, v, 0, 1024, &threads))
                return 2;
        } else {
            fprintf(stderr, "splash bench: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_dir) {
        usage(stderr);
        return 2;
    }
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8,
                                     .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    if (splash_model_load(splash_registry_global(), model_dir, &opts, threads, &lm, &err)) {
        fprintf(stderr, "splash bench: %s\n", err.msg);
        return 1;
    }
    struct splash_bench_result res;
    int rc = 1;
    if (splash_model_bench(lm, n_prompt, n_gen, reps, &res, &err)) {
        fprintf(stderr, "splash bench: %s\n", err.msg);
        goto out;
    }
    int n_threads = splash_pool_threads(lm->pool);
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(lm->meta->path));
        json_object_set_new(o, "family", json_string(lm->family->header.name));
        json_object_set_new(o, "threads", json_integer(n_threads));
        json_object_set_new(o, "n_prompt", json_integer(n_prompt));
        json_object_set_new(o, "n_gen", json_integer(n_gen));
        json_object_set_new(o, "repetitions", json_integer(reps));
        json_object_set_new(o, "prefill_tps", json_real(res.prefill_tps));
        json_object_set_new(o, "decode_tps", json_real(res.decode_tps));
        json_object_set_new(o, "weight_bytes", json_integer((json_int_t)lm->info.weight_bytes));
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        printf("model: %s (%s, %.1f MiB of weights), %d threads\n", lm->meta->path,
               lm->verdict.summary, (double)lm->info.weight_bytes / (1024.0 * 1024.0), n_threads);
        if (n_prompt)
            printf("prefill %5d tokens: %9.2f tokens/s (%.3f s)\n", n_prompt, res.prefill_tps,
                   res.prefill_seconds);
        if (n_gen)
            printf("decode  %5d tokens: %9.2f tokens/s (%.3f s)\n", n_gen, res.decode_tps,
                   res.decode_seconds);
    }
    rc = 0;
out:
    splash_model_unload(lm);
    return rc;
}
