/* `splash logits`: one prefill (or one token at a time with --decode) over the
 * given tokens, every position's logits written as float32 rows. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/logits.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "core/target.h"
#include "core/threadpool.h"
#include "splash/family.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: splash logits --model-dir PATH --tokens \"ID ID ...\" --out FILE [--decode]\n"
            "                     [--kv-format int8|bf16|f16|f32] [--state-format fp32|bf16] "
            "[--threads N]\n");
}

/* --kv-format's names: f16 and f32 compare exactly with references that keep such a cache
 * (the golden files' llama.cpp keeps f16). */
static int kv_format_named(const char *name, int32_t *format)
{
    static const struct {
        const char *name;
        int32_t format;
    } names[] = {{"int8", SPLASH_KV_INT8}, {"bf16", SPLASH_KV_BF16}, {"f16", SPLASH_KV_F16},
                 {"f32", SPLASH_KV_F32}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) {
            *format = names[i].format;
            return 1;
        }
    return 0;
}

/* PATH is a GGUF file, or a directory holding one GGUF target (projectors aside). */
static int resolve_gguf(const char *path, char *out, size_t size)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "splash logits: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(out, size, "%s", path);
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "splash logits: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".gguf") || !strncmp(e->d_name, "mmproj", 6))
            continue;
        /* a split target: its first part names it */
        const char *of = strstr(e->d_name, "-of-");
        if (of && (of - e->d_name < 6 || strncmp(of - 6, "-00001", 6)))
            continue;
        if (found++ == 0)
            snprintf(out, size, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (found != 1) {
        fprintf(stderr, "splash logits: %s: %s GGUF target\n", path,
                found ? "more than one" : "no");
        return -1;
    }
    return 0;
}

static int parse_tokens(const char *s, int32_t **out, int32_t *n_out)
{
    size_t cap = 64, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -1;
    for (;;) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "splash logits: --tokens: bad id at \"%.16s\"\n", s);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, 2 * cap * sizeof *ids);
            if (!grown) {
                free(ids);
                return -1;
            }
            ids = grown;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        s = end;
    }
    *out = ids;
    *n_out = (int32_t)n;
    return 0;
}

