/* GGUF reader. The file is mapped read-only and parsed with a bounded cursor:
 * nothing is read, allocated or indexed before its size is checked. */
#include "core/gguf.h"

#include "core/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define MAX_KV (1u << 20)
#define MAX_TENSORS (1u << 22)
#define MAX_DIMS 4
#define MAX_NAME 4096

struct cursor {
    const uint8_t *p;
    uint64_t size, pos;
    const char *path;
    struct splash_err *err;
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static enum splash_status truncated(struct cursor *c, const char *what)
{
    return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: truncated at byte %llu reading %s",
                          base_name(c->path), (unsigned long long)c->pos, what);
}

static enum splash_status rd(struct cursor *c, void *dst, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return truncated(c, what);
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return SPLASH_OK;
}

static enum splash_status rd_u32(struct cursor *c, uint32_t *v, const char *what)
{
    return rd(c, v, 4, what);
}

static enum splash_status rd_u64(struct cursor *c, uint64_t *v, const char *what)
{
    return rd(c, v, 8, what);
}

/* A GGUF string: u64 length then bytes (not NUL-terminated on disk). */
static enum splash_status rd_str(struct cursor *c, char **out, uint64_t max, const char *what)
{
    uint64_t len;
    enum splash_status st = rd_u64(c, &len, what);
    if (st)
        return st;
    if (len > c->size - c->pos)
        return truncated(c, what);
    if (len > max)
        return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: %s: string of %llu bytes is too long",
                              base_name(c->path), what, (unsigned long long)len);
    char *s = malloc(len + 1);
    if (!s)
        return splash_err_set(c->err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(c->path));
    memcpy(s, c->p + c->pos, len);
    s[len] = 0;
    c->pos += len;
    *out = s;
    return SPLASH_OK;
}

static uint64_t scalar_size(uint32_t type)
{
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

/* Widens a little-endian scalar of `type` at p into the kv's union. */
static void widen(uint32_t type, const uint8_t *p, struct splash_gguf_kv *kv)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } u;
    memcpy(&u, p, scalar_size(type));
    switch (type) {
    case GGUF_U8: kv->v.u64 = u.u8; break;
    case GGUF_BOOL: kv->v.u64 = u.u8 != 0; break;
    case GGUF_I8: kv->v.i64 = u.i8; break;
    case GGUF_U16: kv->v.u64 = u.u16; break;
    case GGUF_I16: kv->v.i64 = u.i16; break;
    case GGUF_U32: kv->v.u64 = u.u32; break;
    case GGUF_I32: kv->v.i64 = u.i32; break;
    case GGUF_F32: kv->v.f64 = u.f32; break;
    case GGUF_U64: kv->v.u64 = u.u64; break;
    case GGUF_I64: kv->v.i64 = u.i64; break;
    case GGUF_F64: kv->v.f64 = u.f64; break;
    }
}

static enum splash_status read_value(struct cursor *c, struct splash_gguf_kv *kv)
{
    enum splash_status st;
    if (kv->type == GGUF_STRING) {
        kv->n = 1;
        return rd_str(c, &kv->v.str, c->size, kv->key);
    }
    if (kv->type != GGUF_ARRAY) {
        uint64_t sz = scalar_size(kv->type);
        if (!sz)
            return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: %s: unknown value type %u",
                                  base_name(c->path), kv->key, kv->type);
        uint8_t buf[8];
        if ((st = rd(c, buf, sz, kv->key)))
            return st;
        widen(kv->type, buf, kv);
        kv->n = 1;
        return SPLASH_OK;
    }
    if ((st = rd_u32(c, &kv->arr_type, kv->key)) || (st = rd_u64(c, &kv->n, kv->key)))
        return st;
    if (kv->arr_type == GGUF_ARRAY)
        return splash_err_set(c->err, SPLASH_ERR_UNSUPPORTED, "%s: %s: nested arrays are not supported",
                              base_name(c->path), kv->key);
    uint64_t remaining = c->size - c->pos;
    if (kv->arr_type == GGUF_STRING) {
        /* each string costs at least its 8-byte length */
        if (kv->n > remaining / 8)
            return truncated(c, kv->key);
        char **strs = calloc(kv->n ? kv->n : 1, sizeof *strs);
        if (!strs)
            return splash_err_set(c->err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(c->path));
        kv->arr = strs;
        for (uint64_t i = 0; i < kv->n; i++)
            if ((st = rd_str(c, &strs[i], c->size, kv->key)))
                return st;
        return SPLASH_OK;
    }
    uint64_t sz = scalar_size(kv->arr_type);
    if (!sz)
        return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: %s: unknown array element type %u",
                              base_name(c->path), kv->key, kv->arr_type);
    if (kv->n > remaining / sz)
        return truncated(c, kv->key);
    kv->arr = malloc(kv->n ? kv->n * sz : 1);
    if (!kv->arr)
        return splash_err_set(c->err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(c->path));
    return rd(c, kv->arr, kv->n * sz, kv->key);
}

