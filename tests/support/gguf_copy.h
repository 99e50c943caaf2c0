/* Rewriting a parsed GGUF in tests: its keys into a writer, each in its own width. */
#ifndef SPLASH_TEST_GGUF_COPY_H
#define SPLASH_TEST_GGUF_COPY_H

#include <stdint.h>

#include "core/gguf.h"
#include "core/gguf_write.h"

/* Copies one key of a parsed GGUF into w; fails the test on an error. */
void test_gguf_copy_kv(struct splash_gguf_writer *w, const struct splash_gguf_kv *kv);

/* src copied to a temporary file (its path returned, the caller frees it and unlinks the
 * file) with an F32 tensor `name` of n values `value` added; fails the test on an error. */
char *test_gguf_with_tensor(const char *src, const char *name, int64_t n, float value);

#endif
