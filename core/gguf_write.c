/* GGUF v3 writer. The header is built in memory (metadata and tensor directory are
 * small); tensor data is borrowed from the caller and streamed after it. */
#include "core/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC_BYTES "GGUF"
#define GGUF_WRITE_VERSION 3u
#define DEFAULT_ALIGNMENT 32u

struct wkv {
    char *key;
    uint8_t *value; /* the type id and value, as the file holds them after the key */
    size_t value_len;
};

struct wtensor {
    char *name;
    int32_t type;
    int n_dims;
    int64_t ne[4];
    const void *data;
    uint64_t n_bytes;
};

struct splash_gguf_writer {
    uint32_t alignment;
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

/* ---- growable byte buffer ---------------------------------------------- */

struct bytes {
    uint8_t *p;
    size_t n, cap;
    int failed;
};

static void put(struct bytes *b, const void *src, size_t n)
{
    if (b->failed)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n)
            cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct bytes *b, uint32_t v)
{
    put(b, &v, 4);
}

static void put_u64(struct bytes *b, uint64_t v)
{
    put(b, &v, 8);
}

static void put_str(struct bytes *b, const char *s)
{
    size_t len = strlen(s);
    put_u64(b, len);
    put(b, s, len);
}

static void put_zeros(struct bytes *b, size_t n)
{
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        put(b, zeros, k);
        n -= k;
    }
}

static size_t scalar_bytes(uint32_t type)
{
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* ---- building ------------------------------------------------------------ */

struct splash_gguf_writer *splash_gguf_writer_create(void)
{
    struct splash_gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = DEFAULT_ALIGNMENT;
    return w;
}

void splash_gguf_writer_destroy(struct splash_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kv);
    free(w->tensors);
    free(w);
}

/* Stores (or replaces) key's serialized value; takes ownership of b's bytes. */
static enum splash_status set_kv(struct splash_gguf_writer *w, const char *key, struct bytes *b,
                                 struct splash_err *err)
{
    if (b->failed) {
        free(b->p);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: %s: out of memory", key);
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].value);
            w->kv[i].value = b->p;
            w->kv[i].value_len = b->n;
            return SPLASH_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        struct wkv *grown = realloc(w->kv, cap * sizeof *grown);
        if (!grown)
            goto out_nomem;
        w->kv = grown;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k)
        goto out_nomem;
    w->kv[w->n_kv++] = (struct wkv){.key = k, .value = b->p, .value_len = b->n};
    return SPLASH_OK;
out_nomem:
    free(b->p);
    return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: %s: out of memory", key);
}

enum splash_status splash_gguf_writer_set_alignment(struct splash_gguf_writer *w, uint32_t align,
                                                    struct splash_err *err)
{
    if (align == 0 || (align & (align - 1)))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "gguf writer: alignment %u is not a power of two", align);
    w->alignment = align;
    return splash_gguf_writer_set_u32(w, "general.alignment", align, err);
}

enum splash_status splash_gguf_writer_set_scalar(struct splash_gguf_writer *w, const char *key,
                                                 uint32_t type, const void *value,
                                                 struct splash_err *err)
{
    size_t sz = scalar_bytes(type);
    if (!sz)
        return splash_err_set(err, SPLASH_ERR_INVALID, "gguf writer: %s: %u is not a scalar type",
                              key, type);
    struct bytes b = {0};
    put_u32(&b, type);
    put(&b, value, sz);
    return set_kv(w, key, &b, err);
}

enum splash_status splash_gguf_writer_set_str(struct splash_gguf_writer *w, const char *key,
                                              const char *value, struct splash_err *err)
{
    struct bytes b = {0};
    put_u32(&b, GGUF_STRING);
    put_str(&b, value);
    return set_kv(w, key, &b, err);
}

enum splash_status splash_gguf_writer_set_array(struct splash_gguf_writer *w, const char *key,
                                                uint32_t elem_type, const void *values, size_t n,
                                                struct splash_err *err)
{
    size_t sz = scalar_bytes(elem_type);
    if (!sz && elem_type != GGUF_STRING)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "gguf writer: %s: arrays of type %u are not supported", key,
                              elem_type);
    struct bytes b = {0};
    put_u32(&b, GGUF_ARRAY);
    put_u32(&b, elem_type);
    put_u64(&b, n);
    if (elem_type == GGUF_STRING) {
        const char *const *strs = values;
        for (size_t i = 0; i < n; i++)
            put_str(&b, strs[i]);
    } else if (n) {
        put(&b, values, n * sz);
    }
    return set_kv(w, key, &b, err);
}