static enum splash_status read_tensor(struct cursor *c, struct splash_gguf_tensor *t, size_t index)
{
    enum splash_status st;
    char *name = NULL;
    char what[64];
    snprintf(what, sizeof what, "tensor %zu name", index);
    if ((st = rd_str(c, &name, MAX_NAME, what)))
        return st;
    t->info.name = name;
    uint32_t n_dims;
    if ((st = rd_u32(c, &n_dims, name)))
        return st;
    if (n_dims == 0 || n_dims > MAX_DIMS)
        return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: %s: %u dimensions (1 to 4 allowed)",
                              base_name(c->path), name, n_dims);
    t->info.n_dims = (int32_t)n_dims;
    uint64_t elems = 1;
    for (int d = 0; d < 4; d++)
        t->info.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if ((st = rd_u64(c, &ne, name)))
            return st;
        if (ne == 0 || ne > (1ull << 40) || elems > (1ull << 50) / ne)
            return splash_err_set(c->err, SPLASH_ERR_INVALID, "%s: %s: dimension %u is %llu",
                                  base_name(c->path), name, d, (unsigned long long)ne);
        t->info.ne[d] = (int64_t)ne;
        elems *= ne;
    }
    uint32_t type;
    if ((st = rd_u32(c, &type, name)) || (st = rd_u64(c, &t->offset, name)))
        return st;
    uint32_t be, bb;
    const char *type_name;
    if (!splash_gguf_type_info((int32_t)type, &type_name, &be, &bb))
        return splash_err_set(c->err, SPLASH_ERR_UNSUPPORTED, "%s: %s: unknown tensor type %u",
                              base_name(c->path), name, type);
    if (t->info.ne[0] % be)
        return splash_err_set(c->err, SPLASH_ERR_INVALID,
                              "%s: %s: %lld columns are not a whole number of %s blocks (%u)",
                              base_name(c->path), name, (long long)t->info.ne[0], type_name, be);
    t->info.dtype = (int32_t)type;
    t->info.type_name = type_name;
    t->info.n_bytes = elems / be * bb;
    return SPLASH_OK;
}

/* Duplicate names in O(n log n): a hostile header may hold a million keys. */
static const char dup_nomem_marker[] = "";
#define DUP_NOMEM dup_nomem_marker

static const char *key_at(const struct splash_gguf *g, size_t i)
{
    return g->kv[i].key;
}

