/* Target selection over a local directory, file or split part, and model IDs. */
#include "core/target.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/meta.h"
#include "core/safetensors.h"

/* ---- model IDs ------------------------------------------------------------ */

static int id_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static int id_part_ok(const char *s, size_t len)
{
    if (len == 0 || len > SPLASH_MODEL_ID_MAX || s[0] == '-' || s[0] == '.' ||
        s[len - 1] == '.' || s[len - 1] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (!id_char(s[i]))
            return 0;
        if (i && s[i] == s[i - 1] && (s[i] == '.' || s[i] == '-'))
            return 0;
    }
    return 1;
}

enum splash_status splash_model_id_parse(const char *text, struct splash_model_id *out,
                                         struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    const char *slash = strchr(text, '/');
    const char *colon = strchr(text, ':');
    if (!slash || (colon && colon < slash))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "model %.100s: expected OWNER/REPO or OWNER/REPO:VARIANT", text);
    const char *repo = slash + 1;
    size_t owner_len = (size_t)(slash - text);
    size_t repo_len = colon ? (size_t)(colon - repo) : strlen(repo);
    if (!id_part_ok(text, owner_len))
        return splash_err_set(err, SPLASH_ERR_INVALID, "model %.100s: bad owner name", text);
    if (!id_part_ok(repo, repo_len))
        return splash_err_set(err, SPLASH_ERR_INVALID, "model %.100s: bad repository name", text);
    if (colon) {
        const char *v = colon + 1;
        size_t len = strlen(v);
        if (len == 0 || len > SPLASH_MODEL_ID_MAX)
            return splash_err_set(err, SPLASH_ERR_INVALID, "model %.100s: empty or long variant",
                                  text);
        for (size_t i = 0; i < len; i++)
            if (!id_char(v[i]))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "model %.100s: bad character in the variant", text);
        memcpy(out->variant, v, len);
    }
    memcpy(out->owner, text, owner_len);
    memcpy(out->repo, repo, repo_len);
    return SPLASH_OK;
}

/* ---- directory scan -------------------------------------------------------- */

/* One target name at the root (a whole file and/or a split group), or a folder. */
struct group {
    char name[256];      /* target name; for a folder, its split parts' name */
    char folder[256];    /* "" at the root */
    int whole;           /* NAME.gguf present (root only) */
    int n;               /* split count, 0 when no parts */
    int mixed_n;         /* parts disagree on N */
    char other[256];     /* folder: a second name found among its parts */
    unsigned char *have; /* parts present, indexed 1..n */
};

struct scan {
    const char *dir;
    struct group *g;
    size_t n, cap;
    char projectors[192]; /* mmproj files seen, for messages */
};

static void scan_free(struct scan *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->g[i].have);
    free(s->g);
}

static int is_projector(const char *name)
{
    for (const char *p = name; *p; p++)
        if (strncasecmp(p, "mmproj", 6) == 0)
            return 1;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static struct group *group_get(struct scan *s, const char *folder, const char *name, size_t len)
{
    if (len >= sizeof s->g[0].name || strlen(folder) >= sizeof s->g[0].folder)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        struct group *g = &s->g[i];
        if (!strcmp(g->folder, folder) && (*folder || (strlen(g->name) == len &&
                                                        !strncmp(g->name, name, len))))
            return g;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct group *grown = realloc(s->g, cap * sizeof *grown);
        if (!grown)
            return NULL;
        s->g = grown;
        s->cap = cap;
    }
    struct group *g = &s->g[s->n++];
    memset(g, 0, sizeof *g);
    memcpy(g->name, name, len);
    snprintf(g->folder, sizeof g->folder, "%s", folder);
    return g;
}

/* Records a split part NAME-0000k-of-0000n.gguf of group g. */
static int add_part(struct group *g, const char *name, size_t prefix_len, int k, int n)
{
    if (strlen(g->name) != prefix_len || strncmp(g->name, name, prefix_len)) {
        if (!g->other[0] && prefix_len < sizeof g->other)
            memcpy(g->other, name, prefix_len);
        return 0;
    }
    if (g->n && g->n != n) {
        g->mixed_n = 1;
        return 0;
    }
    if (!g->n) {
        if (!(g->have = calloc((size_t)n + 1, 1)))
            return -1;
        g->n = n;
    }
    g->have[k] = 1;
    return 0;
}

