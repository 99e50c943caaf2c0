/* The plugin registry: validates descriptors, copies them into full-size
 * zeroed structs, and answers format and family look-ups. */
#include "core/registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/family.h"
#include "core/format_links.h"
#include "core/gguf.h"
#include "core/host.h"
#include "core/host_impl.h"
#include "core/plugin_search.h"

/* The smallest descriptors ABI 1.0 accepts: header plus the members 1.0 requires. */
#define FORMAT_MIN_SIZE offsetof(struct splash_format_plugin, checkpoint_formats)
#define FAMILY_MIN_SIZE (offsetof(struct splash_family_plugin, forward) + sizeof(void *))
/* Drafts came with ABI 1.3, whole. */
#define DRAFT_MIN_SIZE (offsetof(struct splash_draft_plugin, propose) + sizeof(void *))

struct splash_registry {
    struct splash_plugin_record *records;
    size_t n_records, cap_records;
    struct splash_format_plugin **formats;
    size_t n_formats;
    struct splash_family_plugin **families;
    size_t n_families;
    struct splash_draft_plugin **drafts;
    size_t n_drafts;
    struct splash_host host; /* handed to this registry's plugins */
};

/* The first live registry: ABI 1.0's context-free format look-ups answer from it. */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static struct splash_registry *primary;

static const struct splash_format_type *primary_format_by_gguf(int32_t gguf_type)
{
    pthread_mutex_lock(&primary_lock);
    const struct splash_format_type *f =
        primary ? splash_registry_format_by_gguf(primary, gguf_type) : NULL;
    pthread_mutex_unlock(&primary_lock);
    return f;
}

static const struct splash_format_type *primary_format_by_name(const char *name)
{
    pthread_mutex_lock(&primary_lock);
    const struct splash_format_type *f =
        primary ? splash_registry_format_by_name(primary, name) : NULL;
    pthread_mutex_unlock(&primary_lock);
    return f;
}

/* The registry whose host table h is. */
static const struct splash_registry *registry_of_host(const struct splash_host *h)
{
    return (const struct splash_registry *)((const char *)h -
                                            offsetof(struct splash_registry, host));
}

static const struct splash_format_type *host_find_gguf(const struct splash_host *h,
                                                       int32_t gguf_type)
{
    return splash_registry_format_by_gguf(registry_of_host(h), gguf_type);
}

static const struct splash_format_type *host_find_name(const struct splash_host *h,
                                                       const char *name)
{
    return splash_registry_format_by_name(registry_of_host(h), name);
}

struct splash_registry *splash_registry_create(void)
{
    struct splash_registry *r = calloc(1, sizeof(struct splash_registry));
    if (!r)
        return NULL;
    const struct splash_host_formats formats = {.by_gguf = primary_format_by_gguf,
                                                .by_name = primary_format_by_name,
                                                .find_gguf = host_find_gguf,
                                                .find_name = host_find_name};
    splash_host_init(&r->host, &formats);
    pthread_mutex_lock(&primary_lock);
    if (!primary)
        primary = r;
    pthread_mutex_unlock(&primary_lock);
    return r;
}

const struct splash_host *splash_registry_host(const struct splash_registry *r)
{
    return &r->host;
}

void splash_registry_destroy(struct splash_registry *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&primary_lock);
    if (primary == r)
        primary = NULL;
    pthread_mutex_unlock(&primary_lock);
    for (size_t i = 0; i < r->n_formats; i++)
        free(r->formats[i]);
    for (size_t i = 0; i < r->n_families; i++)
        free(r->families[i]);
    for (size_t i = 0; i < r->n_drafts; i++)
        free(r->drafts[i]);
    free(r->formats);
    free(r->families);
    free(r->drafts);
    free(r->records);
    free(r);
}

