/* safetensors reader. The header is bounded before jansson sees it; every shape
 * product and offset is overflow-checked, and the tensors must tile the data
 * section exactly, as the format requires of a file with no holes. */
#include "core/safetensors.h"

#include "core/checkpoint_rules.h"
#include "core/file_map.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/meta.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
    const char *name;
    int32_t dtype;
    uint32_t size;
} st_dtypes[] = {
    {"F64", SPLASH_DTYPE_ST_F64, 8},   {"F32", SPLASH_DTYPE_F32, 4},
    {"F16", SPLASH_DTYPE_F16, 2},      {"BF16", SPLASH_DTYPE_BF16, 2},
    {"I64", SPLASH_DTYPE_ST_I64, 8},   {"I32", SPLASH_DTYPE_ST_I32, 4},
    {"I16", SPLASH_DTYPE_ST_I16, 2},   {"I8", SPLASH_DTYPE_ST_I8, 1},
    {"U8", SPLASH_DTYPE_ST_U8, 1},     {"U16", SPLASH_DTYPE_ST_U16, 2},
    {"U32", SPLASH_DTYPE_ST_U32, 4},   {"U64", SPLASH_DTYPE_ST_U64, 8},
    {"BOOL", SPLASH_DTYPE_ST_BOOL, 1}, {"F8_E4M3", SPLASH_DTYPE_ST_F8_E4M3, 1},
    {"F8_E5M2", SPLASH_DTYPE_ST_F8_E5M2, 1},
};

int splash_safetensors_dtype(const char *s, int32_t *dtype, uint32_t *elem_size,
                             const char **name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
        if (strcmp(st_dtypes[i].name, s) != 0)
            continue;
        if (dtype)
            *dtype = st_dtypes[i].dtype;
        if (elem_size)
            *elem_size = st_dtypes[i].size;
        if (name)
            *name = st_dtypes[i].name;
        return 1;
    }
    return 0;
}

/* ---- one file ------------------------------------------------------------- */

void splash_safetensors_close(struct splash_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_tensors; i++)
        free((char *)st->tensors[i].info.name);
    free(st->tensors);
    if (st->metadata)
        json_decref(st->metadata);
    if (st->map)
        splash_file_unmap(st->map, st->map_size);
    free(st->path);
    free(st);
}