static int is_file(int dfd, const char *name)
{
    struct stat sb;
    return fstatat(dfd, name, &sb, 0) == 0 && S_ISREG(sb.st_mode);
}

static int is_dir(int dfd, const char *name)
{
    struct stat sb;
    return fstatat(dfd, name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
}

static void note_projector(struct scan *s, const char *name)
{
    size_t used = strlen(s->projectors);
    if (used + strlen(name) + 3 < sizeof s->projectors)
        snprintf(s->projectors + used, sizeof s->projectors - used, "%s%s", used ? ", " : "",
                 name);
}

static int is_split_gguf(const struct dirent *e)
{
    size_t prefix_len;
    int k, n;
    return ends_with(e->d_name, ".gguf") && !is_projector(e->d_name) &&
           splash_gguf_split_name(e->d_name, &prefix_len, &k, &n);
}

/* A folder's split parts, in name order so messages are stable. */
static enum splash_status scan_folder(struct scan *s, const char *folder, struct splash_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", s->dir, folder);
    struct dirent **entries;
    int count = scandir(path, &entries, is_split_gguf, alphasort);
    if (count < 0)
        return SPLASH_OK;
    struct group *g = NULL;
    enum splash_status st = SPLASH_OK;
    for (int i = 0; i < count; i++) {
        const char *name = entries[i]->d_name;
        size_t prefix_len;
        int k, n;
        char file[PATH_MAX + 256];
        struct stat sb;
        snprintf(file, sizeof file, "%s/%s", path, name);
        if (st || !splash_gguf_split_name(name, &prefix_len, &k, &n) || stat(file, &sb) != 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (!g && !(g = group_get(s, folder, name, prefix_len)))
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory or name too long",
                                folder);
        else if (add_part(g, name, prefix_len, k, n) < 0)
            st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < count; i++)
        free(entries[i]);
    free(entries);
    return st;
}

static enum splash_status scan_dir(struct scan *s, struct splash_err *err)
{
    DIR *d = opendir(s->dir);
    if (!d)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: cannot open the directory", s->dir);
    enum splash_status st = SPLASH_OK;
    struct dirent *e;
    /* folders are scanned after the root listing (readdir order is arbitrary) */
    char (*folders)[256] = NULL;
    size_t n_folders = 0;
    while ((e = readdir(d)) && !st) {
        const char *name = e->d_name;
        if (name[0] == '.')
            continue;
        if (is_dir(dirfd(d), name)) {
            if (strlen(name) >= 256)
                continue;
            void *grown = realloc(folders, (n_folders + 1) * sizeof *folders);
            if (!grown) {
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
                break;
            }
            folders = grown;
            snprintf(folders[n_folders++], 256, "%s", name);
            continue;
        }
        if (!ends_with(name, ".gguf") || !is_file(dirfd(d), name))
            continue;
        if (is_projector(name)) {
            note_projector(s, name);
            continue;
        }
        size_t prefix_len;
        int k, n;
        struct group *g;
        if (strlen(name) >= sizeof s->g[0].name)
            continue; /* no model is named so */
        if (splash_gguf_split_name(name, &prefix_len, &k, &n)) {
            if (!(g = group_get(s, "", name, prefix_len)) || add_part(g, name, prefix_len, k, n) < 0)
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory or name too long",
                                    name);
        } else {
            if (!(g = group_get(s, "", name, strlen(name) - 5)))
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory or name too long",
                                    name);
            else
                g->whole = 1;
        }
    }
    closedir(d);
    for (size_t i = 0; i < n_folders && !st; i++)
        st = scan_folder(s, folders[i], err);
    free(folders);
    return st;
}

static int cmp_group(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    int c = strcmp(x->folder, y->folder);
    return c ? c : strcmp(x->name, y->name);
}