enum splash_status splash_gguf_writer_set_u32(struct splash_gguf_writer *w, const char *key,
                                              uint32_t v, struct splash_err *err)
{
    return splash_gguf_writer_set_scalar(w, key, GGUF_U32, &v, err);
}

enum splash_status splash_gguf_writer_set_i32(struct splash_gguf_writer *w, const char *key,
                                              int32_t v, struct splash_err *err)
{
    return splash_gguf_writer_set_scalar(w, key, GGUF_I32, &v, err);
}

enum splash_status splash_gguf_writer_set_f32(struct splash_gguf_writer *w, const char *key,
                                              float v, struct splash_err *err)
{
    return splash_gguf_writer_set_scalar(w, key, GGUF_F32, &v, err);
}

enum splash_status splash_gguf_writer_set_bool(struct splash_gguf_writer *w, const char *key,
                                               int v, struct splash_err *err)
{
    uint8_t b = v != 0;
    return splash_gguf_writer_set_scalar(w, key, GGUF_BOOL, &b, err);
}

enum splash_status splash_gguf_writer_add_tensor(struct splash_gguf_writer *w, const char *name,
                                                 int32_t type, int n_dims, const int64_t *ne,
                                                 const void *data, uint64_t n_bytes,
                                                 struct splash_err *err)
{
    if (n_dims < 1 || n_dims > 4)
        return splash_err_set(err, SPLASH_ERR_INVALID, "gguf writer: %s: %d dimensions", name,
                              n_dims);
    uint32_t be, bb;
    if (splash_gguf_type_info(type, NULL, &be, &bb)) {
        uint64_t elems = 1;
        for (int d = 0; d < n_dims; d++) {
            if (ne[d] <= 0 || __builtin_mul_overflow(elems, (uint64_t)ne[d], &elems))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "gguf writer: %s: dimension %d is %lld", name, d,
                                      (long long)ne[d]);
        }
        if (ne[0] % be || elems / be * bb != n_bytes)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "gguf writer: %s: %llu bytes do not hold its shape in type %d",
                                  name, (unsigned long long)n_bytes, type);
    }
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        struct wtensor *grown = realloc(w->tensors, cap * sizeof *grown);
        if (!grown)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: out of memory");
        w->tensors = grown;
        w->cap_tensors = cap;
    }
    struct wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: out of memory");
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->n_bytes = n_bytes;
    w->n_tensors++;
    return SPLASH_OK;
}

/* ---- emitting ------------------------------------------------------------- */

/* What one output file holds: tensors [first, first + count) and, for a split part,
 * its split keys (with the writer's keys only in part 0). */
struct part {
    size_t first, count;
    int split;          /* 0: a whole file */
    uint16_t no, n_parts;
    int32_t total_tensors;
};

static int is_split_key(const char *key)
{
    return !strcmp(key, "split.no") || !strcmp(key, "split.count") ||
           !strcmp(key, "split.tensors.count");
}

static void put_kv_raw(struct bytes *b, const char *key, uint32_t type, const void *v, size_t n)
{
    put_str(b, key);
    put_u32(b, type);
    put(b, v, n);
}

/* The header of a part, padded to the alignment, and its data size. */
static void build_header(const struct splash_gguf_writer *w, const struct part *p,
                         struct bytes *b, uint64_t *data_size)
{
    size_t n_kv = 0;
    int own_keys = !p->split || p->no == 0;
    if (own_keys)
        for (size_t i = 0; i < w->n_kv; i++)
            n_kv += !(p->split && is_split_key(w->kv[i].key));
    if (p->split)
        n_kv += 3;
    put(b, GGUF_MAGIC_BYTES, 4);
    put_u32(b, GGUF_WRITE_VERSION);
    put_u64(b, p->count);
    put_u64(b, n_kv);
    if (own_keys)
        for (size_t i = 0; i < w->n_kv; i++) {
            if (p->split && is_split_key(w->kv[i].key))
                continue;
            put_str(b, w->kv[i].key);
            put(b, w->kv[i].value, w->kv[i].value_len);
        }
    if (p->split) {
        put_kv_raw(b, "split.no", GGUF_U16, &p->no, 2);
        put_kv_raw(b, "split.count", GGUF_U16, &p->n_parts, 2);
        put_kv_raw(b, "split.tensors.count", GGUF_I32, &p->total_tensors, 4);
    }
    uint64_t offset = 0;
    for (size_t i = p->first; i < p->first + p->count; i++) {
        const struct wtensor *t = &w->tensors[i];
        put_str(b, t->name);
        put_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, (uint32_t)t->type);
        put_u64(b, offset);
        offset = align_up(offset + t->n_bytes, w->alignment);
    }
    put_zeros(b, align_up(b->n, w->alignment) - b->n);
    *data_size = offset;
}

