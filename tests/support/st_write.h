/* Writing safetensors checkpoints in tests: a file of named tensors, and a copy of a
 * checkpoint directory with some tensors replaced, dropped or added. */
#ifndef SPLASH_TEST_ST_WRITE_H
#define SPLASH_TEST_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct test_st_tensor {
    char name[200];
    char dtype[12];   /* "U32", "BF16", "F8_E4M3" */
    int rank;
    int64_t shape[4]; /* slowest first, as safetensors stores it */
    void *data;       /* owned (malloc'ed) */
    size_t n_bytes;
};

struct test_st_file {
    struct test_st_tensor *t;
    size_t n, cap;
};

/* Appends a tensor (data copied). */
void test_st_add(struct test_st_file *f, const char *name, const char *dtype, int rank,
                 const int64_t *shape, const void *data, size_t n_bytes);
/* The tensor named name, or NULL. */
struct test_st_tensor *test_st_find(struct test_st_file *f, const char *name);
/* Removes the tensor named name (0 when absent). */
int test_st_remove(struct test_st_file *f, const char *name);
/* Reads every tensor of a safetensors file (0 on success). */
int test_st_read(const char *path, struct test_st_file *f);
/* Writes the file (header padded to 8 bytes); 0 on success. */
int test_st_write(const struct test_st_file *f, const char *path);
void test_st_free(struct test_st_file *f);

/* A fresh directory under /tmp (mkdtemp); and its removal with every file in it. */
int test_st_tmpdir(char *out, size_t size);
void test_st_rmdir(const char *dir);
/* Writes config to dir/config.json (0 on success). */
int test_st_write_config(const char *dir, const json_t *config);

#endif
