/* model-check: family selection by claims, the family's config check, and the
 * tensor plan (presence, shape, type per role), on metadata only. */
#include "core/model_check.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checkpoint_rules.h"
#include "core/draft.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/safetensors.h"
#include "core/st_target.h"
#include "core/target.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- type rules (models.md "GGUF targets") ------------------------------ */

int splash_decl_accepts(uint32_t accept, const struct splash_format_type *f, int32_t dtype)
{
    /* the plain element types by their GGUF id; quantized means what the format says */
    static const struct {
        uint32_t bit;
        int32_t dtype;
    } plain[] = {
        {SPLASH_ACCEPT_F32, SPLASH_DTYPE_F32},
        {SPLASH_ACCEPT_F16, SPLASH_DTYPE_F16},
        {SPLASH_ACCEPT_BF16, SPLASH_DTYPE_BF16},
        {SPLASH_ACCEPT_Q8_0, SPLASH_DTYPE_Q8_0},
    };
    if ((accept & SPLASH_ACCEPT_QUANT) && f && (f->flags & SPLASH_FORMAT_LINEAR))
        return 1;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if ((accept & plain[i].bit) && dtype == plain[i].dtype)
            return 1;
    return 0;
}

/* ---- problem lists, grouped by tensor across layers ------------------------ */

struct problem {
    char kind[16];   /* "missing", "unsupported", "shape" */
    char name[96];   /* the name with "blk.N." removed */
    char detail[128]; /* type name, or the shapes */
    int32_t layers[512];
    int n_layers;
    int global;
};

struct problem_list {
    struct problem *items;
    size_t n, cap;
};

static void problem_add(struct problem_list *pl, const char *kind, const char *full_name,
                        int32_t layer, const char *detail)
{
    const char *name = full_name;
    if (layer >= 0 && !strncmp(full_name, "blk.", 4)) {
        const char *dot = strchr(full_name + 4, '.');
        if (dot)
            name = dot + 1;
    }
    for (size_t i = 0; i < pl->n; i++) {
        struct problem *p = &pl->items[i];
        if (!strcmp(p->kind, kind) && !strcmp(p->name, name) && !strcmp(p->detail, detail) &&
            !p->global == (layer >= 0)) {
            if (layer >= 0 && p->n_layers < 512)
                p->layers[p->n_layers++] = layer;
            return;
        }
    }
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? pl->cap * 2 : 8;
        void *grown = realloc(pl->items, cap * sizeof *pl->items);
        if (!grown)
            return;
        pl->items = grown;
        pl->cap = cap;
    }
    struct problem *p = &pl->items[pl->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    snprintf(p->name, sizeof p->name, "%s", layer >= 0 ? name : full_name);
    snprintf(p->detail, sizeof p->detail, "%s", detail);
    p->global = layer < 0;
    if (layer >= 0)
        p->layers[p->n_layers++] = layer;
}

