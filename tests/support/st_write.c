/* Safetensors files for tests: read, edit, write. */
#include "tests/support/st_write.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void test_st_add(struct test_st_file *f, const char *name, const char *dtype, int rank,
                 const int64_t *shape, const void *data, size_t n_bytes)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 64;
        f->t = realloc(f->t, f->cap * sizeof *f->t);
    }
    struct test_st_tensor *t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    t->data = malloc(n_bytes ? n_bytes : 1);
    memcpy(t->data, data, n_bytes);
    t->n_bytes = n_bytes;
}

struct test_st_tensor *test_st_find(struct test_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

int test_st_remove(struct test_st_file *f, const char *name)
{
    struct test_st_tensor *t = test_st_find(f, name);
    if (!t)
        return 0;
    free(t->data);
    size_t i = (size_t)(t - f->t);
    memmove(&f->t[i], &f->t[i + 1], (f->n - i - 1) * sizeof *t);
    f->n--;
    return 1;
}

int test_st_read(const char *path, struct test_st_file *f)
{
    memset(f, 0, sizeof *f);
    FILE *in = fopen(path, "rb");
    if (!in)
        return -1;
    uint64_t hlen = 0;
    unsigned char len8[8];
    if (fread(len8, 1, 8, in) != 8) {
        fclose(in);
        return -1;
    }
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    char *h = malloc(hlen + 1);
    if (fread(h, 1, hlen, in) != hlen) {
        free(h);
        fclose(in);
        return -1;
    }
    h[hlen] = 0;
    json_t *root = json_loads(h, 0, NULL);
    free(h);
    if (!root) {
        fclose(in);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__"))
            continue;
        json_t *shape = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
        int64_t s[4];
        int rank = (int)json_array_size(shape);
        for (int i = 0; i < rank && i < 4; i++)
            s[i] = json_integer_value(json_array_get(shape, (size_t)i));
        uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 0)),
                 e = (uint64_t)json_integer_value(json_array_get(off, 1));
        void *data = malloc(e - b ? e - b : 1);
        fseek(in, (long)(8 + hlen + b), SEEK_SET);
        if (fread(data, 1, e - b, in) != e - b) {
            free(data);
            json_decref(root);
            fclose(in);
            return -1;
        }
        test_st_add(f, key, json_string_value(json_object_get(v, "dtype")), rank, s, data, e - b);
        free(data);
    }
    json_decref(root);
    fclose(in);
    return 0;
}

int test_st_write(const struct test_st_file *f, const char *path)
{
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < f->n; i++) {
        const struct test_st_tensor *t = &f->t[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->rank; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", t->dtype, "shape", shape,
                              "data_offsets", (json_int_t)off, (json_int_t)(off + t->n_bytes));
        json_object_set_new(h, t->name, e);
        off += t->n_bytes;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    FILE *out = fopen(path, "wb");
    int bad = !out;
    if (out) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++)
            len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
        bad |= fwrite(len8, 1, 8, out) != 8 || fwrite(text, 1, len, out) != len;
        for (size_t i = len; i < padded; i++)
            bad |= fputc(' ', out) == EOF;
        for (size_t i = 0; i < f->n; i++)
            bad |= fwrite(f->t[i].data, 1, f->t[i].n_bytes, out) != f->t[i].n_bytes;
        bad |= fclose(out) != 0;
    }
    free(text);
    return bad ? -1 : 0;
}

void test_st_free(struct test_st_file *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->t[i].data);
    free(f->t);
    memset(f, 0, sizeof *f);
}

int test_st_tmpdir(char *out, size_t size)
{
    snprintf(out, size, "/tmp/splash-st-XXXXXX");
    return mkdtemp(out) ? 0 : -1;
}

void test_st_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int test_st_write_config(const char *dir, const json_t *config)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/config.json", dir);
    return json_dump_file(config, p, JSON_INDENT(1)) ? -1 : 0;
}
