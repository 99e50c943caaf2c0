#include "tests/support/testdata.h"

#include <stdio.h>
#include <stdlib.h>

const char *test_testdata_dir(void)
{
    const char *env = getenv("SPLASH_TESTDATA");
    return env && *env ? env : "../shared/testdata";
}

char *test_testdata_path(char *buf, size_t size, const char *rel)
{
    if (rel[0] == '/') /* a file the test wrote */
        snprintf(buf, size, "%s", rel);
    else
        snprintf(buf, size, "%s/%s", test_testdata_dir(), rel);
    return buf;
}

void *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (size)
            *size = (size_t)n;
    }
    return buf;
}
