/* Where tests find ../shared/testdata (SPLASH_TESTDATA overrides). */
#ifndef SPLASH_TEST_TESTDATA_H
#define SPLASH_TEST_TESTDATA_H

#include <stddef.h>

/* The testdata directory: $SPLASH_TESTDATA, else ../shared/testdata from the repo root. */
const char *test_testdata_dir(void);
/* Joins the testdata directory and rel into buf; returns buf. */
/* rel under the testdata directory; an absolute path (a file the test wrote) as it is */
char *test_testdata_path(char *buf, size_t size, const char *rel);
/* Reads a whole file into a malloc'ed buffer (caller frees); NULL on error. */
void *test_read_file(const char *path, size_t *size);

#endif