/* Appends to a growing string. */
static void sb_add(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void sb_add(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (*buf && (size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        size_t cap2 = (*cap ? *cap : 256);
        while (cap2 < *len + (size_t)n + 1)
            cap2 *= 2;
        char *grown = realloc(*buf, cap2);
        if (!grown)
            return;
        *buf = grown;
        *cap = cap2;
    }
}

static void layer_ranges(char **buf, size_t *len, size_t *cap, const struct problem *p)
{
    sb_add(buf, len, cap, " in %d layer%s (", p->n_layers, p->n_layers == 1 ? "" : "s");
    for (int i = 0; i < p->n_layers;) {
        int j = i;
        while (j + 1 < p->n_layers && p->layers[j + 1] == p->layers[j] + 1)
            j++;
        if (j > i)
            sb_add(buf, len, cap, "%s%d-%d", i ? ", " : "", p->layers[i], p->layers[j]);
        else
            sb_add(buf, len, cap, "%s%d", i ? ", " : "", p->layers[i]);
        i = j + 1;
    }
    sb_add(buf, len, cap, ")");
}

static char *problems_text(const struct problem_list *pl)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    static const char *const kinds[] = {"missing", "unsupported", "shape"};
    static const char *const heads[] = {"missing tensors", "unsupported tensor types",
                                        "tensors of the wrong shape"};
    for (int k = 0; k < 3; k++) {
        int first = 1;
        for (size_t i = 0; i < pl->n; i++) {
            const struct problem *p = &pl->items[i];
            if (strcmp(p->kind, kinds[k]))
                continue;
            sb_add(&buf, &len, &cap, "%s%s", first ? (len ? "\n" : "") : "; ", first ? heads[k] : "");
            if (first)
                sb_add(&buf, &len, &cap, ": ");
            first = 0;
            sb_add(&buf, &len, &cap, "%s", p->name);
            if (p->detail[0])
                sb_add(&buf, &len, &cap, " (%s)", p->detail);
            if (!p->global)
                layer_ranges(&buf, &len, &cap, p);
        }
    }
    return buf;
}

/* ---- family selection ---------------------------------------------------- */

/* ---- the tensor plan ------------------------------------------------------ */

struct plan_ctx {
    const struct splash_meta *m;
    struct problem_list problems;
};

/* NAME.scale and NAME.input_scale (llama.cpp's NVFP4 files) stand beside a weight
 * NAME.weight whose format takes a per-tensor scale; beside any other weight, or alone,
 * they are refused before any download. */
static void check_tensor_scales(const struct splash_meta *m, struct problem_list *pl)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *name = m->tensors[i]->name;
        size_t n = strlen(name), k = 0;
        if (n > 12 && !strcmp(name + n - 12, ".input_scale"))
            k = 12;
        else if (n > 6 && !strcmp(name + n - 6, ".scale"))
            k = 6;
        if (!k || n - k + 8 > 160)
            continue;
        char weight[160];
        snprintf(weight, sizeof weight, "%.*s.weight", (int)(n - k), name);
        const struct splash_tensor_info *w = splash_meta_api_get()->tensor_find(m, weight);
        int32_t layer = -1;
        if (sscanf(name, "blk.%d.", &layer) != 1)
            layer = -1;
        if (!w)
            problem_add(pl, "unsupported", name, layer, "a scale without its weight");
        else if (!w->format || !(w->format->flags & SPLASH_FORMAT_TENSOR_SCALE)) {
            char detail[96];
            snprintf(detail, sizeof detail, "beside a %s weight (only NVFP4 takes one)",
                     w->type_name ? w->type_name : "?");
            problem_add(pl, "unsupported", name, layer, detail);
        }
    }
}

static void shape_str(char *buf, size_t size, int n_dims, const int64_t *ne)
{
    size_t used = 0;
    buf[0] = 0;
    for (int d = 0; d < n_dims && used < size; d++) {
        int n = snprintf(buf + used, size - used, "%s%lld", d ? "x" : "", (long long)ne[d]);
        if (n < 0)
            return;
        used += (size_t)n;
    }
}

int splash_decl_problem(const struct splash_tensor_decl *d, const struct splash_tensor_info *t,
                        int types, char *kind, size_t kind_size, char *detail,
                        size_t detail_size)
{
    const char *type = t->type_name ? t->type_name : "?";
    if (!t->format && t->dtype >= 0) {
        snprintf(kind, kind_size, "unsupported");
        snprintf(detail, detail_size, "%s, no format plugin loaded", type);
        return 1;
    }
    if (types && !splash_decl_accepts(d->accept, t->format, t->dtype)) {
        snprintf(kind, kind_size, "unsupported");
        snprintf(detail, detail_size, "%s", type);
        return 1;
    }
    int same = 1;
    for (int i = 0; i < 4; i++)
        same &= t->ne[i] == d->ne[i];
    if (!same) {
        char want[48], got[48];
        shape_str(want, sizeof want, d->n_dims, d->ne);
        shape_str(got, sizeof got, t->n_dims, t->ne);
        snprintf(kind, kind_size, "shape");
        snprintf(detail, detail_size, "%s, expected %s", got, want);
        return 1;
    }
    return 0;
}

static void check_decl(void *ctx, const struct splash_tensor_decl *d)
{
    struct plan_ctx *pc = ctx;
    if (d->flags & SPLASH_DECL_AGAIN)
        return; /* checked where the list first names it */
    const struct splash_tensor_info *t = splash_meta_api_get()->tensor_find(pc->m, d->name);
    if (!t) {
        if (!(d->flags & SPLASH_DECL_OPTIONAL))
            problem_add(&pc->problems, "missing", d->name, d->layer, "");
        return;
    }
    char kind[16], detail[128];
    if (splash_decl_problem(d, t, 1, kind, sizeof kind, detail, sizeof detail))
        problem_add(&pc->problems, kind, d->name, d->layer, detail);
}

