/* Where plugins are searched: decided by where the executable is, never a compiled-in
 * build directory; world-writable places are refused. */
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

#include "core/plugin_search.h"
#include "core/registry.h"

/* A scratch tree: <root>/usr/bin (an installed layout) and <root>/build (a build tree). */
static char root[PATH_MAX];

static int make_tree(void **state)
{
    snprintf(root, sizeof root, "/tmp/splash-plugin-search-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    char p[PATH_MAX + 64];
    const char *dirs[] = {"usr", "usr/bin", "usr/lib", "usr/lib/splash", "build", "build/lib",
                          "build/lib/splash", "open"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        if (mkdir(p, 0755) != 0)
            return -1;
    }
    snprintf(p, sizeof p, "%s/build/" SPLASH_BUILD_TREE_MARK, root);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    fclose(f);
    snprintf(p, sizeof p, "%s/open", root);
    return chmod(p, 0777);
}

static int remove_tree(void **state)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_installed_binary_searches_its_own_lib_only(void **state)
{
    char exe[PATH_MAX + 32], want[PATH_MAX + 32];
    char dirs[8][PATH_MAX];
    snprintf(exe, sizeof exe, "%s/usr/bin/splash", root);
    size_t n = splash_plugin_search_dirs(exe, NULL, 0, NULL, dirs, 8);
    assert_int_equal(n, 1);
    snprintf(want, sizeof want, "%s/usr/bin/../lib/splash", root);
    assert_string_equal(dirs[0], want);
}

static void test_build_tree_binary_searches_the_build_tree(void **state)
{
    char exe[PATH_MAX + 32], want[PATH_MAX + 32];
    char dirs[8][PATH_MAX];
    snprintf(exe, sizeof exe, "%s/build/splash", root);
    size_t n = splash_plugin_search_dirs(exe, NULL, 0, NULL, dirs, 8);
    assert_int_equal(n, 1);
    snprintf(want, sizeof want, "%s/build/lib/splash", root);
    assert_string_equal(dirs[0], want);
}

static void test_options_and_environment_come_first_in_order(void **state)
{
    char exe[PATH_MAX + 32], want[PATH_MAX + 32];
    char dirs[8][PATH_MAX];
    const char *extra[] = {"/opt/a", "/opt/b"};
    snprintf(exe, sizeof exe, "%s/usr/bin/splash", root);
    size_t n = splash_plugin_search_dirs(exe, extra, 2, "/env/one::/env/two:", dirs, 8);
    assert_int_equal(n, 5);
    assert_string_equal(dirs[0], "/opt/a");
    assert_string_equal(dirs[1], "/opt/b");
    assert_string_equal(dirs[2], "/env/one");
    assert_string_equal(dirs[3], "/env/two");
    snprintf(want, sizeof want, "%s/usr/bin/../lib/splash", root);
    assert_string_equal(dirs[4], want);
    /* no executable path: the explicit places alone */
    assert_int_equal(splash_plugin_search_dirs(NULL, extra, 2, NULL, dirs, 8), 2);
    /* a full list stops at max */
    assert_int_equal(splash_plugin_search_dirs(exe, extra, 2, "/e1:/e2:/e3", dirs, 3), 3);
}

static void test_world_writable_directory_is_refused(void **state)
{
    char open_dir[PATH_MAX + 16], fine_dir[PATH_MAX + 16];
    snprintf(open_dir, sizeof open_dir, "%s/open", root);
    snprintf(fine_dir, sizeof fine_dir, "%s/usr/lib/splash", root);
    assert_true(splash_path_world_writable(open_dir));
    assert_false(splash_path_world_writable(fine_dir));

    struct splash_registry *r = splash_registry_create();
    const char *extra[] = {open_dir};
    splash_registry_load_default(r, extra, 1);
    int refused = 0;
    for (size_t i = 0; i < splash_registry_n_records(r); i++) {
        const struct splash_plugin_record *rec = splash_registry_record(r, i);
        if (!strcmp(rec->origin, open_dir)) {
            assert_string_equal(rec->refusal, "directory is world-writable (chmod o-w it): not searched");
            refused = 1;
        }
    }
    assert_true(refused);
    splash_registry_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installed_binary_searches_its_own_lib_only),
        cmocka_unit_test(test_build_tree_binary_searches_the_build_tree),
        cmocka_unit_test(test_options_and_environment_come_first_in_order),
        cmocka_unit_test(test_world_writable_directory_is_refused),
    };
    return cmocka_run_group_tests(tests, make_tree, remove_tree);
}
