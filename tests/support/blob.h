/* A growing byte buffer that takes what a family's seq_save hands it. */
#ifndef SPLASH_TEST_BLOB_H
#define SPLASH_TEST_BLOB_H

#include <stddef.h>

struct test_blob {
    char *p;
    size_t n, cap;
};

/* seq_save's write callback: appends n bytes to the blob ctx (fails the test when out of
 * memory); 0. */
int test_blob_write(void *ctx, const void *bytes, size_t n);

#endif
