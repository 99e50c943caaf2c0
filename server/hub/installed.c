/* Reading the installed models. */
#include "server/hub/installed.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/paths.h"
#include "server/hub/assembly.h"

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

enum splash_status splash_installed_each(const char *models_dir, splash_installed_fn fn,
                                         splash_installed_bad_fn bad, void *user,
                                         struct splash_err *err)
{
    char dir[PATH_MAX];
    if (models_dir)
        snprintf(dir, sizeof dir, "%s", models_dir);
    else if (splash_dir_path(SPLASH_DIR_DATA, "models", 0, dir, sizeof dir, err) != SPLASH_OK)
        return SPLASH_OK; /* no data directory: nothing installed */
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, by_name);
    int stop = 0;
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        char inst_dir[PATH_MAX + 300], json_path[PATH_MAX + 400];
        struct splash_installed inst;
        struct splash_err why;
        snprintf(inst_dir, sizeof inst_dir, "%s/%s", dir, name);
        if (stop || name[0] == '.') {
            free(entries[i]);
            continue;
        }
        if (splash_assembly_current(inst_dir, &inst, &why) != SPLASH_OK) {
            if (bad)
                bad(name, &why, user);
            free(entries[i]);
            continue;
        }
        snprintf(json_path, sizeof json_path, "%s/model.json", inst.dir);
        json_t *meta = json_load_file(json_path, 0, NULL);
        if (meta)
            stop = fn(name, &inst, meta, user);
        json_decref(meta);
        free(entries[i]);
    }
    if (n >= 0)
        free(entries);
    return SPLASH_OK;
}
