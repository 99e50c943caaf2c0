/* splash_meta_api over GGUF metadata or config.json, and the tensor index. */
#include "core/meta.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/registry.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- tensor index ---------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int rebuild_index(struct splash_meta *m)
{
    size_t slots = 16;
    while (slots < m->n_tensors * 2)
        slots *= 2;
    size_t *idx = malloc(slots * sizeof *idx);
    if (!idx)
        return -1;
    for (size_t i = 0; i < slots; i++)
        idx[i] = SIZE_MAX;
    for (size_t i = 0; i < m->n_tensors; i++) {
        size_t s = hash_str(m->tensors[i]->name) & (slots - 1);
        while (idx[s] != SIZE_MAX)
            s = (s + 1) & (slots - 1);
        idx[s] = i;
    }
    free(m->index);
    m->index = idx;
    m->n_index = slots;
    return 0;
}

static const struct splash_tensor_info *find_tensor(const struct splash_meta *m, const char *name)
{
    if (!m->n_index)
        return NULL;
    size_t s = hash_str(name) & (m->n_index - 1);
    while (m->index[s] != SIZE_MAX) {
        const struct splash_tensor_info *t = m->tensors[m->index[s]];
        if (!strcmp(t->name, name))
            return t;
        s = (s + 1) & (m->n_index - 1);
    }
    return NULL;
}

enum splash_status splash_meta_add_tensor(struct splash_meta *m, struct splash_tensor_info *t,
                                          struct splash_err *err)
{
    if (find_tensor(m, t->name))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s appears twice",
                              base_name(m->path), t->name);
    if (m->n_tensors == m->cap_tensors) {
        size_t cap = m->cap_tensors ? m->cap_tensors * 2 : 256;
        void *grown = realloc(m->tensors, cap * sizeof *m->tensors);
        if (!grown)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        m->tensors = grown;
        m->cap_tensors = cap;
    }
    m->tensors[m->n_tensors++] = t;
    if (m->n_tensors * 2 > m->n_index)
        return rebuild_index(m) == 0 ? SPLASH_OK : splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    size_t s = hash_str(t->name) & (m->n_index - 1);
    while (m->index[s] != SIZE_MAX)
        s = (s + 1) & (m->n_index - 1);
    m->index[s] = m->n_tensors - 1;
    return SPLASH_OK;
}

void splash_meta_bind_formats(struct splash_meta *m, const struct splash_registry *r)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        struct splash_tensor_info *t = m->tensors[i];
        t->format = t->dtype >= 0 ? splash_registry_format_by_gguf(r, t->dtype) : NULL;
    }
}

/* ---- opening ----------------------------------------------------------- */

int splash_gguf_split_name(const char *file, size_t *prefix_len, int *k, int *n)
{
    size_t len = strlen(file);
    /* -00001-of-00005.gguf is 20 characters */
    if (len <= 20 || strcmp(file + len - 5, ".gguf") != 0)
        return 0;
    const char *p = file + len - 20;
    if (p[0] != '-' || strncmp(p + 6, "-of-", 4) != 0)
        return 0;
    int kv = 0, nv = 0;
    for (int i = 1; i <= 5; i++) {
        if (p[i] < '0' || p[i] > '9' || p[i + 9] < '0' || p[i + 9] > '9')
            return 0;
        kv = kv * 10 + (p[i] - '0');
        nv = nv * 10 + (p[i + 9] - '0');
    }
    if (kv < 1 || nv < 1 || kv > nv)
        return 0;
    *prefix_len = (size_t)(p - file);
    *k = kv;
    *n = nv;
    return 1;
}

static struct splash_meta *meta_new(int source, const char *path)
{
    struct splash_meta *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->source = source;
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return NULL;
    }
    return m;
}

static int is_int(uint32_t t);

