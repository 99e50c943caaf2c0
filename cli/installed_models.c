/* `splash --list-models`: the installed models' IDs (OWNER/REPO[:VARIANT]) for the shell
 * completions of --model, read by the one reader `splash models` uses
 * (server/hub/installed.h). Local preparations have no ID and are left out; the same ID
 * installed at several revisions or options prints once. Never the network or the
 * weights. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "server/hub/installed.h"

static int add_id(const char *name, const struct splash_installed *inst, json_t *meta,
                  void *user)
{
    (void)name, (void)inst;
    const char *repo = json_string_value(json_object_get(meta, "repository"));
    const char *id = json_string_value(json_object_get(meta, "model"));
    if (repo && *repo && id)
        json_object_set_new(user, id, json_true()); /* a set: each ID once */
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int splash_list_installed_models(void)
{
    json_t *ids = json_object();
    struct splash_err err;
    splash_installed_each(NULL, add_id, NULL, ids, &err);
    size_t n = json_object_size(ids), i = 0;
    const char **sorted = calloc(n ? n : 1, sizeof *sorted);
    const char *id;
    json_t *v;
    json_object_foreach(ids, id, v) {
        if (sorted)
            sorted[i++] = id;
    }
    if (sorted) {
        qsort(sorted, i, sizeof *sorted, cmp_str);
        for (size_t k = 0; k < i; k++)
            printf("%s\n", sorted[k]);
    }
    free(sorted);
    json_decref(ids);
    return 0;
}
