/* Rewriting a parsed GGUF in tests: its keys into a writer, each in its own width. */
#ifndef SPLASH_TEST_GGUF_COPY_H
#define SPLASH_TEST_GGUF_COPY_H

#include "core/gguf.h"
#include "core/gguf_write.h"

/* Copies one key of a parsed GGUF into w; fails the test on an error. */
void test_gguf_copy_kv(struct splash_gguf_writer *w, const struct splash_gguf_kv *kv);

#endif
