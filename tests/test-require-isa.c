/* SPLASH_TEST_REQUIRE_ISA=1 (tests/support/kernel_rows.h): a SIMD row or path the CPU cannot
 * run is skipped without it and fails the test with it. The CPU is made to lack every SIMD
 * feature with SPLASH_FORCE_ISA=scalar in a child run of this binary (the features are read
 * once per process), so the result does not depend on the machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "splash/format.h"
#include "splash/host.h"
#include "tests/support/kernel_rows.h"

static const char *self;

/* The child: asks for an AVX2 path and an AVX2 kernel row, and prints what it was told. */
static void child_asks_for_simd(void **state)
{
    (void)state;
    const struct splash_kernel_row row = {SPLASH_CPU_AVX2 | SPLASH_CPU_FMA, "avx2", NULL, NULL};
    const int path = test_cpu_has(SPLASH_CPU_AVX2, "an AVX2 path");
    const int runs = test_row_runs_here(&row);
    printf("child: path %d, row %d\n", path, runs);
}

/* Runs this binary as the child with SPLASH_FORCE_ISA=scalar and SPLASH_TEST_REQUIRE_ISA set
 * to require (NULL: unset); returns its exit status, its output in out. */
static int run_child(const char *require, char *out, size_t size)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        setenv("SPLASH_FORCE_ISA", "scalar", 1);
        if (require)
            setenv("SPLASH_TEST_REQUIRE_ISA", require, 1);
        else
            unsetenv("SPLASH_TEST_REQUIRE_ISA");
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t used = 0;
    ssize_t got;
    while (used + 1 < size && (got = read(fd[0], out + used, size - 1 - used)) > 0)
        used += (size_t)got;
    out[used] = 0;
    close(fd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_missing_simd_is_skipped_by_default(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run_child(NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "child: path 0, row 0"));
    assert_int_equal(run_child("0", out, sizeof out), 0);
    assert_non_null(strstr(out, "child: path 0, row 0"));
}

static void test_missing_simd_fails_when_required(void **state)
{
    (void)state;
    char out[8192];
    assert_int_not_equal(run_child("1", out, sizeof out), 0);
    if (!strstr(out, "an AVX2 path needs CPU features (0x1) this CPU lacks (it has: scalar "
                     "(SPLASH_FORCE_ISA=scalar)); SPLASH_TEST_REQUIRE_ISA=1 forbids skipping it"))
        fail_msg("child output:\n%s", out);
    assert_null(strstr(out, "child: path"));
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 2 && !strcmp(argv[1], "child")) {
        const struct CMUnitTest child[] = {cmocka_unit_test(child_asks_for_simd)};
        return cmocka_run_group_tests(child, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_simd_is_skipped_by_default),
        cmocka_unit_test(test_missing_simd_fails_when_required),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