static const char *tensor_name_at(const struct splash_gguf *g, size_t i)
{
    return g->tensors[i].info.name;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *first_duplicate(size_t n, const char *(*name_at)(const struct splash_gguf *, size_t),
                                   const struct splash_gguf *g)
{
    if (n < 2)
        return NULL;
    const char **names = malloc(n * sizeof *names);
    if (!names)
        return DUP_NOMEM;
    for (size_t i = 0; i < n; i++)
        names[i] = name_at(g, i);
    qsort(names, n, sizeof *names, cmp_names);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (!strcmp(names[i - 1], names[i]))
            dup = names[i];
    free(names);
    return dup;
}

static int key_is(const struct splash_gguf_kv *kv, const char *key)
{
    return kv->key && !strcmp(kv->key, key);
}

static enum splash_status parse(struct splash_gguf *g, const uint8_t *buf, uint64_t size,
                                unsigned flags, struct splash_err *err)
{
    struct cursor c = {.p = buf, .size = size, .pos = 0, .path = g->path, .err = err};
    enum splash_status st;
    uint32_t magic;
    if ((st = rd_u32(&c, &magic, "magic")))
        return st;
    if (magic != GGUF_MAGIC)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not a GGUF file (bad magic)",
                              base_name(g->path));
    if ((st = rd_u32(&c, &g->version, "version")))
        return st;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: big-endian GGUF is not supported",
                              base_name(g->path));
    if (g->version != 2 && g->version != 3)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: GGUF version %u (2 and 3 supported)",
                              base_name(g->path), g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(&c, &n_tensors, "tensor count")) || (st = rd_u64(&c, &n_kv, "metadata count")))
        return st;
    if (n_kv > MAX_KV || n_kv > (size - c.pos) / 12)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: metadata count %llu is impossible",
                              base_name(g->path), (unsigned long long)n_kv);
    if (n_tensors > MAX_TENSORS || n_tensors > (size - c.pos) / 24)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor count %llu is impossible",
                              base_name(g->path), (unsigned long long)n_tensors);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(g->path));
    g->alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        struct splash_gguf_kv *kv = &g->kv[i];
        char what[48];
        snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)i);
        if ((st = rd_str(&c, &kv->key, MAX_NAME, what)))
            return st;
        g->n_kv = i + 1;
        if ((st = rd_u32(&c, &kv->type, kv->key)) || (st = read_value(&c, kv)))
            return st;
        if (key_is(kv, "general.alignment")) {
            if (kv->type != GGUF_U32 || kv->v.u64 == 0 || (kv->v.u64 & (kv->v.u64 - 1)) ||
                kv->v.u64 > 65536)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: general.alignment must be a power of two up to 65536",
                                      base_name(g->path));
            g->alignment = kv->v.u64;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = i + 1;
        if ((st = read_tensor(&c, &g->tensors[i], (size_t)i)))
            return st;
    }
    const char *dup = first_duplicate(g->n_kv, key_at, g);
    if (dup == DUP_NOMEM)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(g->path));
    if (dup)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: duplicate metadata key %s",
                              base_name(g->path), dup);
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct splash_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: offset %llu is not aligned to %llu",
                                  base_name(g->path), t->info.name, (unsigned long long)t->offset,
                                  (unsigned long long)g->alignment);
        if (!(flags & SPLASH_GGUF_HEADERS_ONLY)) {
            if (g->data_offset > size || t->offset > size - g->data_offset ||
                t->info.n_bytes > size - g->data_offset - t->offset)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: %s: data (%llu bytes at %llu) runs past the end of the file",
                                      base_name(g->path), t->info.name,
                                      (unsigned long long)t->info.n_bytes,
                                      (unsigned long long)t->offset);
            t->info.data = buf + g->data_offset + t->offset;
        }
    }
    /* duplicate tensor names would make look-ups ambiguous */
    dup = first_duplicate(g->n_tensors, tensor_name_at, g);
    if (dup == DUP_NOMEM)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", base_name(g->path));
    if (dup)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: duplicate tensor %s",
                              base_name(g->path), dup);
    return SPLASH_OK;
}

void splash_gguf_close(struct splash_gguf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_kv; i++) {
        struct splash_gguf_kv *kv = &g->kv[i];
        free(kv->key);
        if (kv->type == GGUF_STRING)
            free(kv->v.str);
        if (kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING && kv->arr)
            for (uint64_t j = 0; j < kv->n; j++)
                free(((char **)kv->arr)[j]);
        free(kv->arr);
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        free((char *)g->tensors[i].info.name);
    free(g->kv);
    free(g->tensors);
    if (g->map)
        splash_file_unmap(g->map, g->map_size);
    free(g->path);
    free(g);
}

enum splash_status splash_gguf_parse_buffer(const void *buf, size_t size, const char *name,
                                            unsigned flags, struct splash_gguf **out,
                                            struct splash_err *err)
{
    struct splash_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(name))) {
        free(g);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", name);
    }
    g->file_size = size;
    enum splash_status st = parse(g, buf, size, flags, err);
    if (st) {
        splash_gguf_close(g);
        return st;
    }
    *out = g;
    return SPLASH_OK;
}

enum splash_status splash_gguf_open(const char *path, unsigned flags, struct splash_gguf **out,
                                    struct splash_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return splash_err_set(err, SPLASH_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 24) {
        close(fd);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %lld bytes is too small for a GGUF header",
                              base_name(path), (long long)sb.st_size);
    }
    void *map = splash_file_map_path(fd, (size_t)sb.st_size, path);
    close(fd);
    if (map == MAP_FAILED)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    struct splash_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        splash_file_unmap(map, (size_t)sb.st_size);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", path);
    }
    g->map = map;
    g->map_size = (size_t)sb.st_size;
    g->file_size = (uint64_t)sb.st_size;
    enum splash_status st = parse(g, map, g->file_size, flags, err);
    if (st) {
        splash_gguf_close(g);
        return st;
    }
    if (flags & SPLASH_GGUF_HEADERS_ONLY) {
        /* nothing points into the mapping: give it back now */
        splash_file_unmap(g->map, g->map_size);
        g->map = NULL;
        g->map_size = 0;
    }
    *out = g;
    return SPLASH_OK;
}

const struct splash_gguf_kv *splash_gguf_find_kv(const struct splash_gguf *g, const char *key)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const struct splash_gguf_tensor *splash_gguf_find_tensor(const struct splash_gguf *g,
                                                         const char *name)
{
    for (size_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].info.name, name))
            return &g->tensors[i];
    return NULL;
}
