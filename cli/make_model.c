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
            "usage: splash make-model --arch ARCH (--shape NAME | --dims K=V,...) [--type MIX]\n"
            "                         [--vocab N] [--seed N] [--threads N] [--sample-values N]\n"
            "                         [--chat-template FILE] --out FILE\n"
            "       splash make-model --list\n"
            "  --shape   a named shape (--list shows them); --dims alone starts from the\n"
            "            arch's smallest shape. --dims keys: hidden layers ff vocab ctx\n"
            "            heads=N/KV head_dim gdn_heads=K/V gdn_dim conv interval rot\n"
            "            sections=A/B/C/D rope_base eps tied experts=N/USED expert_ff shexp_ff\n"
            "            window (gpt-oss)\n"
            "  --type    a reference quantizer mix (Q4_K_M, Q5_K_M, Q4_K_S, Q3_K_M, Q2_K, Q6_K,\n"
            "            Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4_MOE, BF16, F16,\n"
            "            F32) or any format with a quantizer for every matrix (default Q4_K_M)\n"
            "  --sample-values N  tensors of more than N values quantize about N of them and\n"
            "            repeat randomly drawn blocks of those (fast benchmark models)\n"
            "  --chat-template FILE  the Jinja template the model carries (default: the\n"
            "            built-in ChatML one); gpt-oss shapes hold the harmony tokens\n");
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

static void list_shapes(void)
{
    for (size_t i = 0; i < splash_model_shape_count(); i++) {
        const struct splash_model_shape *s = splash_model_shape_at(i);
        printf("%-22s %-10s hidden %lld, %lld layers, ff %lld, heads %d/%d of %d, GDN %d/%d of "
               "%d, vocab %lld%s",
               s->name, s->arch, (long long)s->n_embd, (long long)s->n_layers,
               (long long)s->n_ff, s->n_head, s->n_head_kv, s->head_dim, s->n_k_heads,
               s->n_v_heads, s->d_k, (long long)s->n_vocab, s->tied ? ", tied" : "");
        if (s->n_expert)
            printf(", %d experts (%d used) of ff %lld, shared ff %lld", s->n_expert,
                   s->n_expert_used, (long long)s->n_ff_exp, (long long)s->n_ff_shexp);
        printf("\n");
    }
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

/* The smallest named shape of an architecture: the base --dims edits. */
static const struct splash_model_shape *smallest_of(const char *arch)
{
    const struct splash_model_shape *best = NULL;
    for (size_t i = 0; i < splash_model_shape_count(); i++) {
        const struct splash_model_shape *s = splash_model_shape_at(i);
        if (strcmp(s->arch, arch))
            continue;
        if (!best || s->n_embd * s->n_layers < best->n_embd * best->n_layers)
            best = s;
    }
    return best;
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
        if (!strcmp(a, "--list")) {
            list_shapes();
            return 0;
        }
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
    struct splash_model_shape shape;
    const struct splash_model_shape *base =
        shape_name ? splash_model_shape_find(shape_name) : smallest_of(arch);
    if (!base) {
        if (shape_name)
            fprintf(stderr, "splash make-model: no shape named %s (--list shows them)\n",
                    shape_name);
        else
            fprintf(stderr, "splash make-model: no shape of architecture %s\n", arch);
        return 2;
    }
    if (arch && strcmp(arch, base->arch)) {
        fprintf(stderr, "splash make-model: shape %s is of architecture %s, not %s\n", base->name,
                base->arch, arch);
        return 2;
    }
    shape = *base;
    struct splash_err err = {{0}};
    if (dims) {
        snprintf(shape.name, sizeof shape.name, "custom");
        if (splash_model_shape_parse_dims(&shape, dims, &err)) {
            fprintf(stderr, "splash make-model: %s\n", err.msg);
            return 2;
        }
    }
    if (vocab)
        shape.n_vocab = vocab;
    const struct splash_registry *r = splash_registry_global();
    if (!splash_model_mix_known(r, mix)) {
        fprintf(stderr, "splash make-model: --type %s: neither a quantizer mix nor a format "
                        "with a quantizer\n", mix);
        return 2;
    }
    char *template_text = NULL;
    if (template_path && !(template_text = read_text(template_path))) {
        fprintf(stderr, "splash make-model: --chat-template %s: %s\n", template_path,
                errno ? strerror(errno) : "not a text file");
        return 2;
    }
    struct splash_model_write_opts opts = {.mix = mix, .seed = (uint64_t)seed,
                                           .n_threads = (int)threads, .max_sample = sample,
                                           .chat_template = template_text};
    struct splash_model_write_stats stats;
    int failed = splash_model_write(r, &shape, &opts, out, &stats, &err) != SPLASH_OK;
    free(template_text);
    if (failed) {
        fprintf(stderr, "splash make-model: %s\n", err.msg);
        return 1;
    }
    printf("%s: %s %s, %zu tensors, %.1fM parameters, %.1f MiB, written in %.1f s\n", out,
           shape.name, mix, stats.n_tensors, (double)stats.n_params / 1e6,
           (double)stats.file_bytes / (1024.0 * 1024.0), stats.seconds);
    return 0;
}