static enum splash_status check_split_keys(struct splash_meta *m, int n_parts,
                                           struct splash_err *err)
{
    const struct splash_gguf *first = m->parts[0];
    const struct splash_gguf_kv *count = splash_gguf_find_kv(first, "split.count");
    const struct splash_gguf_kv *tcount = splash_gguf_find_kv(first, "split.tensors.count");
    if (!count)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: split.count is missing",
                              base_name(first->path));
    if (!is_int(count->type) || (tcount && !is_int(tcount->type)))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: split.count and split.tensors.count "
                              "must be integers", base_name(first->path));
    /* each part says which it is */
    for (size_t i = 0; i < m->n_parts; i++) {
        const struct splash_gguf_kv *no = splash_gguf_find_kv(m->parts[i], "split.no");
        if (no && (!is_int(no->type) || no->v.u64 != i))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: split.no says part %llu, the name "
                                  "says part %zu", base_name(m->parts[i]->path),
                                  (unsigned long long)no->v.u64 + 1, i + 1);
    }
    if ((int64_t)count->v.u64 != n_parts)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: split.count is %llu, the name says %d parts",
                              base_name(first->path), (unsigned long long)count->v.u64, n_parts);
    size_t total = 0;
    for (size_t i = 0; i < m->n_parts; i++)
        total += m->parts[i]->n_tensors;
    if (tcount && tcount->v.u64 != total)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: split.tensors.count is %llu, the parts hold %zu tensors",
                              base_name(first->path), (unsigned long long)tcount->v.u64, total);
    return SPLASH_OK;
}

enum splash_status splash_meta_open_gguf(const char *path, unsigned flags, struct splash_meta **out,
                                         struct splash_err *err)
{
    const char *file = base_name(path);
    size_t prefix_len;
    int k, n;
    int split = splash_gguf_split_name(file, &prefix_len, &k, &n);
    struct splash_meta *m = meta_new(SPLASH_META_GGUF, path);
    if (!m)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = SPLASH_OK;
    int n_parts = split ? n : 1;
    m->parts = calloc((size_t)n_parts, sizeof *m->parts);
    if (!m->parts) {
        splash_meta_close(m);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_parts; i++) {
        char part[PATH_MAX];
        if (split) {
            size_t dir_len = (size_t)(file - path);
            snprintf(part, sizeof part, "%.*s%.*s-%05d-of-%05d.gguf", (int)dir_len, path,
                     (int)prefix_len, file, i + 1, n);
        } else {
            snprintf(part, sizeof part, "%s", path);
        }
        st = splash_gguf_open(part, flags, &m->parts[i], err);
        if (st == SPLASH_ERR_IO && split)
            st = splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: split part %d of %d is missing",
                                base_name(part), i + 1, n);
        if (st)
            goto out_close;
        m->n_parts = (size_t)i + 1;
    }
    if (split && (st = check_split_keys(m, n, err)))
        goto out_close;
    if (split) {
        free(m->path);
        m->path = strdup(m->parts[0]->path);
    }
    for (size_t p = 0; p < m->n_parts; p++)
        for (size_t i = 0; i < m->parts[p]->n_tensors; i++)
            if ((st = splash_meta_add_tensor(m, &m->parts[p]->tensors[i].info, err)))
                goto out_close;
    *out = m;
    return SPLASH_OK;
out_close:
    splash_meta_close(m);
    return st;
}