/* A JSON integer in [0, INT64_MAX]. */
static int get_count(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static enum splash_status parse_tensor(const char *file, const char *name, json_t *desc,
                                       struct splash_safetensors_tensor *t,
                                       struct splash_err *err)
{
    if (!json_is_object(desc))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: not an object", file, name);
    json_t *dtype = json_object_get(desc, "dtype");
    json_t *shape = json_object_get(desc, "shape");
    json_t *offsets = json_object_get(desc, "data_offsets");
    if (!json_is_string(dtype))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: dtype must be a string", file,
                              name);
    uint32_t esize;
    if (!splash_safetensors_dtype(json_string_value(dtype), &t->info.dtype, &esize,
                                  &t->info.type_name))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: dtype %.32s is not supported",
                              file, name, json_string_value(dtype));
    if (!json_is_array(shape))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: shape must be an array", file,
                              name);
    size_t rank = json_array_size(shape);
    if (rank > SPLASH_SAFETENSORS_MAX_DIMS)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %zu dimensions (at most %d)",
                              file, name, rank, SPLASH_SAFETENSORS_MAX_DIMS);
    uint64_t elems = 1;
    for (size_t d = 0; d < rank; d++) {
        uint64_t n;
        if (!get_count(json_array_get(shape, d), &n))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s: shape[%zu] must be a non-negative integer", file, name,
                                  d);
        if (__builtin_mul_overflow(elems, n, &elems) || elems > (uint64_t)INT64_MAX)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: shape overflows", file, name);
        t->shape[d] = (int64_t)n;
    }
    uint64_t n_bytes;
    if (__builtin_mul_overflow(elems, (uint64_t)esize, &n_bytes))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: shape overflows", file, name);
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
        !get_count(json_array_get(offsets, 0), &t->begin) ||
        !get_count(json_array_get(offsets, 1), &t->end) || t->end < t->begin)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s: data_offsets must be [begin, end] with 0 <= begin <= end",
                              file, name);
    if (t->end - t->begin != n_bytes)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s: data_offsets [%llu, %llu] hold %llu bytes, its shape "
                              "and dtype %llu",
                              file, name, (unsigned long long)t->begin,
                              (unsigned long long)t->end,
                              (unsigned long long)(t->end - t->begin),
                              (unsigned long long)n_bytes);
    /* ne[0] is the fastest dimension (the last stored); ranks above 4 fold into ne[3] */
    t->rank = (int32_t)rank;
    t->info.n_dims = rank > 4 ? 4 : (int32_t)rank;
    for (int d = 0; d < 4; d++)
        t->info.ne[d] = 1;
    for (size_t d = 0; d < rank; d++) {
        size_t from_fast = rank - 1 - d;
        size_t slot = from_fast < 3 ? from_fast : 3;
        t->info.ne[slot] *= t->shape[d];
    }
    t->info.n_bytes = n_bytes;
    return SPLASH_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct splash_safetensors_tensor *x = *(const struct splash_safetensors_tensor *const *)a;
    const struct splash_safetensors_tensor *y = *(const struct splash_safetensors_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The tensors must tile [0, data_size) without gaps or overlaps. */
static enum splash_status check_tiling(struct splash_safetensors *st, const char *file,
                                       int know_size, uint64_t file_data, struct splash_err *err)
{
    enum splash_status status = SPLASH_OK;
    if (!st->n_tensors) {
        st->data_size = 0;
    } else {
        struct splash_safetensors_tensor **order = malloc(st->n_tensors * sizeof *order);
        if (!order)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", file);
        for (size_t i = 0; i < st->n_tensors; i++)
            order[i] = &st->tensors[i];
        qsort(order, st->n_tensors, sizeof *order, cmp_by_offset);
        uint64_t pos = 0;
        for (size_t i = 0; i < st->n_tensors; i++) {
            const struct splash_safetensors_tensor *t = order[i];
            if (t->begin != pos) {
                status = splash_err_set(err, SPLASH_ERR_INVALID,
                                        "%s: %s: data_offsets [%llu, %llu] %s the previous "
                                        "tensor's end (%llu)",
                                        file, t->info.name, (unsigned long long)t->begin,
                                        (unsigned long long)t->end,
                                        t->begin < pos ? "overlap" : "leave a gap after",
                                        (unsigned long long)pos);
                break;
            }
            pos = t->end;
        }
        free(order);
        if (status)
            return status;
        st->data_size = pos;
    }
    if (know_size && st->data_size != file_data)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: the tensors cover %llu bytes of a %llu-byte data section", file,
                              (unsigned long long)st->data_size, (unsigned long long)file_data);
    return SPLASH_OK;
}

static enum splash_status parse(struct splash_safetensors *st, const uint8_t *buf, uint64_t size,
                                unsigned flags, struct splash_err *err)
{
    const char *file = base_name(st->path);
    enum splash_status status = SPLASH_OK;
    if (size < 8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %llu bytes is too small for a safetensors header", file,
                              (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | buf[i];
    if (n > SPLASH_SAFETENSORS_MAX_HEADER)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: header of %llu bytes exceeds the 100 MB limit", file,
                              (unsigned long long)n);
    if (n > size - 8)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: header of %llu bytes runs past the end of the file (%llu bytes)",
                              file, (unsigned long long)n, (unsigned long long)size);
    if (n < 2 || buf[8] != '{')
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: header does not start with '{'", file);
    st->header_size = n;
    st->data_offset = 8 + n;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: header: line %d column %d: %s", file,
                              jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: header is not a JSON object", file);
        goto out_root;
    }
    size_t cap = json_object_size(root);
    st->tensors = calloc(cap ? cap : 1, sizeof *st->tensors);
    if (!st->tensors) {
        status = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", file);
        goto out_root;
    }
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(value)) {
                status = splash_err_set(err, SPLASH_ERR_INVALID,
                                        "%s: __metadata__ must be an object", file);
                goto out_root;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(value, mk, mv) {
                if (!json_is_string(mv)) {
                    status = splash_err_set(err, SPLASH_ERR_INVALID,
                                            "%s: __metadata__.%.64s must be a string", file, mk);
                    goto out_root;
                }
            }
            st->metadata = json_incref(value);
            continue;
        }
        if (!*key) {
            status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: a tensor has an empty name",
                                    file);
            goto out_root;
        }
        struct splash_safetensors_tensor *t = &st->tensors[st->n_tensors];
        if (!(t->info.name = strdup(key))) {
            status = splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", file);
            goto out_root;
        }
        st->n_tensors++;
        if ((status = parse_tensor(file, key, value, t, err)))
            goto out_root;
    }
    int know_size = !(flags & SPLASH_SAFETENSORS_HEADERS_ONLY);
    if ((status = check_tiling(st, file, know_size, size - st->data_offset, err)))
        goto out_root;
    if (know_size)
        for (size_t i = 0; i < st->n_tensors; i++)
            st->tensors[i].info.data = buf + st->data_offset + st->tensors[i].begin;
