/* `splash tokenize` / `splash detokenize` (see cli/tokenize.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/tokenize.h"
#include "server/text/tokenizer/tokenizer.h"

struct tok_args {
    const char *model_dir;
    int special;
    int first_free; /* index of the first positional argument */
};

/* Parses --model-dir PATH (or --model-dir=PATH) and --special; the positional
 * arguments are gathered at the end of argv from first_free on. */
static int parse_args(const char *cmd, int argc, char **argv, struct tok_args *a)
{
    int n_free = 0;
    char **free_args = calloc((size_t)argc + 1, sizeof *free_args);
    if (!free_args)
        return 1;
    memset(a, 0, sizeof *a);
    int only_free = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_free || arg[0] != '-' || !strcmp(arg, "-")) {
            free_args[n_free++] = argv[i];
        } else if (!strcmp(arg, "--")) {
            only_free = 1;
        } else if (!strcmp(arg, "--special")) {
            a->special = 1;
        } else if (!strcmp(arg, "--model-dir")) {
            if (++i == argc) {
                fprintf(stderr, "splash %s: --model-dir needs a PATH\n", cmd);
                free(free_args);
                return 2;
            }
            a->model_dir = argv[i];
        } else if (!strncmp(arg, "--model-dir=", 12)) {
            a->model_dir = arg + 12;
        } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            free(free_args);
            return -1;
        } else {
            fprintf(stderr, "splash %s: unknown option %s\n", cmd, arg);
            free(free_args);
            return 2;
        }
    }
    a->first_free = argc - n_free;
    memcpy(argv + a->first_free, free_args, (size_t)n_free * sizeof *argv);
    free(free_args);
    if (!a->model_dir) {
        fprintf(stderr, "splash %s: --model-dir PATH is required\n", cmd);
        return 2;
    }
    return 0;
}

static char *read_stdin(size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    *len = n;
    return buf;
}

int splash_cmd_tokenize(int argc, char **argv)
{
    struct tok_args a;
    int rc = parse_args("tokenize", argc, argv, &a);
    if (rc < 0) {
        printf("usage: splash tokenize --model-dir PATH [--special] TEXT\n"
               "PATH: a GGUF file or a directory with tokenizer.json; TEXT '-' reads stdin.\n"
               "--special matches control tokens written in TEXT. Prints the ids.\n");
        return 0;
    }
    if (rc)
        return rc;
    if (argc - a.first_free != 1) {
        fprintf(stderr, "splash tokenize: one TEXT argument (or '-' for stdin)\n");
        return 2;
    }
    const char *arg = argv[a.first_free];
    char *text = NULL;
    size_t len = strlen(arg);
    if (!strcmp(arg, "-") && !(text = read_stdin(&len))) {
        fprintf(stderr, "splash tokenize: out of memory reading stdin\n");
        return 1;
    }

    struct splash_err err = {{0}};
    struct splash_tokenizer *tok = NULL;
    struct splash_token_buf ids = {0};
    rc = 1;
    if (splash_tokenizer_load(a.model_dir, &tok, &err)) {
        fprintf(stderr, "splash tokenize: %s\n", err.msg);
        goto out_free_text;
    }
    if (splash_tokenizer_encode(tok, text ? text : arg, len,
                                a.special ? SPLASH_TOKENIZE_PARSE_SPECIAL : 0, &ids, &err)) {
        fprintf(stderr, "splash tokenize: %s\n", err.msg);
        goto out_destroy;
    }
    for (size_t i = 0; i < ids.n; i++)
        printf(i ? " %d" : "%d", (int)ids.ids[i]);
    printf("\n");
    rc = 0;
    splash_token_buf_free(&ids);
out_destroy:
    splash_tokenizer_destroy(tok);
out_free_text:
    free(text);
    return rc;
}

int splash_cmd_detokenize(int argc, char **argv)
{
    struct tok_args a;
    int rc = parse_args("detokenize", argc, argv, &a);
    if (rc < 0) {
        printf("usage: splash detokenize --model-dir PATH [--special] ID...\n"
               "PATH: a GGUF file or a directory with tokenizer.json.\n"
               "--special renders control tokens. Prints the text.\n");
        return 0;
    }
    if (rc)
        return rc;
    size_t n = (size_t)(argc - a.first_free);
    int32_t *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return 1;
    for (size_t i = 0; i < n; i++) {
        const char *s = argv[a.first_free + (int)i];
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "splash detokenize: '%s' is not a token id\n", s);
            free(ids);
            return 2;
        }
        ids[i] = (int32_t)v;
    }

    struct splash_err err = {{0}};
    struct splash_tokenizer *tok = NULL;
    struct splash_tok_bytes text = {0};
    rc = 1;
    if (splash_tokenizer_load(a.model_dir, &tok, &err)) {
        fprintf(stderr, "splash detokenize: %s\n", err.msg);
        goto out_free_ids;
    }
    if (splash_tokenizer_decode(tok, ids, n, a.special ? SPLASH_DETOK_SPECIAL : 0, &text, &err)) {
        fprintf(stderr, "splash detokenize: %s\n", err.msg);
        goto out_destroy;
    }
    fwrite(text.data, 1, text.len, stdout);
    printf("\n");
    rc = 0;
    splash_tok_bytes_free(&text);
out_destroy:
    splash_tokenizer_destroy(tok);
out_free_ids:
    free(ids);
    return rc;
}
