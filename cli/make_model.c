/* `splash make-model`: a random-weight GGUF of a family's shape (cli/modelgen/model_writer.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/model_cmds.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: splash make-model [--arch ARCH] (--shape NAME | --dims K=V,...) [--type MIX]\n"
            "                         [--vocab N] [--seed N] [--threads N] [--sample-values N]\n"
            "                         [--chat-template FILE] --out FILE\n"
            "       splash make-model --list\n"
            "  --arch    a family plugin or GGUF architecture (qwen_hybrid, qwen35)\n"
            "  --shape   a family's size preset (--list shows them); --dims alone starts\n"
            "            from the arch's smallest. --dims keys: the preset's own metadata\n"
            "            keys after ARCH. (embedding_length=512, block_count=2,\n"
            "            rope.dimension_sections=8/4/4/0), vocab, tied (0/1)\n"
            "  --type    a reference quantizer mix (Q4_K_M, Q5_K_M, Q4_K_S, Q3_K_M, Q2_K, Q6_K,\n"
            "            Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4_MOE, BF16, F16,\n"
            "            F32) or any format with a quantizer for every matrix (default Q4_K_M)\n"
            "  --sample-values N  tensors of more than N values quantize about N of them and\n"
            "            repeat randomly drawn blocks of those (fast benchmark models)\n"
            "  --chat-template FILE  the Jinja template the model carries (default: the\n"
            "            built-in ChatML one, Flint's for flint shapes); gpt-oss shapes hold\n"
            "            the harmony tokens, flint shapes Flint's\n");
}

/* A whole file as a NUL-terminated string (NULL on an error, errno set, or when it holds
 * a NUL byte). */
static char *read_text(const char *path)
{
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int bad = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t grown = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, grown);
            if (!nb) {
                bad = 1;
                break;
            }
            buf = nb;
            cap = grown;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    bad = bad || ferror(f) || !buf || memchr(buf, 0, n);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static int list_shapes(const struct splash_registry *r)
{
    struct splash_model_shape *s = malloc(sizeof *s);
    struct splash_err err = {{0}};
    if (!s)
        return 1;
    for (size_t i = 0; i < splash_model_shape_count(r); i++) {
        if (splash_model_shape_at(r, i, s, &err)) {
            fprintf(stderr, "splash make-model: %s\n", err.msg);
            free(s);
            return 1;
        }
        printf("%-22s %-10s %-12s hidden %.0f, %.0f layers, vocab %lld%s: %s\n", s->name,
               s->arch, s->family, splash_model_shape_get(s, "embedding_length"),
               splash_model_shape_get(s, "block_count"), (long long)s->n_vocab,
               s->tied ? ", tied" : "", s->about);
    }
    free(s);
    return 0;
}

static int parse_long(const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "splash make-model: %s: '%s' (%lld to %lld)\n", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int splash_cmd_make_model(int argc, char **argv)
{
    const char *arch = NULL, *shape_name = NULL, *dims = NULL, *mix = "Q4_K_M", *out = NULL;
    const char *template_path = NULL;
    long long vocab = 0, seed = 42, threads = 0, sample = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--list"))
            return list_shapes(splash_registry_global());
        if (i + 1 >= argc) {
            fprintf(stderr, "splash make-model: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--arch"))
            arch = v;
        else if (!strcmp(a, "--shape"))
            shape_name = v;
        else if (!strcmp(a, "--dims"))
            dims = v;
        else if (!strcmp(a, "--type"))
            mix = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--chat-template"))
            template_path = v;
        else if (!strcmp(a, "--vocab")) {
            if (parse_long(a, v, 1, 1ll << 30, &vocab))
                return 2;
        } else if (!strcmp(a, "--seed")) {
            if (parse_long(a, v, 0, 1ll << 62, &seed))
                return 2;
        } else if (!strcmp(a, "--sample-values")) {
            if (parse_long(a, v, 0, 1ll << 40, &sample))
                return 2;
        } else if (!strcmp(a, "--threads")) {
            if (parse_long(a, v, 0, 1024, &threads))
                return 2;
        } else {
            fprintf(stderr, "splash make-model: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!out || (!shape_name && !dims) || (!arch && !shape_name)) {
        usage(stderr);
        return 2;
    }
    struct splash_model_shape *shape = malloc(sizeof *shape);
    struct splash_err err = {{0}};
    const struct splash_registry *r = splash_registry_global();
    if (!shape) {
        fprintf(stderr, "splash make-model: out of memory\n");
        return 1;
    }
    if (splash_model_shape_find(r, arch, shape_name, shape, &err)) {
        fprintf(stderr, "splash make-model: %s\n", err.msg);
        free(shape);
        return 2;
    }
    if (dims) {
        snprintf(shape->name, sizeof shape->name, "custom");
        if (splash_model_shape_parse_dims(shape, dims, &err)) {
            fprintf(stderr, "splash make-model: %s\n", err.msg);
            free(shape);
            return 2;
        }
    }
    if (vocab)
        shape->n_vocab = vocab;
    if (!splash_model_mix_known(r, mix)) {
        fprintf(stderr, "splash make-model: --type %s: neither a quantizer mix nor a format "
                        "with a quantizer\n", mix);
        free(shape);
        return 2;
    }
    char *template_text = NULL;
    if (template_path && !(template_text = read_text(template_path))) {
        fprintf(stderr, "splash make-model: --chat-template %s: %s\n", template_path,
                errno ? strerror(errno) : "not a text file");
        free(shape);
        return 2;
    }
    struct splash_model_write_opts opts = {.mix = mix, .seed = (uint64_t)seed,
                                           .n_threads = (int)threads, .max_sample = sample,
                                           .chat_template = template_text};
    struct splash_model_write_stats stats;
    int failed = splash_model_write(r, shape, &opts, out, &stats, &err) != SPLASH_OK;
    free(template_text);
    if (failed) {
        fprintf(stderr, "splash make-model: %s\n", err.msg);
        free(shape);
        return 1;
    }
    printf("%s: %s %s, %zu tensors, %.1fM parameters, %.1f MiB, written in %.1f s\n", out,
           shape->name, mix, stats.n_tensors, (double)stats.n_params / 1e6,
           (double)stats.file_bytes / (1024.0 * 1024.0), stats.seconds);
    free(shape);
    return 0;
}
