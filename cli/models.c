/* `splash pull MODEL` installs a model as `splash serve` would, without serving it;
 * `splash models` lists the installed models; `splash prepare PATH` prepares local files. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/registry.h"
#include "server/hub/assembly.h"
#include "server/hub/install.h"
#include "server/hub/installed.h"
#include "server/hub/prepare.h"
#include "server/hub/progress.h"

static void err_line(const char *line)
{
    fprintf(stderr, "%s\n", line);
}

int splash_cmd_pull(int argc, char **argv)
{
    struct splash_install_request req = {.registry = splash_registry_global(),
                                         .line = err_line, .tty = isatty(2)};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: splash pull OWNER/REPO[:VARIANT] [--revision REV] [--offline] "
                   "[--language-only]\n"
                   "                  [--draft-model OWNER/REPO|DIR|none]\n"
                   "Installs the model as splash serve does (Hugging Face cache, model-check on\n"
                   "its headers first), with the DFlash2 draft its family names (or the one\n"
                   "--draft-model names) and a GGUF repository's vision projector unless\n"
                   "--language-only, and prints the installed directory.\n");
            return 0;
        } else if (!strcmp(a, "--revision") && i + 1 < argc) {
            req.revision = argv[++i];
        } else if (!strcmp(a, "--offline")) {
            req.offline = 1;
        } else if (!strcmp(a, "--language-only")) {
            req.language_only = 1;
        } else if (!strcmp(a, "--draft-model") && i + 1 < argc) {
            req.draft_model = argv[++i];
        } else if (a[0] == '-' || req.model) {
            fprintf(stderr, "splash pull: unexpected %s (see splash pull --help)\n", a);
            return 2;
        } else {
            req.model = a;
        }
    }
    if (!req.model) {
        fprintf(stderr, "usage: splash pull OWNER/REPO[:VARIANT] [--revision REV] [--offline]\n");
        return 2;
    }
    struct splash_installed inst;
    struct splash_err err;
    if (splash_install(&req, &inst, &err)) {
        fprintf(stderr, "Error · %s\n", err.msg);
        return 1;
    }
    printf("%s\n", inst.dir);
    return 0;
}

struct listing {
    int as_json;
    json_t *list;
};

static void damaged(const char *name, const struct splash_err *why, void *user)
{
    const struct listing *l = user;
    if (!l->as_json)
        fprintf(stderr, "%s: %s\n", name, why->msg);
}

static int row(const char *name, const struct splash_installed *inst, json_t *meta, void *user)
{
    struct listing *l = user;
    (void)name;
    json_t *o = json_deep_copy(meta);
    json_object_set_new(o, "directory", json_string(inst->dir));
    char size[32];
    splash_hub_format_bytes((uint64_t)json_integer_value(json_object_get(o, "size")), size,
                            sizeof size);
    const char *cache = json_string_value(json_object_get(o, "cache"));
    int draft = inst->draft_repo[0] || inst->draft_dir[0];
    json_t *files = json_object_get(o, "files");
    for (size_t k = 0; k < json_array_size(files); k++) {
        const char *link = json_string_value(json_object_get(json_array_get(files, k), "link"));
        draft |= link && !strncmp(link, "draft/", 6);
    }
    if (!l->as_json)
        printf("%-44s %-10s %-12.12s %9s  %-5s  %s\n",
               json_string_value(json_object_get(o, "model")),
               json_string_value(json_object_get(o, "revision")), inst->commit, size,
               draft ? "yes" : "-", cache && *cache ? cache : inst->dir);
    json_array_append_new(l->list, o);
    return 0;
}

int splash_cmd_models(int argc, char **argv)
{
    int as_json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc > 1 && !as_json) {
        printf("usage: splash models [--json]\nLists the installed models: revision, commit, "
               "size, draft and where the files are.\n");
        return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
    }
    char dir[PATH_MAX];
    struct splash_err err;
    if (splash_install_models_dir(dir, sizeof dir, &err)) {
        fprintf(stderr, "Error · %s\n", err.msg);
        return 1;
    }
    struct listing l = {.as_json = as_json, .list = json_array()};
    if (!as_json)
        printf("%-44s %-10s %-12s %9s  %-5s  %s\n", "MODEL", "REVISION", "COMMIT", "SIZE",
               "DRAFT", "FILES");
    splash_installed_each(dir, row, damaged, &l, &err);
    if (as_json) {
        char *text = json_dumps(l.list, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text ? text : "[]");
        free(text);
    }
    json_decref(l.list);
    return 0;
}

int splash_cmd_prepare(int argc, char **argv)
{
    const char *target = NULL, *draft = NULL, *mmproj = NULL, *variant = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: splash prepare PATH [--variant V] [--draft DIR] [--mmproj FILE] "
                   "[--models-dir DIR]\n"
                   "Checks a local GGUF file (or any part of a split GGUF), a directory of GGUF\n"
                   "targets or an MLX model directory as a download is checked, assembles it\n"
                   "in Splash's models directory, and prints that directory. No network.\n");
            return 0;
        } else if (!strcmp(a, "--draft") && i + 1 < argc) {
            draft = argv[++i];
        } else if (!strcmp(a, "--mmproj") && i + 1 < argc) {
            mmproj = argv[++i];
        } else if (!strcmp(a, "--variant") && i + 1 < argc) {
            variant = argv[++i];
        } else if (!strcmp(a, "--models-dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (a[0] == '-' || target) {
            fprintf(stderr, "splash prepare: unexpected %s (see splash prepare --help)\n", a);
            return 2;
        } else {
            target = a;
        }
    }
    if (!target) {
        fprintf(stderr, "usage: splash prepare PATH [--draft DIR] [--mmproj FILE]\n");
        return 2;
    }
    struct splash_prepared prep;
    struct splash_err err;
    if (splash_prepare_local_model(splash_registry_global(), target, variant, draft, mmproj, dir,
                                   &prep, &err)) {
        fprintf(stderr, "Error · %s\n", err.msg);
        return 1;
    }
    printf("%s\n", prep.dir);
    return 0;
}