/* "found: A.gguf, B (3 parts), Q8_0/ (2 parts)" into buf. */
static void describe(const struct scan *s, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "found:");
    int any = 0;
    for (size_t i = 0; i < s->n && used < size; i++) {
        const struct group *g = &s->g[i];
        char item[320];
        if (g->folder[0])
            snprintf(item, sizeof item, " %.100s/ (%.100s, %d parts)", g->folder, g->name, g->n);
        else if (g->whole && g->n)
            snprintf(item, sizeof item, " %.100s.gguf, %.100s (%d parts)", g->name, g->name, g->n);
        else if (g->whole)
            snprintf(item, sizeof item, " %s.gguf", g->name);
        else
            snprintf(item, sizeof item, " %s (%d parts)", g->name, g->n);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", any ? "," : "", item);
        any = 1;
    }
    if (!any && used < size)
        used += (size_t)snprintf(buf + used, size - used, " no GGUF target");
    if (s->projectors[0] && used < size)
        snprintf(buf + used, size - used, "; projectors: %.60s", s->projectors);
}

/* ---- selection --------------------------------------------------------------- */

static enum splash_status fill_split(const char *dir, const struct group *g,
                                     struct splash_target *out, struct splash_err *err)
{
    const char *where = g->folder[0] ? g->folder : dir;
    if (g->other[0])
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%.80s: mixes the split parts of several names (%.60s, %.60s)",
                              where, g->name, g->other);
    if (g->mixed_n)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%.80s: the split parts of %.100s disagree on their count", where,
                              g->name);
    for (int k = 1; k <= g->n; k++)
        if (!g->have[k])
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                  "%.80s: %.100s-%05d-of-%05d.gguf is missing (split part %d of %d)",
                                  where, g->name, k, g->n, k, g->n);
    out->kind = SPLASH_TARGET_GGUF_SPLIT;
    out->n_parts = g->n;
    if (g->folder[0])
        snprintf(out->dir, sizeof out->dir, "%.2048s/%s", dir, g->folder);
    else
        snprintf(out->dir, sizeof out->dir, "%s", dir);
    snprintf(out->name, sizeof out->name, "%s", g->name);
    splash_target_part_path(out, 1, out->path, sizeof out->path);
    return SPLASH_OK;
}

/* A root group: its whole file first, else its parts. */
static enum splash_status fill_group(const char *dir, const struct group *g,
                                     struct splash_target *out, struct splash_err *err)
{
    if (!g->whole)
        return fill_split(dir, g, out, err);
    out->kind = SPLASH_TARGET_GGUF;
    out->n_parts = 1;
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    snprintf(out->name, sizeof out->name, "%s", g->name);
    splash_target_part_path(out, 1, out->path, sizeof out->path);
    return SPLASH_OK;
}

/* The model name the root targets share: their common prefix up to its last '-'. */
static size_t shared_model_len(const struct scan *s)
{
    const char *first = NULL;
    size_t lcp = 0, roots = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct group *g = &s->g[i];
        if (g->folder[0])
            continue;
        roots++;
        if (!first) {
            first = g->name;
            lcp = strlen(first);
            continue;
        }
        size_t j = 0;
        while (j < lcp && first[j] == g->name[j])
            j++;
        lcp = j;
    }
    if (roots < 2)
        return 0;
    while (lcp > 0 && first[lcp - 1] != '-')
        lcp--;
    return lcp ? lcp - 1 : 0;
}

static enum splash_status select_variant(const char *dir, struct scan *s, const char *variant,
                                         struct splash_target *out, struct splash_err *err)
{
    char found[200];
    size_t vlen = strlen(variant);
    /* 1: MODEL-VARIANT at the root */
    size_t mlen = shared_model_len(s);
    if (mlen) {
        const char *model = NULL;
        for (size_t i = 0; i < s->n && !model; i++)
            if (!s->g[i].folder[0])
                model = s->g[i].name;
        for (size_t i = 0; i < s->n; i++) {
            const struct group *g = &s->g[i];
            if (!g->folder[0] && strlen(g->name) == mlen + 1 + vlen &&
                !strncmp(g->name, model, mlen) && g->name[mlen] == '-' &&
                !strcmp(g->name + mlen + 1, variant))
                return fill_group(dir, g, out, err);
        }
    }
    /* 2: the folder named VARIANT, in any case */
    for (size_t i = 0; i < s->n; i++)
        if (s->g[i].folder[0] && !strcasecmp(s->g[i].folder, variant))
            return fill_split(dir, &s->g[i], out, err);
    /* 3: the only root target whose name ends in -VARIANT */
    const struct group *hit = NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct group *g = &s->g[i];
        size_t len = strlen(g->name);
        if (g->folder[0] || len <= vlen + 1 || g->name[len - vlen - 1] != '-' ||
            strcmp(g->name + len - vlen, variant))
            continue;
        if (hit)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%.100s: variant %.40s names several targets (%.60s, %.60s)",
                                  dir, variant, hit->name, g->name);
        hit = g;
    }
    if (hit)
        return fill_group(dir, hit, out, err);
    describe(s, found, sizeof found);
    return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.100s: no target for variant %.40s; %s",
                          dir, variant, found);
}