enum splash_status splash_meta_from_gguf(struct splash_gguf *g, const char *path,
                                         struct splash_meta **out, struct splash_err *err)
{
    struct splash_meta *m = meta_new(SPLASH_META_GGUF, path);
    if (m)
        m->parts = calloc(1, sizeof *m->parts);
    if (!m || !m->parts) {
        splash_meta_close(m);
        splash_gguf_close(g);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    m->parts[0] = g;
    m->n_parts = 1;
    for (size_t i = 0; i < g->n_tensors; i++) {
        enum splash_status st = splash_meta_add_tensor(m, &g->tensors[i].info, err);
        if (st) {
            splash_meta_close(m);
            return st;
        }
    }
    *out = m;
    return SPLASH_OK;
}

enum splash_status splash_meta_open_config(const char *config_path, struct splash_meta **out,
                                           struct splash_err *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(config_path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: line %d: %s", config_path, jerr.line,
                              jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not a JSON object", config_path);
    }
    struct splash_meta *m = meta_new(SPLASH_META_CONFIG, config_path);
    if (!m) {
        json_decref(root);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    m->config = root;
    *out = m;
    return SPLASH_OK;
}

void splash_meta_close(struct splash_meta *m)
{
    if (!m)
        return;
    if (m->owner_free)
        m->owner_free(m->owner_data);
    for (size_t i = 0; i < m->n_parts; i++)
        splash_gguf_close(m->parts[i]);
    free(m->parts);
    if (m->config)
        json_decref(m->config);
    free(m->tensors);
    free(m->index);
    free(m->path);
    free(m);
}

int splash_meta_tensor_deferred(const struct splash_meta *m, const struct splash_tensor_info *t)
{
    return !t->data && m->deferred && m->deferred(m->owner_data, t);
}

enum splash_status splash_meta_tensor_realize(const struct splash_meta *m,
                                              const struct splash_tensor_info *t,
                                              struct splash_err *err)
{
    if (!splash_meta_tensor_deferred(m, t))
        return SPLASH_OK;
    return m->realize(m->owner_data, t, err);
}

/* ---- getters ------------------------------------------------------------ */

static int api_source(const struct splash_meta *m)
{
    return m->source;
}

static const char *api_path(const struct splash_meta *m)
{
    return m->path;
}

static const struct splash_gguf_kv *gguf_kv(const struct splash_meta *m, const char *key)
{
    return m->n_parts ? splash_gguf_find_kv(m->parts[0], key) : NULL;
}

/* Dotted path into config.json: "text_config.hidden_size". */
static json_t *config_get(const struct splash_meta *m, const char *key)
{
    json_t *node = m->config;
    char part[128];
    const char *p = key;
    while (node && *p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof part)
            return NULL;
        memcpy(part, p, len);
        part[len] = 0;
        node = json_is_object(node) ? json_object_get(node, part) : NULL;
        p = dot ? dot + 1 : p + len;
    }
    return node;
}

static int api_has(const struct splash_meta *m, const char *key)
{
    return m->source == SPLASH_META_GGUF ? gguf_kv(m, key) != NULL : config_get(m, key) != NULL;
}

static enum splash_status missing(const struct splash_meta *m, const char *key,
                                  struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: %s is missing", base_name(m->path), key);
}

static enum splash_status wrong_type(const struct splash_meta *m, const char *key, const char *want,
                                     struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s must be %s", base_name(m->path), key,
                          want);
}

