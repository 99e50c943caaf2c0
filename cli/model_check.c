/* `splash model-check PATH [--json]`: installers run it before downloading weights. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/model_check.h"
#include "core/registry.h"

static void print_json(const struct splash_check_result *res, const char *error)
{
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(res->ok));
    json_object_set_new(o, "file", json_string(res->file));
    if (res->family[0]) {
        json_object_set_new(o, "plugin", json_string(res->family));
        json_object_set_new(o, "architecture", json_string(res->verdict.architecture));
        json_object_set_new(o, "size", res->verdict.size_name[0] ? json_string(res->verdict.size_name)
                                                                  : json_null());
        json_object_set_new(o, "draft", res->verdict.draft_repo[0]
                                            ? json_string(res->verdict.draft_repo)
                                            : json_null());
        json_object_set_new(o, "summary", json_string(res->verdict.summary));
    }
    if (res->n_tensors)
        json_object_set_new(o, "tensors", json_integer((json_int_t)res->n_tensors));
    if (res->loads[0])
        json_object_set_new(o, "loads", json_string(res->loads));
    if (!res->ok)
        json_object_set_new(o, "error", json_string(res->problems ? res->problems : error));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(o);
}

int splash_cmd_model_check(int argc, char **argv)
{
    const char *path = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: splash model-check [--json] [--plugin-dir DIR] PATH\n"
                   "PATH: a GGUF (whole, any split part, or a header copy), a config.json,\n"
                   "or a directory of either. Reads metadata only.\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "splash model-check: unknown option %s\n", argv[i]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "splash model-check: one PATH only\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: splash model-check [--json] PATH\n");
        return 2;
    }
    struct splash_check_result res;
    struct splash_err err = {{0}};
    enum splash_status st = splash_model_check(splash_registry_global(), path, &res, &err);
    if (as_json) {
        print_json(&res, err.msg);
    } else if (st == SPLASH_OK) {
        const struct splash_family_verdict *v = &res.verdict;
        if (v->size_name[0])
            printf("%s: %s, %s (%s) · ok\n", res.file, v->size_name, v->architecture, v->summary);
        else
            printf("%s: %s, another size of it (%s) · ok\n", res.file, v->architecture, v->summary);
        if (res.loads[0])
            printf("  loads %s\n", res.loads);
    } else {
        fprintf(stderr, "%s: refused\n%s\n", res.file[0] ? res.file : path,
                res.problems ? res.problems : err.msg);
    }
    splash_check_result_free(&res);
    return st == SPLASH_OK ? 0 : 1;
}