out_root:
    json_decref(root);
    return status;
}

enum splash_status splash_safetensors_parse_buffer(const void *buf, size_t size, const char *name,
                                                   unsigned flags,
                                                   struct splash_safetensors **out,
                                                   struct splash_err *err)
{
    struct splash_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(name))) {
        free(st);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", name);
    }
    enum splash_status status = parse(st, buf, size, flags, err);
    if (status) {
        splash_safetensors_close(st);
        return status;
    }
    *out = st;
    return SPLASH_OK;
}

enum splash_status splash_safetensors_open(const char *path, unsigned flags,
                                           struct splash_safetensors **out,
                                           struct splash_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return splash_err_set(err, errno == ENOENT ? SPLASH_ERR_NOT_FOUND : SPLASH_ERR_IO, "%s: %s",
                              path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return splash_err_set(err, SPLASH_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld bytes is too small for a safetensors header",
                              base_name(path), (long long)sb.st_size);
    }
    void *map = splash_file_map_path(fd, (size_t)sb.st_size, path);
    close(fd);
    if (map == MAP_FAILED)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    struct splash_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        splash_file_unmap(map, (size_t)sb.st_size);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
    }
    st->map = map;
    st->map_size = (size_t)sb.st_size;
    enum splash_status status = parse(st, map, (uint64_t)sb.st_size, flags, err);
    if (status) {
        splash_safetensors_close(st);
        return status;
    }
    if (flags & SPLASH_SAFETENSORS_HEADERS_ONLY) {
        splash_file_unmap(st->map, st->map_size);
        st->map = NULL;
        st->map_size = 0;
    }
    *out = st;
    return SPLASH_OK;
}

const struct splash_safetensors_tensor *
splash_safetensors_find(const struct splash_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].info.name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

/* ---- model directories ---------------------------------------------------- */

#define INDEX_FILE "model.safetensors.index.json"

/* Packs n strings into one block: the pointer array, then the bytes. */
static char **pack_strings(char *const *strs, size_t n)
{
    size_t total = n * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        total += strlen(strs[i]) + 1;
    char **out = malloc(total ? total : 1);
    if (!out)
        return NULL;
    char *p = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(strs[i]) + 1;
        memcpy(p, strs[i], len);
        out[i] = p;
        p += len;
    }
    return out;
}

/* A shard name from the index: relative, inside the directory. */
static int shard_name_ok(const char *s)
{
    if (!*s || *s == '/')
        return 0;
    for (const char *p = s; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || (len == 2 && p[0] == '.' && p[1] == '.') || (len == 1 && p[0] == '.'))
            return 0;
        p += len + (slash != NULL);
    }
    return 1;
}

static int is_root_shard(const struct dirent *d)
{
    size_t len = strlen(d->d_name);
    return len > 12 && strncmp(d->d_name, "model", 5) == 0 &&
           strcmp(d->d_name + len - 12, ".safetensors") == 0;
}

static enum splash_status shards_from_index(const char *dir, const char *index_path,
                                            json_t **index_out, char ***names, size_t *n,
                                            struct splash_err *err)
{
    enum splash_status status = SPLASH_OK;
    json_error_t jerr;
    json_t *index = json_load_file(index_path, JSON_REJECT_DUPLICATES, &jerr);
    if (!index)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: line %d: %s", INDEX_FILE, jerr.line,
                              jerr.text);
    json_t *map = json_object_get(index, "weight_map");
    if (!json_is_object(map)) {
        status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: weight_map must be an object",
                                INDEX_FILE);
        goto out_index;
    }
    size_t cap = json_object_size(map), count = 0;
    char **uniq = malloc((cap ? cap : 1) * sizeof *uniq);
    if (!uniq) {
        status = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_index;
    }
    /* distinct shards in first-mention order; a shard seen last is the common repeat */
    const char *key;
    json_t *value;
    json_object_foreach(map, key, value) {
        if (!json_is_string(value) || !shard_name_ok(json_string_value(value))) {
            status = splash_err_set(err, SPLASH_ERR_INVALID,
                                    "%s: weight_map.%.96s must name a file in the model's "
                                    "directory", INDEX_FILE, key);
            goto out_uniq;
        }
        const char *s = json_string_value(value);
        size_t i = count;
        while (i > 0 && strcmp(uniq[i - 1], s) != 0)
            i--;
        if (i == 0)
            uniq[count++] = (char *)s;
    }
    if (!count) {
        status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: weight_map is empty", INDEX_FILE);
        goto out_uniq;
    }
    if (!(*names = pack_strings(uniq, count))) {
        status = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_uniq;
    }
    *n = count;
