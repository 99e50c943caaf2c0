/* A registry of every builtin plugin for format tests, made by a cmocka group setup. */
#ifndef SPLASH_TEST_FORMATS_H
#define SPLASH_TEST_FORMATS_H

#include "splash/format.h"

struct splash_registry;

/* Group setup and teardown: create and destroy the registry. */
int test_formats_setup(void **state);
int test_formats_teardown(void **state);

struct splash_registry *test_formats_registry(void);
/* The registered format of that name; fails the test when there is none. */
const struct splash_format_type *test_format_find(const char *name);

#endif
