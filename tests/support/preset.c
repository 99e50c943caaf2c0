/* make-model's presets in tests (tests/support/preset.h). */
#include "tests/support/preset.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/registry.h"

struct splash_model_shape *test_preset(const char *name)
{
    static struct splash_model_shape shape;
    struct splash_err err = {{0}};
    if (splash_model_shape_find(splash_registry_global(), NULL, name, &shape, &err))
        fail_msg("preset %s: %s", name, err.msg);
    return &shape;
}