out_uniq:
    free(uniq);
out_index:
    if (status || !index_out)
        json_decref(index);
    else
        *index_out = index;
    (void)dir;
    return status;
}

static enum splash_status list_shards(const char *dir, json_t **index_out, char ***names,
                                      size_t *n, struct splash_err *err)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, INDEX_FILE);
    if (stat(path, &sb) == 0)
        return shards_from_index(dir, path, index_out, names, n, err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (stat(path, &sb) == 0) {
        char *one = "model.safetensors";
        if (!(*names = pack_strings(&one, 1)))
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        *n = 1;
        return SPLASH_OK;
    }
    struct dirent **entries;
    int count = scandir(dir, &entries, is_root_shard, alphasort);
    if (count < 0)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: %s", dir, strerror(errno));
    enum splash_status status = SPLASH_OK;
    if (count == 0) {
        status = splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                "%s: no %s, model.safetensors or model*.safetensors", dir,
                                INDEX_FILE);
    } else {
        char **tmp = malloc((size_t)count * sizeof *tmp);
        if (tmp) {
            for (int i = 0; i < count; i++)
                tmp[i] = entries[i]->d_name;
            *names = pack_strings(tmp, (size_t)count);
            free(tmp);
        }
        if (!tmp || !*names)
            status = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        else
            *n = (size_t)count;
    }
    for (int i = 0; i < count; i++)
        free(entries[i]);
    free(entries);
    return status;
}

enum splash_status splash_safetensors_list_shards(const char *dir, char ***names, size_t *n,
                                                  struct splash_err *err)
{
    *names = NULL;
    *n = 0;
    return list_shards(dir, NULL, names, n, err);
}

struct model_shards {
    size_t n;
    char **names; /* packed */
    struct splash_safetensors **files;
};

static void model_shards_free(void *p)
{
    struct model_shards *s = p;
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        splash_safetensors_close(s->files[i]);
    free(s->files);
    free(s->names);
    free(s);
}

/* The shard whose tensor array holds info, or n when none does. */
static size_t shard_of(const struct model_shards *s, const struct splash_tensor_info *info)
{
    uintptr_t p = (uintptr_t)info;
    for (size_t i = 0; i < s->n; i++) {
        const struct splash_safetensors *f = s->files[i];
        if (!f || !f->n_tensors)
            continue;
        uintptr_t lo = (uintptr_t)&f->tensors[0], hi = (uintptr_t)&f->tensors[f->n_tensors];
        if (p >= lo && p < hi)
            return i;
    }
    return s->n;
}

const char *splash_safetensors_shard_name(const struct splash_meta *m,
                                         const struct splash_tensor_info *t)
{
    const struct model_shards *s = m->owner_data;
    size_t k = s && m->owner_free == model_shards_free ? shard_of(s, t) : 0;
    return s && m->owner_free == model_shards_free && k < s->n ? s->names[k] : "model.safetensors";
}

int splash_safetensors_shard_needed(const json_t *weight_map, const char *shard)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)weight_map, key, value) {
        const char *name = json_string_value(value);
        if (name && !strcmp(name, shard) && !splash_module_ignored(NULL, key))
            return 1;
    }
    return 0;
}

