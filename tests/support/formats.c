#include "tests/support/formats.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_registry *registry;

int test_formats_setup(void **state)
{
    (void)state;
    registry = splash_registry_create();
    if (!registry)
        return -1;
    splash_registry_add_builtins(registry, splash_builtin_plugins);
    return 0;
}

int test_formats_teardown(void **state)
{
    (void)state;
    splash_registry_destroy(registry);
    return 0;
}

struct splash_registry *test_formats_registry(void)
{
    return registry;
}

const struct splash_format_type *test_format_find(const char *name)
{
    const struct splash_format_type *f = splash_registry_format_by_name(registry, name);
    if (!f)
        fail_msg("format %s is not registered", name);
    return f;
}