static int is_signed(uint32_t t)
{
    return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

static int is_int(uint32_t t)
{
    return t == GGUF_U8 || t == GGUF_U16 || t == GGUF_U32 || t == GGUF_U64 || is_signed(t) ||
           t == GGUF_BOOL;
}

static enum splash_status api_get_i64(const struct splash_meta *m, const char *key, int64_t *out,
                                      struct splash_err *err)
{
    if (m->source == SPLASH_META_GGUF) {
        const struct splash_gguf_kv *kv = gguf_kv(m, key);
        if (!kv)
            return missing(m, key, err);
        if (!is_int(kv->type) || (kv->type == GGUF_U64 && kv->v.u64 > INT64_MAX))
            return wrong_type(m, key, "an integer", err);
        *out = is_signed(kv->type) ? kv->v.i64 : (int64_t)kv->v.u64;
        return SPLASH_OK;
    }
    json_t *v = config_get(m, key);
    if (!v)
        return missing(m, key, err);
    if (!json_is_integer(v))
        return wrong_type(m, key, "an integer", err);
    *out = json_integer_value(v);
    return SPLASH_OK;
}

static enum splash_status api_get_f64(const struct splash_meta *m, const char *key, double *out,
                                      struct splash_err *err)
{
    if (m->source == SPLASH_META_GGUF) {
        const struct splash_gguf_kv *kv = gguf_kv(m, key);
        if (!kv)
            return missing(m, key, err);
        if (kv->type == GGUF_F32 || kv->type == GGUF_F64)
            *out = kv->v.f64;
        else if (is_int(kv->type))
            *out = is_signed(kv->type) ? (double)kv->v.i64 : (double)kv->v.u64;
        else
            return wrong_type(m, key, "a number", err);
        return SPLASH_OK;
    }
    json_t *v = config_get(m, key);
    if (!v)
        return missing(m, key, err);
    if (!json_is_number(v))
        return wrong_type(m, key, "a number", err);
    *out = json_number_value(v);
    return SPLASH_OK;
}

static enum splash_status api_get_bool(const struct splash_meta *m, const char *key, int *out,
                                       struct splash_err *err)
{
    if (m->source == SPLASH_META_GGUF) {
        const struct splash_gguf_kv *kv = gguf_kv(m, key);
        if (!kv)
            return missing(m, key, err);
        if (kv->type != GGUF_BOOL)
            return wrong_type(m, key, "a boolean", err);
        *out = kv->v.u64 != 0;
        return SPLASH_OK;
    }
    json_t *v = config_get(m, key);
    if (!v)
        return missing(m, key, err);
    if (!json_is_boolean(v))
        return wrong_type(m, key, "a boolean", err);
    *out = json_is_true(v);
    return SPLASH_OK;
}

static enum splash_status api_get_str(const struct splash_meta *m, const char *key,
                                      const char **out, struct splash_err *err)
{
    if (m->source == SPLASH_META_GGUF) {
        const struct splash_gguf_kv *kv = gguf_kv(m, key);
        if (!kv)
            return missing(m, key, err);
        if (kv->type != GGUF_STRING)
            return wrong_type(m, key, "a string", err);
        *out = kv->v.str;
        return SPLASH_OK;
    }
    json_t *v = config_get(m, key);
    if (!v)
        return missing(m, key, err);
    if (!json_is_string(v))
        return wrong_type(m, key, "a string", err);
    *out = json_string_value(v);
    return SPLASH_OK;
}

static enum splash_status gguf_array(const struct splash_meta *m, const char *key,
                                     const struct splash_gguf_kv **out, struct splash_err *err)
{
    const struct splash_gguf_kv *kv = gguf_kv(m, key);
    if (!kv)
        return missing(m, key, err);
    if (kv->type != GGUF_ARRAY)
        return wrong_type(m, key, "an array", err);
    *out = kv;
    return SPLASH_OK;
}

static enum splash_status api_arr_len(const struct splash_meta *m, const char *key, size_t *out,
                                      struct splash_err *err)
{
    if (m->source == SPLASH_META_GGUF) {
        const struct splash_gguf_kv *kv;
        enum splash_status st = gguf_array(m, key, &kv, err);
        if (!st)
            *out = (size_t)kv->n;
        return st;
    }
    json_t *v = config_get(m, key);
    if (!v)
        return missing(m, key, err);
    if (!json_is_array(v))
        return wrong_type(m, key, "an array", err);
    *out = json_array_size(v);
    return SPLASH_OK;
}

static enum splash_status out_of_range(const struct splash_meta *m, const char *key, size_t i,
                                       struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s[%zu] is out of range", base_name(m->path),
                          key, i);
}

static enum splash_status gguf_elem(const struct splash_meta *m, const char *key, size_t i,
                                    struct splash_gguf_kv *elem, struct splash_err *err)
{
    const struct splash_gguf_kv *kv;
    enum splash_status st = gguf_array(m, key, &kv, err);
    if (st)
        return st;
    if (i >= kv->n)
        return out_of_range(m, key, i, err);
    memset(elem, 0, sizeof *elem);
    elem->type = kv->arr_type;
    if (kv->arr_type == GGUF_STRING) {
        elem->v.str = ((char **)kv->arr)[i];
        return SPLASH_OK;
    }
    uint64_t sz = kv->arr_type == GGUF_U8 || kv->arr_type == GGUF_I8 || kv->arr_type == GGUF_BOOL ? 1
                  : kv->arr_type == GGUF_U16 || kv->arr_type == GGUF_I16                        ? 2
                  : kv->arr_type == GGUF_U32 || kv->arr_type == GGUF_I32 || kv->arr_type == GGUF_F32
                      ? 4
                      : 8;
    const uint8_t *p = (const uint8_t *)kv->arr + i * sz;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } u;
    memcpy(&u, p, sz);
    switch (kv->arr_type) {
    case GGUF_U8: case GGUF_BOOL: elem->v.u64 = u.u8; break;
    case GGUF_I8: elem->v.i64 = u.i8; break;
    case GGUF_U16: elem->v.u64 = u.u16; break;
    case GGUF_I16: elem->v.i64 = u.i16; break;
    case GGUF_U32: elem->v.u64 = u.u32; break;
    case GGUF_I32: elem->v.i64 = u.i32; break;
    case GGUF_F32: elem->v.f64 = u.f32; break;
    case GGUF_U64: elem->v.u64 = u.u64; break;
    case GGUF_I64: elem->v.i64 = u.i64; break;
    case GGUF_F64: elem->v.f64 = u.f64; break;
    }
    return SPLASH_OK;
}