static struct splash_plugin_record *record_add(struct splash_registry *r, const char *origin)
{
    if (r->n_records == r->cap_records) {
        size_t cap = r->cap_records ? r->cap_records * 2 : 16;
        struct splash_plugin_record *n = realloc(r->records, cap * sizeof *n);
        if (!n)
            return NULL;
        r->records = n;
        r->cap_records = cap;
    }
    struct splash_plugin_record *rec = &r->records[r->n_records++];
    memset(rec, 0, sizeof *rec);
    snprintf(rec->origin, sizeof rec->origin, "%s", origin);
    return rec;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Records and logs one refusal; returns status with err filled. */
static enum splash_status refuse(struct splash_registry *r, struct splash_plugin_record *rec,
                                 const char *origin, enum splash_status status,
                                 struct splash_err *err, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static enum splash_status refuse(struct splash_registry *r, struct splash_plugin_record *rec,
                                 const char *origin, enum splash_status status,
                                 struct splash_err *err, const char *fmt, ...)
{
    (void)r;
    char reason[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (rec)
        snprintf(rec->refusal, sizeof rec->refusal, "%s", reason);
    splash_log(SPLASH_LOG_WARN, NULL, "plugin %s: %s", base_name(origin), reason);
    return splash_err_set(err, status, "plugin %s: %s", base_name(origin), reason);
}

static int name_taken(const struct splash_registry *r, const char *name, const char **where)
{
    for (size_t i = 0; i < r->n_records; i++) {
        const struct splash_plugin_record *rec = &r->records[i];
        if (!rec->refusal[0] && rec->name[0] && !strcmp(rec->name, name)) {
            *where = rec->origin;
            return 1;
        }
    }
    return 0;
}

static int valid_name(const char *name)
{
    if (!name || !*name || strlen(name) >= 64)
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
            return 0;
    return 1;
}

/* Format type names must be unique across plugins: two plugins decoding "Q4_K"
 * would make the choice depend on load order. */
static const char *format_type_clash(const struct splash_registry *r,
                                     const struct splash_format_plugin *fp, const char **other)
{
    for (uint32_t t = 0; t < fp->n_types; t++) {
        const struct splash_format_type *ft = fp->types[t];
        if (!ft || !ft->name)
            return "(unnamed type)";
        for (size_t i = 0; i < r->n_formats; i++)
            for (uint32_t u = 0; u < r->formats[i]->n_types; u++) {
                const struct splash_format_type *o = r->formats[i]->types[u];
                if (!strcmp(o->name, ft->name) ||
                    (ft->gguf_type >= 0 && o->gguf_type == ft->gguf_type)) {
                    *other = r->formats[i]->header.name;
                    return ft->name;
                }
            }
    }
    return NULL;
}

/* SPLASH_FORMAT_LINEAR for a plugin built before ABI 1.2, which could not say: every
 * quantized type of a GGUF id with kernel rows of its own. */
static int legacy_linear(const struct splash_format_type *ft)
{
    const uint32_t not_linear =
        SPLASH_FORMAT_FLOAT | SPLASH_FORMAT_ACTIVATION_ONLY | SPLASH_FORMAT_REPACKED;
    return ft->gguf_type >= 0 && !(ft->flags & not_linear) && ft->rows && ft->n_rows;
}

/* A full-size copy of a format descriptor, its types copied too into records the
 * registry owns (one allocation): zeroed full-size structs, so the members a plugin
 * built before ABI 1.1 predates read as NULL, each followed by the links the registry
 * binds to it (core/format_links.h). */
static struct splash_format_plugin *copy_format_plugin(const struct splash_plugin_header *h)
{
    const struct splash_format_plugin *src = (const struct splash_format_plugin *)h;
    const size_t copy = h->size < sizeof *src ? h->size : sizeof *src;
    const size_t type_copy = h->abi_minor < 1 ? offsetof(struct splash_format_type, repack_to)
                                              : sizeof(struct splash_format_type);
    const size_t n = src->types ? src->n_types : 0;
    struct splash_format_plugin *fp =
        calloc(1, sizeof *fp + n * (sizeof(struct splash_format_type *) +
                                    sizeof(struct splash_format_record)));
    if (!fp)
        return NULL;
    memcpy(fp, h, copy);
    if (n) {
        const struct splash_format_type **ptrs = (const struct splash_format_type **)(fp + 1);
        struct splash_format_record *recs = (struct splash_format_record *)(ptrs + n);
        for (size_t t = 0; t < n; t++) {
            if (src->types[t]) {
                memcpy(&recs[t].type, src->types[t], type_copy);
                if (h->abi_minor < 2 && legacy_linear(&recs[t].type))
                    recs[t].type.flags |= SPLASH_FORMAT_LINEAR;
                if (h->abi_minor < 5) /* a flag bit it could not mean */
                    recs[t].type.flags &= ~SPLASH_FORMAT_FINE_ACT;
            }
            ptrs[t] = src->types[t] ? &recs[t].type : NULL;
        }
        fp->types = ptrs;
    }
    return fp;
}

/* Binds every type's activation and repack formats by name, across all plugins (a
 * format's act_type may come from another plugin, registered before or after it). */
static void link_formats(struct splash_registry *r)
{
    for (size_t i = 0; i < r->n_formats; i++)
        for (uint32_t t = 0; t < r->formats[i]->n_types; t++) {
            const struct splash_format_type *ft = r->formats[i]->types[t];
            struct splash_format_record *rec = (struct splash_format_record *)ft;
            rec->links.act = ft->act_type && strcmp(ft->act_type, "F32") != 0
                                 ? splash_registry_format_by_name(r, ft->act_type)
                                 : NULL;
            rec->links.repack =
                ft->repack_to ? splash_registry_format_by_name(r, ft->repack_to) : NULL;
        }
}

static const struct splash_format_type *plugin_type_named(const struct splash_format_plugin *fp,
                                                          const char *name)
{
    for (uint32_t t = 0; t < fp->n_types; t++)
        if (fp->types[t] && fp->types[t]->name && strcmp(fp->types[t]->name, name) == 0)
            return fp->types[t];
    return NULL;
}

/* A repack names a repacked format of the same plugin whose rows have the same bytes. */
static enum splash_status check_repack(const struct splash_format_plugin *fp,
                                       const struct splash_format_type *ft, char *why,
                                       size_t why_size)
{
    if (ft->flags & SPLASH_FORMAT_REPACKED) {
        if (ft->row_group < 2 || ft->block_elems % ft->row_group) {
            snprintf(why, why_size, "format %s: a repacked format needs row_group >= 2",
                     ft->name);
            return SPLASH_ERR_INVALID;
        }
        return SPLASH_OK;
    }
    if (!ft->repack_to)
        return SPLASH_OK;
    const struct splash_format_type *to = plugin_type_named(fp, ft->repack_to);
    if (!ft->repack || !to || !(to->flags & SPLASH_FORMAT_REPACKED) ||
        (uint64_t)to->block_elems * ft->block_bytes !=
            (uint64_t)to->block_bytes * ft->block_elems ||
        to->block_elems / to->row_group % ft->block_elems) {
        snprintf(why, why_size,
                 "format %s: repack_to must name a repacked format of the plugin with the same "
                 "bytes per row, and repack must be set",
                 ft->name);
        return SPLASH_ERR_INVALID;
    }
    return SPLASH_OK;
}

static enum splash_status check_format_types(const struct splash_format_plugin *fp, char *why,
                                             size_t why_size)
{
    for (uint32_t t = 0; t < fp->n_types; t++) {
        const struct splash_format_type *ft = fp->types[t];
        if (!ft || !ft->name || !ft->block_elems || !ft->block_bytes || !ft->to_float ||
            !ft->validate) {
            snprintf(why, why_size, "format type %u is incomplete (name, block, to_float, validate)",
                     t);
            return SPLASH_ERR_INVALID;
        }
        if (ft->flags & SPLASH_FORMAT_ACTIVATION_ONLY)
            continue;
        if (check_repack(fp, ft, why, why_size) != SPLASH_OK)
            return SPLASH_ERR_INVALID;
        /* a repacked layout is read only through mul_rows */
        const int repacked = (ft->flags & SPLASH_FORMAT_REPACKED) != 0;
        if (!ft->rows || !ft->n_rows || ft->rows[ft->n_rows - 1].cpu_requires != 0 ||
            !(repacked ? ft->rows[ft->n_rows - 1].mul_rows != NULL
                       : ft->rows[ft->n_rows - 1].vec_dot != NULL)) {
            snprintf(why, why_size, "format %s: kernel rows must end in a scalar reference row",
                     ft->name);
            return SPLASH_ERR_INVALID;
        }
    }
    return SPLASH_OK;
}

enum splash_status splash_registry_add_entry(struct splash_registry *r, splash_plugin_entry_fn entry,
                                             const char *origin, struct splash_err *err)
{
    struct splash_plugin_record *rec = record_add(r, origin);
    if (!rec)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "plugin %s: out of memory", origin);
    const struct splash_plugin_header *h = entry(&r->host);
    if (!h)
        return refuse(r, rec, origin, SPLASH_ERR_UNSUPPORTED, err, "entry declined to register");
    if (h->abi_major != SPLASH_ABI_MAJOR || h->abi_minor > SPLASH_ABI_MINOR)
        return refuse(r, rec, origin, SPLASH_ERR_ABI, err, "ABI %u.%u, this splash speaks %d.%d",
                      h->abi_major, h->abi_minor, SPLASH_ABI_MAJOR, SPLASH_ABI_MINOR);
    if (h->kind != SPLASH_PLUGIN_FORMAT && h->kind != SPLASH_PLUGIN_FAMILY &&
        h->kind != SPLASH_PLUGIN_DRAFT)
        return refuse(r, rec, origin, SPLASH_ERR_INVALID, err, "unknown plugin kind %u", h->kind);
    size_t min = h->kind == SPLASH_PLUGIN_FORMAT   ? FORMAT_MIN_SIZE
                 : h->kind == SPLASH_PLUGIN_FAMILY ? FAMILY_MIN_SIZE
                                                   : DRAFT_MIN_SIZE;
    if (h->size < min)
        return refuse(r, rec, origin, SPLASH_ERR_ABI, err,
                      "descriptor of %u bytes, ABI %d.0 needs at least %zu", h->size,
                      SPLASH_ABI_MAJOR, min);
    if (!valid_name(h->name))
        return refuse(r, rec, origin, SPLASH_ERR_INVALID, err,
                      "invalid plugin name (lower-case letters, digits, _ and -)");
    const char *where;
    int duplicate = name_taken(r, h->name, &where); /* before rec carries the name */
    snprintf(rec->name, sizeof rec->name, "%s", h->name);
    snprintf(rec->version, sizeof rec->version, "%s", h->version ? h->version : "");
    rec->kind = h->kind;
    if (duplicate)
        return refuse(r, rec, origin, SPLASH_ERR_INVALID, err,
                      "duplicate plugin name \"%s\" (already loaded from %s)", h->name, where);

    char why[200];
    size_t copy;
    if (h->kind == SPLASH_PLUGIN_FORMAT) {
        struct splash_format_plugin *fp = copy_format_plugin(h);
        if (!fp)
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        if (check_format_types(fp, why, sizeof why) != SPLASH_OK) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_INVALID, err, "%s", why);
        }
        const char *other = NULL;
        const char *clash = format_type_clash(r, fp, &other);
        if (clash) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_INVALID, err,
                          "format %s is already provided by plugin %s", clash,
                          other ? other : "?");
        }
        /* every GGUF id first checked, then those GGML lacks claimed, so a refused plugin
         * claims none */
        struct splash_err gerr;
        for (int claim = 0; claim < 2; claim++)
            for (uint32_t t = 0; t < fp->n_types; t++) {
                const struct splash_format_type *ft = fp->types[t];
                enum splash_status st =
                    (claim ? splash_gguf_type_claim : splash_gguf_type_check)(
                        ft->gguf_type, ft->name, ft->block_elems, ft->block_bytes, &gerr);
                if (st) {
                    free(fp);
                    return refuse(r, rec, origin, st, err, "%s", gerr.msg);
                }
            }
        void *grown = realloc(r->formats, (r->n_formats + 1) * sizeof *r->formats);
        if (!grown) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        }
        r->formats = grown;
        r->formats[r->n_formats++] = fp;
        link_formats(r);
    } else if (h->kind == SPLASH_PLUGIN_DRAFT) {
        struct splash_draft_plugin *dp = calloc(1, sizeof *dp);
        if (!dp)
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        copy = h->size < sizeof *dp ? h->size : sizeof *dp;
        memcpy(dp, h, copy);
        if (!dp->architectures || !dp->check || !dp->create || !dp->destroy || !dp->info ||
            !dp->ctx_create || !dp->ctx_destroy || !dp->append_context || !dp->rollback ||
            !dp->propose) {
            free(dp);
            return refuse(r, rec, origin, SPLASH_ERR_INVALID, err,
                          "draft needs claims and every member of splash/draft.h");
        }
        void *grown = realloc(r->drafts, (r->n_drafts + 1) * sizeof *r->drafts);
        if (!grown) {
            free(dp);
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        }
        r->drafts = grown;
        r->drafts[r->n_drafts++] = dp;
    } else {
        struct splash_family_plugin *fp = calloc(1, sizeof *fp);
        if (!fp)
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        copy = h->size < sizeof *fp ? h->size : sizeof *fp;
        memcpy(fp, h, copy);
        if (!fp->check_config || !fp->declare_tensors ||
            (!fp->gguf_architectures && !fp->model_types)) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_INVALID, err,
                          "family needs claims, check_config and declare_tensors");
        }
        if (splash_family_presets_check(fp, why, sizeof why) != SPLASH_OK) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_INVALID, err, "%s", why);
        }
        void *grown = realloc(r->families, (r->n_families + 1) * sizeof *r->families);
        if (!grown) {
            free(fp);
            return refuse(r, rec, origin, SPLASH_ERR_NOMEM, err, "out of memory");
        }
        r->families = grown;
        r->families[r->n_families++] = fp;
    }
    return SPLASH_OK;
}

