/* The shipped demo model is found from where the executable runs: an installed
 * prefix's share/splash/demo, or the source tree beside an uninstalled build/; a
 * missing model is refused naming both places; and the file in this tree loads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/modelgen/demo_model.h"
#include "core/model_check.h"
#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static char root[64];

static void make_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void mkdirs(const char *rel)
{
    char path[512], *p;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

static void test_installed_prefix(void **state)
{
    (void)state;
    char exe[256], want[512], out[PATH_MAX];
    struct splash_err err = {{0}};
    mkdirs("usr/bin");
    mkdirs("usr/share/splash/demo");
    snprintf(exe, sizeof exe, "%s/usr/bin/splash", root);
    /* nothing installed yet: both places are named */
    assert_int_equal(splash_demo_model_find(exe, out, sizeof out, &err), SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "/usr/bin/../share/splash/demo/" SPLASH_DEMO_MODEL_FILE));
    assert_non_null(strstr(err.msg, "/usr/bin/../packaging/demo/" SPLASH_DEMO_MODEL_FILE));
    snprintf(want, sizeof want, "%s/usr/share/splash/demo/%s", root, SPLASH_DEMO_MODEL_FILE);
    /* an empty file is not a model */
    make_file(want, "");
    assert_int_equal(splash_demo_model_find(exe, out, sizeof out, &err), SPLASH_ERR_NOT_FOUND);
    make_file(want, "GGUF");
    assert_int_equal(splash_demo_model_find(exe, out, sizeof out, &err), SPLASH_OK);
    assert_string_equal(out, want);
    /* too small an output buffer is refused, not truncated */
    assert_int_equal(splash_demo_model_find(exe, out, 8, &err), SPLASH_ERR_INVALID);
}

static void test_source_tree(void **state)
{
    (void)state;
    char exe[256], want[512], out[PATH_MAX];
    struct splash_err err = {{0}};
    mkdirs("src/build");
    mkdirs("src/packaging/demo");
    snprintf(exe, sizeof exe, "%s/src/build/splash", root);
    snprintf(want, sizeof want, "%s/src/packaging/demo/%s", root, SPLASH_DEMO_MODEL_FILE);
    make_file(want, "GGUF");
    assert_int_equal(splash_demo_model_find(exe, out, sizeof out, &err), SPLASH_OK);
    assert_string_equal(out, want);
    assert_int_equal(splash_demo_model_find("splash", out, sizeof out, &err), SPLASH_ERR_INVALID);
}

/* The model this tree ships (found from build/tests/, as from build/) passes model-check. */
static void test_shipped_model_checks(void **state)
{
    (void)state;
    char exe[PATH_MAX], out[PATH_MAX];
    struct splash_err err = {{0}};
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = 0;
    *strrchr(exe, '/') = 0; /* build/tests/test-demo-model -> build/tests, as build/splash */
    assert_int_equal(splash_demo_model_find(exe, out, sizeof out, &err), SPLASH_OK);
    struct splash_registry *reg = splash_registry_global();
    if (splash_registry_n_records(reg) == 0)
        splash_registry_add_builtins(reg, splash_builtin_plugins);
    struct splash_check_result res;
    enum splash_status st = splash_model_check(reg, out, &res, &err);
    if (st)
        fprintf(stderr, "%s: %s\n", out, err.msg);
    assert_int_equal(st, SPLASH_OK);
    splash_check_result_free(&res);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/splash-test-demo-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installed_prefix),
        cmocka_unit_test(test_source_tree),
        cmocka_unit_test(test_shipped_model_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