/* Tensors per type, in the order the types first appear, and their bytes. */
static void loads_summary(const struct splash_meta *m, char *buf, size_t size)
{
    const char *types[16];
    size_t counts[16], n_types = 0, used = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *t = m->tensors[i]->type_name ? m->tensors[i]->type_name : "?";
        bytes += m->tensors[i]->n_bytes;
        size_t k = 0;
        while (k < n_types && strcmp(types[k], t))
            k++;
        if (k == n_types && n_types < 16) {
            types[n_types] = t;
            counts[n_types++] = 0;
        }
        if (k < n_types)
            counts[k]++;
    }
    buf[0] = 0;
    for (size_t k = 0; k < n_types && used < size; k++) {
        int n = snprintf(buf + used, size - used, "%s%zu %s", k ? ", " : "", counts[k], types[k]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size)
        snprintf(buf + used, size - used, " (%.1f MiB)", (double)bytes / (1024.0 * 1024.0));
}

enum splash_status splash_model_check_meta(const struct splash_registry *r,
                                           const struct splash_meta *m, unsigned flags,
                                           const struct splash_family_plugin **family,
                                           struct splash_check_result *res,
                                           struct splash_err *err)
{
    snprintf(res->file, sizeof res->file, "%s", base_name(m->path));
    enum splash_status st;
    res->n_tensors = m->n_tensors;
    if (m->source == SPLASH_META_GGUF && (flags & SPLASH_CHECK_REQUIRE_QUANTIZED) &&
        (st = splash_gguf_require_quantized(m, err)) != SPLASH_OK) {
        res->problems = strdup(err->msg);
        return st;
    }
    const struct splash_family_plugin *f;
    if ((st = splash_family_select(r, m, &f, &res->verdict, err))) {
        res->problems = strdup(err->msg);
        return st;
    }
    snprintf(res->family, sizeof res->family, "%s", f->header.name);
    if (family)
        *family = f;
    if (m->source != SPLASH_META_GGUF || m->n_tensors == 0) {
        res->ok = 1; /* a config alone: tensors are checked when they load */
        return SPLASH_OK;
    }
    struct plan_ctx pc = {.m = m};
    st = splash_family_declare_tensors(r, f, m, check_decl, &pc, err);
    if (st) {
        free(pc.problems.items);
        res->problems = strdup(err->msg);
        return st;
    }
    check_tensor_scales(m, &pc.problems);
    if (pc.problems.n) {
        res->problems = problems_text(&pc.problems);
        free(pc.problems.items);
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s", base_name(m->path),
                              res->problems ? res->problems : "tensor plan failed");
    }
    loads_summary(m, res->loads, sizeof res->loads);
    res->ok = 1;
    return SPLASH_OK;
}

/* Opens the target at path (a GGUF, a part, a config.json or a directory) as model-check
 * reads it: headers only, formats bound; *formats_checked when a safetensors checkpoint's
 * weights were opened as they load (their quantization held to its own rules). */
