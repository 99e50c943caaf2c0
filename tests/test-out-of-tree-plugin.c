/* A third party's plugin, built out of tree from `make install`ed headers and
 * `pkg-config splash-plugin` only, is picked up by `splash plugins --plugin-dir`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(const char *cmd, char *out, size_t size)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    return pclose(p);
}

static void test_example_plugin_builds_from_installed_headers(void **state)
{
    char tmp[] = "/tmp/splash-oot-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char cmd[4096], out[16384];
    /* install into a private prefix */
    snprintf(cmd, sizeof cmd, "make -s install PREFIX=%s/prefix >%s/install.log 2>&1", tmp, tmp);
    assert_int_equal(system(cmd), 0);
    /* build the example with nothing but the installed headers and pkg-config */
    snprintf(cmd, sizeof cmd,
             "cp -r examples/plugin-family-hello %s/hello && cd %s/hello && "
             "env -u CPATH -u C_INCLUDE_PATH PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig "
             "make -s CFLAGS='-O2 -Wall -Wextra -Werror -std=c11' 2>&1",
             tmp, tmp, tmp);
    int rc = run(cmd, out, sizeof out);
    if (rc != 0)
        fail_msg("example build failed: %s", out);
    /* the installed binary lists it from --plugin-dir */
    snprintf(cmd, sizeof cmd, "%s/prefix/bin/splash plugins --plugin-dir %s/hello 2>&1", tmp, tmp);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    if (!strstr(out, "hello          family 0.1"))
        fail_msg("hello plugin not listed:\n%s", out);
    assert_non_null(strstr(out, "gguf architectures: hello"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_plugin_builds_from_installed_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
