/* `splash plugins`: what loaded (name, kind, version, claims, file) and what was refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/host_impl.h"
#include "core/registry.h"

/* --plugin-dir values go first into SPLASH_PLUGIN_PATH, which the search reads next, so a
 * process this one starts (serve's engine) searches the same directories. */
static int put_dirs_first(const char *const *dirs, size_t n_dirs)
{
    const char *old = getenv("SPLASH_PLUGIN_PATH");
    size_t len = old ? strlen(old) + 1 : 0;
    for (size_t i = 0; i < n_dirs; i++)
        len += strlen(dirs[i]) + 1;
    char *path = malloc(len + 1);
    if (!path)
        return -1;
    path[0] = 0;
    for (size_t i = 0; i < n_dirs; i++) {
        strcat(path, dirs[i]);
        strcat(path, ":");
    }
    if (old && *old)
        strcat(path, old);
    else if (n_dirs)
        path[strlen(path) - 1] = 0; /* no trailing ':' */
    int rc = setenv("SPLASH_PLUGIN_PATH", path, 1);
    free(path);
    return rc;
}

struct splash_registry *cli_load_plugins(int *argc, char **argv)
{
    struct splash_registry *r = splash_registry_global();
    const char *dirs[16];
    size_t n_dirs = 0;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *dir = NULL;
        if (!strcmp(argv[i], "--plugin-dir") && i + 1 < *argc)
            dir = argv[++i];
        else if (!strncmp(argv[i], "--plugin-dir=", 13))
            dir = argv[i] + 13;
        else {
            argv[out++] = argv[i];
            continue;
        }
        if (strchr(dir, ':'))
            fprintf(stderr, "splash: --plugin-dir %s: a directory with ':' in its name cannot be "
                            "searched (SPLASH_PLUGIN_PATH separates with ':'); ignored\n", dir);
        else if (n_dirs < 16)
            dirs[n_dirs++] = dir;
        else
            fprintf(stderr, "splash: --plugin-dir %s: at most 16 plugin directories; ignored\n", dir);
    }
    *argc = out;
    argv[out] = NULL;
    if (n_dirs && put_dirs_first(dirs, n_dirs) != 0) {
        fprintf(stderr, "splash: out of memory for the plugin path\n");
        splash_registry_load_default(r, dirs, n_dirs);
        return r;
    }
    splash_registry_load_default(r, NULL, 0);
    return r;
}

static const char *kind_name(uint32_t kind)
{
    return kind == SPLASH_PLUGIN_FORMAT ? "format" : kind == SPLASH_PLUGIN_FAMILY ? "family" : "?";
}

static const struct splash_format_plugin *format_named(const struct splash_registry *r,
                                                       const char *name)
{
    for (size_t i = 0; i < splash_registry_n_formats(r); i++)
        if (!strcmp(splash_registry_format(r, i)->header.name, name))
            return splash_registry_format(r, i);
    return NULL;
}

static const struct splash_family_plugin *family_named(const struct splash_registry *r,
                                                       const char *name)
{
    for (size_t i = 0; i < splash_registry_n_families(r); i++)
        if (!strcmp(splash_registry_family(r, i)->header.name, name))
            return splash_registry_family(r, i);
    return NULL;
}

static void print_claims(const struct splash_registry *r, const struct splash_plugin_record *rec)
{
    if (rec->kind == SPLASH_PLUGIN_FORMAT) {
        const struct splash_format_plugin *f = format_named(r, rec->name);
        printf("    formats:");
        for (uint32_t t = 0; f && t < f->n_types; t++) {
            const struct splash_format_type *ft = f->types[t];
            if (ft->gguf_type >= 0)
                printf(" %s(%d)", ft->name, ft->gguf_type);
            else
                printf(" %s", ft->name);
        }
        printf("\n");
        /* which format a safetensors module of each MLX mode, bits and group loads into */
        int mlx = 0;
        for (uint32_t t = 0; f && t < f->n_types; t++) {
            const struct splash_format_type *ft = f->types[t];
            if (!ft->mlx_mode || !ft->import_planes)
                continue;
            printf("%s %s %d-bit/%d=%s", mlx++ ? "," : "    MLX modes:", ft->mlx_mode, ft->mlx_bits,
                   ft->mlx_group_size, ft->name);
        }
        if (mlx)
            printf("\n");
        if (f && f->checkpoint_formats && f->checkpoint_formats[0]) {
            printf("    checkpoints:");
            for (size_t i = 0; f->checkpoint_formats[i]; i++)
                printf(" %s", f->checkpoint_formats[i]);
            printf("\n");
        }
    } else {
        const struct splash_family_plugin *f = family_named(r, rec->name);
        printf("    gguf architectures:");
        for (size_t i = 0; f && f->gguf_architectures && f->gguf_architectures[i]; i++)
            printf(" %s", f->gguf_architectures[i]);
        printf("\n    model types:");
        for (size_t i = 0; f && f->model_types && f->model_types[i]; i++)
            printf(" %s", f->model_types[i]);
        printf("\n");
    }
}

int splash_cmd_plugins(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: splash plugins [--plugin-dir DIR]...\n"
                   "Lists the CPU features kernel rows may use (after SPLASH_FORCE_ISA), the plugins\n"
                   "that loaded and those refused, with the reason.\n");
            return 0;
        }
        fprintf(stderr, "splash plugins: unknown option %s\n", argv[i]);
        return 2;
    }
    struct splash_registry *r = splash_registry_global();
    size_t n = splash_registry_n_records(r), refused = 0;
    char cpu[256];
    splash_cpu_describe(cpu, sizeof cpu);
    printf("CPU features for kernel rows: %s\n", cpu);
    printf("Loaded plugins:\n");
    for (size_t i = 0; i < n; i++) {
        const struct splash_plugin_record *rec = splash_registry_record(r, i);
        if (rec->refusal[0]) {
            refused++;
            continue;
        }
        printf("  %-14s %-6s %-8s %s\n", rec->name, kind_name(rec->kind), rec->version, rec->origin);
        print_claims(r, rec);
    }
    if (refused) {
        printf("Refused plugins:\n");
        for (size_t i = 0; i < n; i++) {
            const struct splash_plugin_record *rec = splash_registry_record(r, i);
            if (rec->refusal[0])
                printf("  %s: %s\n", rec->origin, rec->refusal);
        }
    }
    return 0;
}