int splash_cmd_logits(int argc, char **argv)
{
    const char *model_dir = NULL, *tokens_arg = NULL, *out_path = NULL;
    int decode = 0, threads = 0;
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--decode")) {
            decode = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!val) {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model-dir"))
            model_dir = val;
        else if (!strcmp(a, "--tokens"))
            tokens_arg = val;
        else if (!strcmp(a, "--out"))
            out_path = val;
        else if (!strcmp(a, "--kv-format")) {
            if (!kv_format_named(val, &opts.kv_format)) {
                fprintf(stderr, "splash logits: --kv-format %s: int8, bf16, f16 or f32\n", val);
                return 2;
            }
        }
        else if (!strcmp(a, "--state-format") && (!strcmp(val, "fp32") || !strcmp(val, "bf16")))
            opts.state_format = !strcmp(val, "bf16") ? SPLASH_STATE_BF16 : SPLASH_STATE_F32;
        else if (!strcmp(a, "--threads")) {
            char *end;
            long t = strtol(val, &end, 10);
            if (*end || t < 0 || t > 1024) {
                fprintf(stderr, "splash logits: --threads: %s\n", val);
                return 2;
            }
            threads = (int)t;
        } else {
            fprintf(stderr, "splash logits: unknown option or value: %s %s\n", a, val);
            usage(stderr);
            return 2;
        }
    }
    if (!model_dir || !tokens_arg || !out_path) {
        usage(stderr);
        return 2;
    }

    int rc = 1;
    char path[PATH_MAX];
    int32_t *ids = NULL, n_ids = 0;
    /* a safetensors checkpoint's directory, else the GGUF it names or holds */
    struct splash_target target;
    struct splash_err terr;
    int safetensors = splash_target_select(model_dir, NULL, &target, &terr) == SPLASH_OK &&
                      target.kind == SPLASH_TARGET_SAFETENSORS;
    if (safetensors)
        snprintf(path, sizeof path, "%s", target.path);
    if ((!safetensors && resolve_gguf(model_dir, path, sizeof path)) ||
        parse_tokens(tokens_arg, &ids, &n_ids))
        return 1;
    if (n_ids == 0) {
        fprintf(stderr, "splash logits: --tokens: no ids\n");
        free(ids);
        return 2;
    }
    struct splash_err err = {{0}};
    struct splash_registry *reg = splash_registry_global();
    splash_registry_load_default(reg, NULL, 0);
    struct splash_meta *m = NULL;
    if (safetensors ? splash_st_target_open(reg, path, SPLASH_ST_DEFER_EXPERTS, &m, &err)
                    : splash_meta_open_gguf(path, 0, &m, &err)) {
        fprintf(stderr, "splash logits: %s\n", err.msg);
        goto out_ids;
    }
    if (!safetensors)
        splash_meta_bind_formats(m, reg);
    /* the same selection as every start: claims, then check_config's score */
    const struct splash_family_plugin *fam = NULL;
    struct splash_family_verdict verdict;
    if (splash_family_select(reg, m, &fam, &verdict, &err)) {
        fprintf(stderr, "splash logits: %s: %s\n", path, err.msg);
        goto out_meta;
    }
    opts.pool = splash_pool_create(threads);
    void *model = NULL, *seq = NULL;
    struct splash_model_info info;
    if (splash_family_model_create(reg, fam, m, &opts, &model, &info, &err)) {
        fprintf(stderr, "splash logits: %s\n", err.msg);
        goto out_pool;
    }
    if (splash_family_seq_create(fam, model, &seq, &err)) {
        fprintf(stderr, "splash logits: %s\n", err.msg);
        goto out_model;
    }
    float *logits = malloc((size_t)n_ids * (size_t)info.n_vocab * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "splash logits: out of memory for %d x %lld logits\n", n_ids,
                (long long)info.n_vocab);
        goto out_seq;
    }
    if (decode) {
        for (int32_t i = 0; i < n_ids; i++) {
            struct splash_lane lane = {.seq = seq,
                                       .tokens = ids + i,
                                       .n_tokens = 1,
                                       .pos0 = i,
                                       .logits = logits + (size_t)i * (size_t)info.n_vocab,
                                       .logits_all = 1};
            if (splash_family_forward(fam, model, &lane, 1, &err)) {
                fprintf(stderr, "splash logits: token %d: %s\n", i, err.msg);
                goto out_logits;
            }
        }
    } else {
        struct splash_lane lane = {.seq = seq,
                                   .tokens = ids,
                                   .n_tokens = n_ids,
                                   .pos0 = 0,
                                   .logits = logits,
                                   .logits_all = 1};
        if (splash_family_forward(fam, model, &lane, 1, &err)) {
            fprintf(stderr, "splash logits: %s\n", err.msg);
            goto out_logits;
        }
    }
    FILE *f = fopen(out_path, "wb");
    if (!f) {
        fprintf(stderr, "splash logits: %s: %s\n", out_path, strerror(errno));
        goto out_logits;
    }
    size_t total = (size_t)n_ids * (size_t)info.n_vocab;
    /* float32 little-endian: this engine runs on little-endian hosts only */
    int wrote = fwrite(logits, sizeof *logits, total, f) == total;
    if (fclose(f) != 0 || !wrote) {
        fprintf(stderr, "splash logits: %s: write failed\n", out_path);
        goto out_logits;
    }
    printf("%d %lld\n", n_ids, (long long)info.n_vocab);
    rc = 0;
out_logits:
    free(logits);
out_seq:
    splash_family_seq_destroy(fam, model, seq);
out_model:
    splash_family_model_destroy(fam, model);
out_pool:
    splash_pool_destroy(opts.pool);
out_meta:
    splash_meta_close(m);
out_ids:
    free(ids);
    return rc;
}