enum splash_status splash_registry_load_file(struct splash_registry *r, const char *path,
                                             struct splash_err *err)
{
    /* RTLD_LOCAL keeps one plugin's symbols from resolving another's */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        struct splash_plugin_record *rec = record_add(r, path);
        return refuse(r, rec, path, SPLASH_ERR_IO, err, "cannot load: %s", dlerror());
    }
    splash_plugin_entry_fn entry;
    void *sym = dlsym(handle, SPLASH_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!sym) {
        struct splash_plugin_record *rec = record_add(r, path);
        /* an entry of another major version tells the user what it is */
        const char *why = dlsym(handle, "splash_plugin_entry_v2") ? "not a v1 plugin (it exports splash_plugin_entry_v2)"
                                                                  : "no splash_plugin_entry_v1 symbol";
        dlclose(handle);
        return refuse(r, rec, path, SPLASH_ERR_ABI, err, "%s", why);
    }
    enum splash_status st = splash_registry_add_entry(r, entry, path, err);
    /* loaded plugins are never unloaded; a refused one has run only its entry */
    if (st != SPLASH_OK)
        dlclose(handle);
    return st;
}

static int plugin_file(const char *name)
{
    size_t n = strlen(name);
    if (strncmp(name, "libsplash-", 10) != 0)
        return 0;
    return (n > 3 && !strcmp(name + n - 3, ".so")) || (n > 6 && !strcmp(name + n - 6, ".dylib"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int already_loaded_name(const struct splash_registry *r, const char *file)
{
    /* libsplash-<kind>-<name>.so: a plugin of that name from an earlier directory wins */
    const char *dash = strchr(file + 10, '-');
    if (!dash)
        return 0;
    char name[64];
    snprintf(name, sizeof name, "%s", dash + 1);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = 0;
    for (size_t i = 0; i < r->n_records; i++)
        if (!r->records[i].refusal[0] && !strcmp(r->records[i].name, name))
            return 1;
    return 0;
}

void splash_registry_load_dir(struct splash_registry *r, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!plugin_file(e->d_name))
            continue;
        char **grown = realloc(names, (n + 1) * sizeof *names);
        if (!grown)
            break;
        names = grown;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (names[i] && !already_loaded_name(r, names[i])) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            struct splash_err err;
            if (splash_path_world_writable(path))
                refuse(r, record_add(r, path), path, SPLASH_ERR_UNSUPPORTED, &err,
                       "file is world-writable (chmod o-w it): not loaded");
            else
                splash_registry_load_file(r, path, &err);
        }
        free(names[i]);
    }
    free(names);
}