static enum splash_status select_only(const char *dir, struct scan *s, struct splash_target *out,
                                      struct splash_err *err)
{
    char found[200];
    const struct group *pick = NULL;
    int names = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct group *g = &s->g[i];
        int same = pick && !strcmp(pick->name, g->name);
        if (!same)
            names++;
        /* a root group (whole file first) before a folder of the same name */
        if (!pick || (same && pick->folder[0] && !g->folder[0]))
            pick = g;
    }
    if (names == 1)
        return pick->folder[0] ? fill_split(dir, pick, out, err) : fill_group(dir, pick, out, err);
    describe(s, found, sizeof found);
    if (names == 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%.100s: no MLX model and no GGUF target; %s", dir, found);
    return splash_err_set(err, SPLASH_ERR_INVALID,
                          "%.100s: several targets, name one as a variant; %s", dir, found);
}

static int is_mlx_dir(const char *dir)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (stat(path, &sb) == 0)
        return 1;
    char **names;
    size_t n;
    struct splash_err err;
    if (splash_safetensors_list_shards(dir, &names, &n, &err))
        return 0;
    free(names);
    return 1;
}

static enum splash_status select_file(const char *path, struct splash_target *out,
                                      struct splash_err *err)
{
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    if (!ends_with(file, ".gguf"))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%.180s: not a GGUF file (a .gguf extension, in lower case)", path);
    if (is_projector(file))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%.180s: a vision projector (mmproj), not a model", path);
    if (slash)
        snprintf(out->dir, sizeof out->dir, "%.*s", (int)(slash - path), path);
    else
        snprintf(out->dir, sizeof out->dir, ".");
    size_t prefix_len;
    int k, n;
    if (!splash_gguf_split_name(file, &prefix_len, &k, &n)) {
        out->kind = SPLASH_TARGET_GGUF;
        out->n_parts = 1;
        snprintf(out->name, sizeof out->name, "%.*s", (int)(strlen(file) - 5), file);
        snprintf(out->path, sizeof out->path, "%s", path);
        return SPLASH_OK;
    }
    if (prefix_len >= sizeof out->name)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.180s: name too long", path);
    out->kind = SPLASH_TARGET_GGUF_SPLIT;
    out->n_parts = n;
    snprintf(out->name, sizeof out->name, "%.*s", (int)prefix_len, file);
    for (int i = 1; i <= n; i++) {
        char part[PATH_MAX];
        struct stat sb;
        splash_target_part_path(out, i, part, sizeof part);
        if (stat(part, &sb) != 0 || !S_ISREG(sb.st_mode))
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                  "%.120s-%05d-of-%05d.gguf is missing (split part %d of %d)",
                                  out->name, i, n, i, n);
    }
    splash_target_part_path(out, 1, out->path, sizeof out->path);
    return SPLASH_OK;
}

enum splash_status splash_target_select(const char *path, const char *variant,
                                        struct splash_target *out, struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%.200s: no such file or directory",
                              path);
    if (strlen(path) >= PATH_MAX - 512)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%.100s...: path too long", path);
    if (!S_ISDIR(sb.st_mode))
        return select_file(path, out, err);
    if (is_mlx_dir(path)) {
        if (variant && *variant)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%.120s: an MLX model; a variant (%.40s) selects GGUF targets",
                                  path, variant);
        out->kind = SPLASH_TARGET_SAFETENSORS;
        out->n_parts = 1;
        snprintf(out->dir, sizeof out->dir, "%s", path);
        snprintf(out->path, sizeof out->path, "%s", path);
        return SPLASH_OK;
    }
    struct scan s = {.dir = path};
    enum splash_status st = scan_dir(&s, err);
    if (!st) {
        if (s.n)
            qsort(s.g, s.n, sizeof *s.g, cmp_group);
        st = variant && *variant ? select_variant(path, &s, variant, out, err)
                                 : select_only(path, &s, out, err);
    }
    scan_free(&s);
    return st;
}

