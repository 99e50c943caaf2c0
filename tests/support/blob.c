/* A growing byte buffer (tests/support/blob.h). */
#include "tests/support/blob.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

int test_blob_write(void *ctx, const void *bytes, size_t n)
{
    struct test_blob *b = ctx;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, bytes, n);
    b->n += n;
    return 0;
}