/* Loads dir unless an earlier step of the search already read the same directory. A
 * world-writable directory is refused: any user could plant a plugin there. */
static void load_dir_once(struct splash_registry *r, const char *dir, char (*seen)[PATH_MAX],
                          size_t *n_seen, size_t max_seen)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return;
    for (size_t i = 0; i < *n_seen; i++)
        if (!strcmp(seen[i], real))
            return;
    if (*n_seen < max_seen)
        snprintf(seen[(*n_seen)++], PATH_MAX, "%s", real);
    if (splash_path_world_writable(real)) {
        struct splash_plugin_record *rec = record_add(r, real);
        if (rec)
            snprintf(rec->refusal, sizeof rec->refusal,
                     "directory is world-writable (chmod o-w it): not searched");
        splash_log(SPLASH_LOG_WARN, NULL, "plugin directory %s is world-writable: not searched", real);
        return;
    }
    splash_registry_load_dir(r, real);
}

void splash_registry_load_default(struct splash_registry *r, const char *const *extra_dirs,
                                  size_t n_extra)
{
    enum { MAX_DIRS = 32 };
    char (*dirs)[PATH_MAX] = calloc(MAX_DIRS, PATH_MAX);
    char (*seen)[PATH_MAX] = calloc(MAX_DIRS, PATH_MAX);
    char exe[PATH_MAX];
    if (!dirs || !seen)
        goto out_free;
    size_t n = splash_plugin_search_dirs(splash_exe_path(exe, sizeof exe) == 0 ? exe : NULL,
                                         extra_dirs, n_extra, getenv("SPLASH_PLUGIN_PATH"), dirs,
                                         MAX_DIRS);
    size_t n_seen = 0;
    for (size_t i = 0; i < n; i++)
        load_dir_once(r, dirs[i], seen, &n_seen, MAX_DIRS);
out_free:
    free(seen);
    free(dirs);
}