/* A listing's names: "NAME.gguf" at the root, "FOLDER/NAME-0000K-of-0000N.gguf" in a
 * folder; deeper paths and other files play no part (as in a directory scan). */
static enum splash_status scan_names(struct scan *s, const char *const *paths, size_t n_paths,
                                     struct splash_err *err)
{
    for (size_t i = 0; i < n_paths; i++) {
        const char *p = paths[i];
        const char *slash = strchr(p, '/');
        const char *name = slash ? slash + 1 : p;
        if (p[0] == '.' || !ends_with(name, ".gguf") || (slash && strchr(name, '/')))
            continue;
        if (is_projector(name)) {
            if (!slash)
                note_projector(s, name);
            continue;
        }
        size_t prefix_len;
        int k, n;
        int split = splash_gguf_split_name(name, &prefix_len, &k, &n);
        if (strlen(name) >= sizeof s->g[0].name || (slash && !split))
            continue;
        char folder[256] = "";
        if (slash) {
            if ((size_t)(slash - p) >= sizeof folder || slash == p || p[0] == '.')
                continue;
            memcpy(folder, p, (size_t)(slash - p));
        }
        struct group *g = group_get(s, folder, name, split ? prefix_len : strlen(name) - 5);
        if (!g)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "%.100s: out of memory or name too long",
                                  p);
        if (!split)
            g->whole = 1;
        else if (add_part(g, name, prefix_len, k, n) < 0)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    return SPLASH_OK;
}

static int listing_has(const char *const *paths, size_t n, const char *want)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(paths[i], want))
            return 1;
    return 0;
}

enum splash_status splash_target_select_listing(const char *const *paths, size_t n_paths,
                                                const char *variant, struct splash_target *out,
                                                struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    int weights = 0;
    for (size_t i = 0; i < n_paths && !weights; i++)
        weights = !strchr(paths[i], '/') && (ends_with(paths[i], ".safetensors") ||
                                             !strcmp(paths[i], "model.safetensors.index.json"));
    if (weights && listing_has(paths, n_paths, "config.json")) {
        if (variant && *variant)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "an MLX model; a variant (%.40s) selects GGUF targets", variant);
        out->kind = SPLASH_TARGET_SAFETENSORS;
        out->n_parts = 1;
        return SPLASH_OK;
    }
    struct scan s = {.dir = "."};
    enum splash_status st = scan_names(&s, paths, n_paths, err);
    if (!st) {
        if (s.n)
            qsort(s.g, s.n, sizeof *s.g, cmp_group);
        st = variant && *variant ? select_variant(".", &s, variant, out, err)
                                 : select_only(".", &s, out, err);
    }
    scan_free(&s);
    if (st) {
        if (err && !strncmp(err->msg, ".: ", 3)) /* the caller names the repository */
            memmove(err->msg, err->msg + 3, strlen(err->msg + 3) + 1);
        return st;
    }
    /* "." and "./FOLDER" become "" and "FOLDER": paths relative to the listing */
    const char *rel = out->dir[0] == '.' && out->dir[1] == '/' ? out->dir + 2 : "";
    memmove(out->dir, rel, strlen(rel) + 1);
    splash_target_part_path(out, 1, out->path, sizeof out->path);
    if (!out->dir[0])
        memmove(out->path, out->path + 1, strlen(out->path)); /* drop the leading '/' */
    return SPLASH_OK;
}

int splash_target_part_path(const struct splash_target *t, int k, char *buf, size_t size)
{
    int len;
    if (t->kind == SPLASH_TARGET_GGUF_SPLIT)
        len = snprintf(buf, size, "%s/%s-%05d-of-%05d.gguf", t->dir, t->name, k, t->n_parts);
    else if (t->kind == SPLASH_TARGET_GGUF)
        len = snprintf(buf, size, "%s/%s.gguf", t->dir, t->name);
    else
        len = snprintf(buf, size, "%s", t->path);
    return len >= 0 && (size_t)len < size;
}
