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
        /* the configuration the header derives (a family's text_config, ABI 1.4) */
        json_t *config = res->verdict.text_config[0]
                             ? json_loads(res->verdict.text_config, 0, NULL)
                             : NULL;
        if (config)
            json_object_set_new(o, "text_config", config);
    }
    if (res->n_tensors)
        json_object_set_new(o, "tensors", json_integer((json_int_t)res->n_tensors));
    if (res->loads[0])
        json_object_set_new(o, "loads", json_string(res->loads));
    if (res->draft_checked) {
        json_t *d = json_object();
        json_object_set_new(d, "ok", json_boolean(res->draft_plugin[0] != 0));
        json_object_set_new(d, "dir", json_string(res->draft_file));
        if (res->draft_plugin[0]) {
            json_object_set_new(d, "plugin", json_string(res->draft_plugin));
            json_object_set_new(d, "architecture", json_string(res->draft_verdict.architecture));
            json_object_set_new(d, "summary", json_string(res->draft_verdict.summary));
        }
        json_object_set_new(o, "draft_model", d);
    }
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
    const char *path = NULL, *draft = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (!strcmp(argv[i], "--draft-model") && i + 1 < argc)
            draft = argv[++i];
        else if (!strcmp(argv[i], "--draft-model")) {
            fprintf(stderr, "splash model-check: --draft-model needs a directory\n");
            return 2;
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: splash model-check [--json] [--plugin-dir DIR] [--draft-model DIR] PATH\n"
                   "PATH: a GGUF (whole, any split part, or a header copy), a config.json,\n"
                   "or a directory of either. Reads metadata only.\n"
                   "  --draft-model DIR  also check the DFlash2 draft in DIR (config.json and its\n"
                   "                     safetensors headers) against the target\n");
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
    enum splash_status st =
        splash_model_check_draft(splash_registry_global(), path, draft, &res, &err);
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
        if (v->text_config[0])
            printf("  text_config %s\n", v->text_config);
        if (res.draft_checked)
            printf("%s: %s draft (%s) · ok\n", res.draft_file, res.draft_verdict.architecture,
                   res.draft_verdict.summary);
    } else {
        fprintf(stderr, "%s: refused\n%s\n", res.file[0] ? res.file : path,
                res.problems ? res.problems : err.msg);
    }
    splash_check_result_free(&res);
    return st == SPLASH_OK ? 0 : 1;
}
