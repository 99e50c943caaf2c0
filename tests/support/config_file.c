#include "tests/support/config_file.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/meta.h"

struct splash_meta *test_config_open(struct test_config *c, const char *tmpl, const char *json)
{
    struct splash_err err = {{0}};
    snprintf(c->dir, sizeof c->dir, "%s", tmpl);
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->path, sizeof c->path, "%s/config.json", c->dir);
    FILE *f = fopen(c->path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    assert_int_equal(splash_meta_open_config(c->path, &c->meta, &err), SPLASH_OK);
    return c->meta;
}

void test_config_close(struct test_config *c)
{
    splash_meta_close(c->meta);
    remove(c->path);
    rmdir(c->dir);
}