enum splash_status splash_safetensors_open_model(const char *dir, unsigned flags,
                                                 struct splash_meta **out,
                                                 struct splash_err *err)
{
    char path[PATH_MAX];
    struct splash_meta *m = NULL;
    json_t *index = NULL;
    enum splash_status status;
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", dir);
    if ((status = splash_meta_open_config(path, &m, err)))
        return status;
    struct model_shards *s = calloc(1, sizeof *s);
    if (!s) {
        splash_meta_close(m);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    m->owner_data = s;
    m->owner_free = model_shards_free;
    size_t n_names = 0;
    if ((status = list_shards(dir, &index, &s->names, &n_names, err)))
        goto out_close;
    if (!(s->files = calloc(n_names, sizeof *s->files))) {
        status = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_close;
    }
    s->n = n_names;
    for (size_t i = 0; i < s->n; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, s->names[i]) >= sizeof path) {
            status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", s->names[i]);
            goto out_close;
        }
        status = splash_safetensors_open(path, flags, &s->files[i], err);
        if (status == SPLASH_ERR_NOT_FOUND && index &&
            !splash_safetensors_shard_needed(json_object_get(index, "weight_map"), s->names[i])) {
            status = SPLASH_OK; /* a vision shard left out (--language-only) */
            continue;
        }
        if (status == SPLASH_ERR_NOT_FOUND && index)
            status = splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: shard %s is missing",
                                    INDEX_FILE, s->names[i]);
        if (status)
            goto out_close;
    }
    const struct splash_meta_api *api = splash_meta_api_get();
    for (size_t i = 0; i < s->n; i++) {
        struct splash_safetensors *f = s->files[i];
        if (!f)
            continue; /* a vision shard left out */
        for (size_t j = 0; j < f->n_tensors; j++) {
            struct splash_tensor_info *info = &f->tensors[j].info;
            const struct splash_tensor_info *other = api->tensor_find(m, info->name);
            if (other) {
                size_t k = shard_of(s, other);
                status = splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s is also in %s",
                                        s->names[i], info->name,
                                        k < s->n ? s->names[k] : "another shard");
                goto out_close;
            }
            if ((status = splash_meta_add_tensor(m, info, err)))
                goto out_close;
        }
    }
    if (index) {
        const char *key;
        json_t *value;
        json_object_foreach(json_object_get(index, "weight_map"), key, value) {
            const char *shard = json_string_value(value);
            const struct splash_tensor_info *t = api->tensor_find(m, key);
            if (!t && splash_module_ignored(NULL, key))
                continue; /* in a vision shard left out */
            size_t k = t ? shard_of(s, t) : s->n;
            if (k == s->n || strcmp(s->names[k], shard) != 0) {
                status = splash_err_set(err, SPLASH_ERR_INVALID,
                                        "%s: tensor %s is mapped to %s, which does not hold it",
                                        INDEX_FILE, key, shard);
                goto out_close;
            }
        }
    }
    json_decref(index);
    *out = m;
    return SPLASH_OK;
out_close:
    json_decref(index);
    splash_meta_close(m);
    return status;
}

enum splash_status splash_safetensors_add_file(struct splash_meta *m, const char *path,
                                               unsigned flags, struct splash_err *err)
{
    if (m->owner_free != model_shards_free)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not a safetensors model", m->path);
    struct model_shards *s = m->owner_data;
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    struct splash_safetensors *f = NULL;
    enum splash_status status = splash_safetensors_open(path, flags, &f, err);
    if (status)
        return status;
    /* the shard's name joins the packed names: names[n] for the new file */
    char **names = malloc((s->n + 1) * sizeof *names);
    struct splash_safetensors **files = realloc(s->files, (s->n + 1) * sizeof *files);
    if (files)
        s->files = files;
    char **packed = NULL;
    if (names && files) {
        for (size_t i = 0; i < s->n; i++)
            names[i] = s->names[i];
        names[s->n] = (char *)file;
        packed = pack_strings(names, s->n + 1);
    }
    free(names);
    if (!packed) {
        splash_safetensors_close(f);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    free(s->names);
    s->names = packed;
    s->files[s->n++] = f;
    const struct splash_meta_api *api = splash_meta_api_get();
    for (size_t j = 0; j < f->n_tensors; j++) {
        struct splash_tensor_info *info = &f->tensors[j].info;
        const struct splash_tensor_info *other = api->tensor_find(m, info->name);
        if (other) {
            size_t k = shard_of(s, other);
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor %s is also in %s", file,
                                  info->name, k < s->n ? s->names[k] : "another shard");
        }
        if ((status = splash_meta_add_tensor(m, info, err)))
            return status;
    }
    return SPLASH_OK;
}
