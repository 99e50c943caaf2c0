/* GGUF v3 writer: metadata of every value type, tensors with alignment padding,
 * and splitting into NAME-0000K-of-0000N.gguf parts the way llama.cpp's
 * gguf-split writes them. Used by tests (broken, split and retyped GGUFs) and
 * by make-model. Tensor data is borrowed: it must stay valid until the write. */
#ifndef SPLASH_CORE_GGUF_WRITE_H
#define SPLASH_CORE_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/gguf.h"
#include "splash/status.h"

struct splash_gguf_writer;

struct splash_gguf_writer *splash_gguf_writer_create(void);
void splash_gguf_writer_destroy(struct splash_gguf_writer *w);

/* Alignment of the data section and of every tensor (a power of two, default 32);
 * anything but 32 is also written as general.alignment (u32). */
enum splash_status splash_gguf_writer_set_alignment(struct splash_gguf_writer *w, uint32_t align,
                                                    struct splash_err *err);

/* A scalar of `type` (enum splash_gguf_vtype, not STRING or ARRAY) read from *value in
 * the type's own C representation (uint8_t, int16_t, float, ..., bool as uint8_t).
 * Setting a key twice replaces its value. */
enum splash_status splash_gguf_writer_set_scalar(struct splash_gguf_writer *w, const char *key,
                                                 uint32_t type, const void *value,
                                                 struct splash_err *err);
enum splash_status splash_gguf_writer_set_str(struct splash_gguf_writer *w, const char *key,
                                              const char *value, struct splash_err *err);
/* An array of n elements of elem_type: packed values, or `const char *const *` for strings. */
enum splash_status splash_gguf_writer_set_array(struct splash_gguf_writer *w, const char *key,
                                                uint32_t elem_type, const void *values, size_t n,
                                                struct splash_err *err);

/* Shorthands for the common scalars. */
enum splash_status splash_gguf_writer_set_u32(struct splash_gguf_writer *w, const char *key,
                                              uint32_t v, struct splash_err *err);
enum splash_status splash_gguf_writer_set_i32(struct splash_gguf_writer *w, const char *key,
                                              int32_t v, struct splash_err *err);
enum splash_status splash_gguf_writer_set_f32(struct splash_gguf_writer *w, const char *key,
                                              float v, struct splash_err *err);
enum splash_status splash_gguf_writer_set_bool(struct splash_gguf_writer *w, const char *key,
                                               int v, struct splash_err *err);

/* Adds a tensor of GGML type `type` and shape ne[0..n_dims) (ne[0] fastest). For a type
 * splash_gguf_type_info knows, n_bytes must be the shape's size in that type; any other
 * type id is written as given (to make files the reader must refuse). */
enum splash_status splash_gguf_writer_add_tensor(struct splash_gguf_writer *w, const char *name,
                                                 int32_t type, int n_dims, const int64_t *ne,
                                                 const void *data, uint64_t n_bytes,
                                                 struct splash_err *err);

/* The whole file in memory (malloc'ed, caller frees). */
enum splash_status splash_gguf_writer_write_buffer(const struct splash_gguf_writer *w, void **out,
                                                   size_t *size, struct splash_err *err);
enum splash_status splash_gguf_writer_write_file(const struct splash_gguf_writer *w,
                                                 const char *path, struct splash_err *err);

/* Writes PREFIX-00001-of-0000N.gguf ... with at most max_tensors tensors per part (N
 * at least 1). Every part carries split.no (u16, from 0), split.count (u16) and
 * split.tensors.count (i32, all parts' tensors); the first part also every other key. */
enum splash_status splash_gguf_writer_write_split(const struct splash_gguf_writer *w,
                                                  const char *prefix, size_t max_tensors,
                                                  int *n_parts, struct splash_err *err);

#endif