static json_t *config_elem(const struct splash_meta *m, const char *key, size_t i,
                           enum splash_status *st, struct splash_err *err)
{
    json_t *v = config_get(m, key);
    if (!v) {
        *st = missing(m, key, err);
        return NULL;
    }
    if (!json_is_array(v)) {
        *st = wrong_type(m, key, "an array", err);
        return NULL;
    }
    if (i >= json_array_size(v)) {
        *st = out_of_range(m, key, i, err);
        return NULL;
    }
    *st = SPLASH_OK;
    return json_array_get(v, i);
}

static enum splash_status api_arr_i64(const struct splash_meta *m, const char *key, size_t i,
                                      int64_t *out, struct splash_err *err)
{
    enum splash_status st;
    if (m->source == SPLASH_META_GGUF) {
        struct splash_gguf_kv e;
        if ((st = gguf_elem(m, key, i, &e, err)))
            return st;
        if (!is_int(e.type))
            return wrong_type(m, key, "an integer array", err);
        *out = is_signed(e.type) ? e.v.i64 : (int64_t)e.v.u64;
        return SPLASH_OK;
    }
    json_t *v = config_elem(m, key, i, &st, err);
    if (!v)
        return st;
    if (!json_is_integer(v))
        return wrong_type(m, key, "an integer array", err);
    *out = json_integer_value(v);
    return SPLASH_OK;
}

static enum splash_status api_arr_f64(const struct splash_meta *m, const char *key, size_t i,
                                      double *out, struct splash_err *err)
{
    enum splash_status st;
    if (m->source == SPLASH_META_GGUF) {
        struct splash_gguf_kv e;
        if ((st = gguf_elem(m, key, i, &e, err)))
            return st;
        if (e.type == GGUF_F32 || e.type == GGUF_F64)
            *out = e.v.f64;
        else if (is_int(e.type))
            *out = is_signed(e.type) ? (double)e.v.i64 : (double)e.v.u64;
        else
            return wrong_type(m, key, "a number array", err);
        return SPLASH_OK;
    }
    json_t *v = config_elem(m, key, i, &st, err);
    if (!v)
        return st;
    if (!json_is_number(v))
        return wrong_type(m, key, "a number array", err);
    *out = json_number_value(v);
    return SPLASH_OK;
}

static enum splash_status api_arr_str(const struct splash_meta *m, const char *key, size_t i,
                                      const char **out, struct splash_err *err)
{
    enum splash_status st;
    if (m->source == SPLASH_META_GGUF) {
        struct splash_gguf_kv e;
        if ((st = gguf_elem(m, key, i, &e, err)))
            return st;
        if (e.type != GGUF_STRING)
            return wrong_type(m, key, "a string array", err);
        *out = e.v.str;
        return SPLASH_OK;
    }
    json_t *v = config_elem(m, key, i, &st, err);
    if (!v)
        return st;
    if (!json_is_string(v))
        return wrong_type(m, key, "a string array", err);
    *out = json_string_value(v);
    return SPLASH_OK;
}

static size_t api_n_tensors(const struct splash_meta *m)
{
    return m->n_tensors;
}

static const struct splash_tensor_info *api_tensor_at(const struct splash_meta *m, size_t i)
{
    return i < m->n_tensors ? m->tensors[i] : NULL;
}

static const struct splash_meta_api meta_api = {
    .source = api_source,
    .path = api_path,
    .has = api_has,
    .get_i64 = api_get_i64,
    .get_f64 = api_get_f64,
    .get_bool = api_get_bool,
    .get_str = api_get_str,
    .arr_len = api_arr_len,
    .arr_i64 = api_arr_i64,
    .arr_f64 = api_arr_f64,
    .arr_str = api_arr_str,
    .n_tensors = api_n_tensors,
    .tensor_at = api_tensor_at,
    .tensor_find = find_tensor,
    .size = sizeof(struct splash_meta_api),
};

const struct splash_meta_api *splash_meta_api_get(void)
{
    return &meta_api;
}