static enum splash_status open_target(const struct splash_registry *r, const char *path,
                                      struct splash_check_result *res, struct splash_meta **out,
                                      int *formats_checked, struct splash_err *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: no such file or directory", path);
    snprintf(res->file, sizeof res->file, "%s", base_name(path));
    enum splash_status st;
    char config[PATH_MAX + 16] = "";
    const char *gguf = NULL;
    struct splash_target target;
    size_t n = strlen(path);
    if (S_ISDIR(sb.st_mode)) {
        /* the legacy package format: refused, naming the MLX model to serve instead */
        char mlx[256];
        if (splash_checkpoint_is_package(path, mlx, sizeof mlx)) {
            st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                "%s is a Splash package, a format Splash no longer loads: serve the "
                                "MLX model %s instead",
                                base_name(path), mlx);
            res->problems = strdup(err->msg);
            return st;
        }
        if ((st = splash_target_select(path, NULL, &target, err)) != SPLASH_OK) {
            res->problems = strdup(err->msg);
            return st;
        }
        if (target.kind == SPLASH_TARGET_SAFETENSORS)
            snprintf(config, sizeof config, "%s/config.json", target.path);
        else
            gguf = target.path;
    } else if (n > 5 && !strcmp(path + n - 5, ".json")) {
        snprintf(config, sizeof config, "%s", path);
    } else {
        gguf = path;
    }
    struct splash_meta *m = NULL;
    int formats_bound = 0;
    char **shards = NULL;
    size_t n_shards = 0;
    if (gguf) {
        st = splash_meta_open_gguf(gguf, SPLASH_GGUF_HEADERS_ONLY, &m, err);
    } else if (S_ISDIR(sb.st_mode) &&
               splash_safetensors_list_shards(target.path, &shards, &n_shards, NULL) ==
                   SPLASH_OK) {
        /* the weights' headers: every tensor as it would load, against the family's list */
        free(shards);
        st = splash_st_target_open(r, target.path, SPLASH_ST_HEADERS_ONLY, &m, err);
        formats_bound = 1;
    } else {
        /* the quantization rules (and the index's tensor names) before the family */
        int kind = 0;
        st = splash_check_checkpoint(S_ISDIR(sb.st_mode) ? target.path : config, &kind, err);
        if (st == SPLASH_OK)
            st = splash_meta_open_config(config, &m, err);
    }
    if (st) {
        res->problems = strdup(err->msg);
        return st;
    }
    snprintf(res->file, sizeof res->file, "%s", base_name(m->path));
    if (!formats_bound)
        splash_meta_bind_formats(m, r);
    *formats_checked = formats_bound;
    *out = m;
    return SPLASH_OK;
}

enum splash_status splash_model_check(const struct splash_registry *r, const char *path,
                                      struct splash_check_result *res, struct splash_err *err)
{
    return splash_model_check_draft(r, path, NULL, res, err);
}

enum splash_status splash_model_check_draft(const struct splash_registry *r, const char *path,
                                            const char *draft_dir,
                                            struct splash_check_result *res,
                                            struct splash_err *err)
{
    return splash_model_check_draft_flags(r, path, draft_dir, 0, res, err);
}

/* The draft directory's meta: config.json and the weights' headers, or the config alone. */
static enum splash_status open_draft(const struct splash_registry *r, const char *dir,
                                     unsigned flags, struct splash_meta **out,
                                     struct splash_err *err)
{
    if (!(flags & SPLASH_CHECK_DRAFT_CONFIG_ONLY))
        return splash_draft_open(r, dir, SPLASH_SAFETENSORS_HEADERS_ONLY, out, err);
    char config[PATH_MAX];
    if ((size_t)snprintf(config, sizeof config, "%s/config.json", dir) >= sizeof config)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", dir);
    return splash_meta_open_config(config, out, err);
}

enum splash_status splash_model_check_draft_flags(const struct splash_registry *r,
                                                  const char *path, const char *draft_dir,
                                                  unsigned flags, struct splash_check_result *res,
                                                  struct splash_err *err)
{
    memset(res, 0, sizeof *res);
    struct splash_meta *m = NULL;
    int formats_bound = 0;
    enum splash_status st = open_target(r, path, res, &m, &formats_bound, err);
    if (st)
        return st;
    /* a checkpoint's quantization was held to its own rules (splash_check_checkpoint) */
    st = splash_model_check_meta(r, m, formats_bound ? 0 : SPLASH_CHECK_REQUIRE_QUANTIZED, NULL,
                                 res, err);
    if (st == SPLASH_OK && draft_dir) {
        /* the draft against the target it would serve with (models.md "Drafts") */
        struct splash_meta *d = NULL;
        const struct splash_draft_plugin *dp = NULL;
        res->draft_checked = 1;
        snprintf(res->draft_file, sizeof res->draft_file, "%s", base_name(draft_dir));
        st = open_draft(r, draft_dir, flags, &d, err);
        if (!st)
            st = splash_draft_select(r, d, m, &dp, &res->draft_verdict, err);
        if (!st)
            snprintf(res->draft_plugin, sizeof res->draft_plugin, "%s", dp->header.name);
        splash_meta_close(d);
        if (st) {
            res->ok = 0;
            free(res->problems);
            res->problems = NULL;
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            splash_err_set(err, st, "draft %s: %s", res->draft_file, msg);
            res->problems = strdup(err->msg);
        }
    }
    splash_meta_close(m);
    return st;
}

void splash_check_result_free(struct splash_check_result *res)
{
    free(res->problems);
    res->problems = NULL;
}