void splash_registry_add_builtins(struct splash_registry *r, const splash_plugin_entry_fn *entries)
{
    for (size_t i = 0; entries && entries[i]; i++) {
        struct splash_err err;
        splash_registry_add_entry(r, entries[i], "builtin", &err);
    }
}

size_t splash_registry_n_records(const struct splash_registry *r)
{
    return r->n_records;
}

const struct splash_plugin_record *splash_registry_record(const struct splash_registry *r, size_t i)
{
    return i < r->n_records ? &r->records[i] : NULL;
}

size_t splash_registry_n_formats(const struct splash_registry *r)
{
    return r->n_formats;
}

const struct splash_format_plugin *splash_registry_format(const struct splash_registry *r, size_t i)
{
    return i < r->n_formats ? r->formats[i] : NULL;
}

size_t splash_registry_n_families(const struct splash_registry *r)
{
    return r->n_families;
}

const struct splash_family_plugin *splash_registry_family(const struct splash_registry *r, size_t i)
{
    return i < r->n_families ? r->families[i] : NULL;
}

size_t splash_registry_n_drafts(const struct splash_registry *r)
{
    return r->n_drafts;
}

const struct splash_draft_plugin *splash_registry_draft(const struct splash_registry *r, size_t i)
{
    return i < r->n_drafts ? r->drafts[i] : NULL;
}

const struct splash_format_type *splash_registry_format_by_gguf(const struct splash_registry *r,
                                                                int32_t gguf_type)
{
    if (gguf_type < 0)
        return NULL;
    for (size_t i = 0; i < r->n_formats; i++)
        for (uint32_t t = 0; t < r->formats[i]->n_types; t++)
            if (r->formats[i]->types[t]->gguf_type == gguf_type)
                return r->formats[i]->types[t];
    return NULL;
}

const struct splash_format_type *splash_registry_format_by_name(const struct splash_registry *r,
                                                                const char *name)
{
    for (size_t i = 0; i < r->n_formats; i++)
        for (uint32_t t = 0; t < r->formats[i]->n_types; t++)
            if (!strcmp(r->formats[i]->types[t]->name, name))
                return r->formats[i]->types[t];
    return NULL;
}

static struct splash_registry *global_registry;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    global_registry = splash_registry_create();
}

struct splash_registry *splash_registry_global(void)
{
    pthread_once(&global_once, global_init);
    return global_registry;
}
