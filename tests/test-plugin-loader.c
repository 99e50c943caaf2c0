/* The plugin loader against deliberately broken plugins: each refusal's exact text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static const char *plugin_path(char *buf, size_t size, const char *name)
{
    const char *build = getenv("SPLASH_BUILD");
    snprintf(buf, size, "%s/tests/plugins/%s.so", build && *build ? build : "build", name);
    return buf;
}

/* Loads one plugin file into a fresh registry and returns the error text. */
static enum splash_status load_one(struct splash_registry *r, const char *name,
                                   struct splash_err *err)
{
    char path[512];
    memset(err, 0, sizeof *err);
    return splash_registry_load_file(r, plugin_path(path, sizeof path, name), err);
}

static void test_loader_accepts_valid_family(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "good_family", &err), SPLASH_OK);
    assert_int_equal(splash_registry_n_families(r), 1);
    assert_string_equal(splash_registry_family(r, 0)->header.name, "loader_test");
    assert_string_equal(splash_registry_family(r, 0)->gguf_architectures[0], "loader-test");
    splash_registry_destroy(r);
}

static void test_loader_refuses_wrong_major(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_major", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_major.so: ABI 2.0, this splash speaks 1.2");
    assert_int_equal(splash_registry_n_families(r), 0);
    assert_string_equal(splash_registry_record(r, 0)->refusal, "ABI 2.0, this splash speaks 1.2");
    splash_registry_destroy(r);
}

static void test_loader_refuses_newer_minor(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_minor", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_minor.so: ABI 1.9, this splash speaks 1.2");
    splash_registry_destroy(r);
}

static void test_loader_refuses_short_descriptor(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    char want[256];
    assert_int_equal(load_one(r, "broken_size", &err), SPLASH_ERR_ABI);
    snprintf(want, sizeof want,
             "plugin broken_size.so: descriptor of %zu bytes, ABI 1.0 needs at least %zu",
             sizeof(struct splash_plugin_header), offsetof(struct splash_family_plugin, seq_fork));
    assert_string_equal(err.msg, want);
    splash_registry_destroy(r);
}

static void test_loader_refuses_missing_symbol(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_nosymbol", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_nosymbol.so: no splash_plugin_entry_v1 symbol");
    splash_registry_destroy(r);
}

static void test_loader_names_future_abi(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_v2", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg,
                        "plugin broken_v2.so: not a v1 plugin (it exports splash_plugin_entry_v2)");
    splash_registry_destroy(r);
}

static void test_loader_refuses_duplicate_name(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    char first[512], want[700];
    assert_int_equal(load_one(r, "good_family", &err), SPLASH_OK);
    assert_int_equal(load_one(r, "duplicate_name", &err), SPLASH_ERR_INVALID);
    snprintf(want, sizeof want,
             "plugin duplicate_name.so: duplicate plugin name \"loader_test\" (already loaded from %s)",
             plugin_path(first, sizeof first, "good_family"));
    assert_string_equal(err.msg, want);
    assert_int_equal(splash_registry_n_families(r), 1);
    splash_registry_destroy(r);
}

static void test_loader_refuses_missing_file(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(splash_registry_load_file(r, "/nonexistent/libsplash-x.so", &err),
                     SPLASH_ERR_IO);
    assert_non_null(strstr(err.msg, "plugin libsplash-x.so: cannot load: "));
    splash_registry_destroy(r);
}

/* Every plugin the build makes registers statically with unique type names. */
static void test_builtins_register_without_refusal(void **state)
{
    struct splash_registry *r = splash_registry_create();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    for (size_t i = 0; i < splash_registry_n_records(r); i++) {
        const struct splash_plugin_record *rec = splash_registry_record(r, i);
        if (rec->refusal[0])
            fail_msg("builtin %s refused: %s", rec->name, rec->refusal);
    }
    assert_true(splash_registry_n_formats(r) >= 1);
    /* every format type's table ends in a scalar reference row */
    for (size_t i = 0; i < splash_registry_n_formats(r); i++) {
        const struct splash_format_plugin *f = splash_registry_format(r, i);
        for (uint32_t t = 0; t < f->n_types; t++) {
            const struct splash_format_type *ft = f->types[t];
            if (ft->flags & SPLASH_FORMAT_ACTIVATION_ONLY)
                continue;
            assert_int_equal(ft->rows[ft->n_rows - 1].cpu_requires, 0);
        }
    }
    splash_registry_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_accepts_valid_family),
        cmocka_unit_test(test_loader_refuses_wrong_major),
        cmocka_unit_test(test_loader_refuses_newer_minor),
        cmocka_unit_test(test_loader_refuses_short_descriptor),
        cmocka_unit_test(test_loader_refuses_missing_symbol),
        cmocka_unit_test(test_loader_names_future_abi),
        cmocka_unit_test(test_loader_refuses_duplicate_name),
        cmocka_unit_test(test_loader_refuses_missing_file),
        cmocka_unit_test(test_builtins_register_without_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