static enum splash_status emit_buffer(const struct splash_gguf_writer *w, const struct part *p,
                                      void **out, size_t *size, struct splash_err *err)
{
    struct bytes b = {0};
    uint64_t data_size;
    build_header(w, p, &b, &data_size);
    for (size_t i = p->first; i < p->first + p->count; i++) {
        const struct wtensor *t = &w->tensors[i];
        if (t->n_bytes)
            put(&b, t->data, t->n_bytes);
        put_zeros(&b, align_up(t->n_bytes, w->alignment) - t->n_bytes);
    }
    if (b.failed) {
        free(b.p);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: out of memory");
    }
    *out = b.p;
    *size = b.n;
    return SPLASH_OK;
}

static enum splash_status emit_file(const struct splash_gguf_writer *w, const struct part *p,
                                    const char *path, struct splash_err *err)
{
    enum splash_status st = SPLASH_OK;
    struct bytes b = {0};
    uint64_t data_size;
    build_header(w, p, &b, &data_size);
    if (b.failed) {
        free(b.p);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "gguf writer: out of memory");
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        st = splash_err_set(err, SPLASH_ERR_IO, "%s: %s", path, strerror(errno));
        goto out_free_header;
    }
    static const uint8_t zeros[64];
    int ok = fwrite(b.p, 1, b.n, f) == b.n;
    for (size_t i = p->first; ok && i < p->first + p->count; i++) {
        const struct wtensor *t = &w->tensors[i];
        ok = !t->n_bytes || fwrite(t->data, 1, t->n_bytes, f) == t->n_bytes;
        uint64_t pad = align_up(t->n_bytes, w->alignment) - t->n_bytes;
        while (ok && pad) {
            size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
            ok = fwrite(zeros, 1, k, f) == k;
            pad -= k;
        }
    }
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        st = splash_err_set(err, SPLASH_ERR_IO, "%s: write failed: %s", path, strerror(errno));
out_free_header:
    free(b.p);
    return st;
}

enum splash_status splash_gguf_writer_write_buffer(const struct splash_gguf_writer *w, void **out,
                                                   size_t *size, struct splash_err *err)
{
    struct part p = {.first = 0, .count = w->n_tensors};
    return emit_buffer(w, &p, out, size, err);
}

enum splash_status splash_gguf_writer_write_file(const struct splash_gguf_writer *w,
                                                 const char *path, struct splash_err *err)
{
    struct part p = {.first = 0, .count = w->n_tensors};
    return emit_file(w, &p, path, err);
}

enum splash_status splash_gguf_writer_write_split(const struct splash_gguf_writer *w,
                                                  const char *prefix, size_t max_tensors,
                                                  int *n_parts, struct splash_err *err)
{
    if (max_tensors == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "gguf writer: 0 tensors per part");
    size_t parts = w->n_tensors ? (w->n_tensors + max_tensors - 1) / max_tensors : 1;
    if (parts > UINT16_MAX || w->n_tensors > INT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID, "gguf writer: %zu parts is too many",
                              parts);
    for (size_t i = 0; i < parts; i++) {
        struct part p = {
            .first = i * max_tensors,
            .split = 1,
            .no = (uint16_t)i,
            .n_parts = (uint16_t)parts,
            .total_tensors = (int32_t)w->n_tensors,
        };
        p.count = w->n_tensors - p.first < max_tensors ? w->n_tensors - p.first : max_tensors;
        if (!w->n_tensors)
            p.count = 0;
        char path[4096];
        int len = snprintf(path, sizeof path, "%s-%05zu-of-%05zu.gguf", prefix, i + 1, parts);
        if (len < 0 || (size_t)len >= sizeof path)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", prefix);
        enum splash_status st = emit_file(w, &p, path, err);
        if (st)
            return st;
    }
    if (n_parts)
        *n_parts = (int)parts;
    return SPLASH_OK;
}
