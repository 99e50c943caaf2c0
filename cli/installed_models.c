/* `splash --list-models`: the installed models' IDs, for the shell completions of
 * --model. An installation is DATA/models/OWNER--REPO[--VARIANT][@REVISION][+language-only]
 * with a `current` entry naming the assembly a start serves (server/hub/install.h); its
 * ID is OWNER/REPO[:VARIANT]. Reads names only, never the network or the weights. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "core/paths.h"

/* OWNER--REPO[--VARIANT][@REV][+language-only] -> OWNER/REPO[:VARIANT]; 0 if not that shape. */
static int installation_id(const char *name, char *id, size_t size)
{
    char copy[NAME_MAX + 1];
    snprintf(copy, sizeof copy, "%s", name);
    copy[strcspn(copy, "@+")] = 0;
    char *owner_end = strstr(copy, "--");
    if (!owner_end || owner_end == copy || !owner_end[2])
        return 0;
    *owner_end = 0;
    char *repo = owner_end + 2;
    char *variant = strstr(repo, "--");
    if (variant) {
        *variant = 0;
        variant += 2;
    }
    if (!*repo || (variant && !*variant))
        return 0;
    snprintf(id, size, "%s/%s%s%s", copy, repo, variant ? ":" : "", variant ? variant : "");
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int splash_list_installed_models(void)
{
    char dir[PATH_MAX];
    struct splash_err err;
    if (splash_dir_path(SPLASH_DIR_DATA, "models", 0, dir, sizeof dir, &err) != SPLASH_OK)
        return 0; /* no data directory: nothing installed */
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char **ids = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char id[NAME_MAX + 16], current[PATH_MAX + NAME_MAX + 16];
        struct stat st;
        if (e->d_name[0] == '.' || !installation_id(e->d_name, id, sizeof id))
            continue;
        snprintf(current, sizeof current, "%s/%s/current", dir, e->d_name);
        if (lstat(current, &st) != 0)
            continue; /* an installation never completed */
        char **grown = realloc(ids, (n + 1) * sizeof *ids);
        if (!grown || !(grown[n] = strdup(id))) {
            ids = grown ? grown : ids;
            break;
        }
        ids = grown;
        n++;
    }
    closedir(d);
    if (n)
        qsort(ids, n, sizeof *ids, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(ids[i], ids[i - 1]))
            printf("%s\n", ids[i]);
        free(ids[i]);
    }
    free(ids);
    return 0;
}
