/* include/splash/vec_exp.h, the one e^x of every SIMD unit (kernels, families): both widths
 * within 2 ulp of expf over their ranges, equal to each other bit for bit where both
 * clamp nothing, and saturating as documented (e^-87 or 0 below, e^88 / e^89 above). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "splash/host.h"
#include "tests/support/kernel_rows.h"

#if defined(__x86_64__)
void test_exp256(const float *x, int64_t n, float *y);
void test_exp512(const float *x, int64_t n, float *y);
#endif

enum { N = 4096 };

/* x from lo to hi in N steps, with the exact points the clamps and rounding turn on */
static void grid(float *x, float lo, float hi)
{
    for (int i = 0; i < N; i++)
        x[i] = lo + (hi - lo) * (float)i / (float)(N - 1);
    const float edges[] = {0.0f, -0.0f, 0.34657359f, -0.34657359f, 1.0f, -1.0f, 88.0f, -87.0f};
    memcpy(x, edges, sizeof edges);
}

/* the distance in units of the last place between two positive floats */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void check_against_expf(const char *isa, const float *x, const float *y)
{
    for (int i = 0; i < N; i++) {
        float want = expf(x[i]);
        if (ulps(y[i], want) > 2)
            fail_msg("%s: e^%.9g is %.9g, expf %.9g", isa, (double)x[i], (double)y[i],
                     (double)want);
    }
}

static void test_exp_matches_expf(void **state)
{
    (void)state;
#if defined(__x86_64__)
    static float x[N], y256[N], y512[N];
    int has256 = test_cpu_has(SPLASH_CPU_AVX2 | SPLASH_CPU_FMA, "splash_exp256");
    int has512 = test_cpu_has(SPLASH_CPU_AVX512F, "splash_exp512");
    grid(x, -87.0f, 88.0f);
    if (has256) {
        test_exp256(x, N, y256);
        check_against_expf("avx2", x, y256);
    }
    if (has512) {
        test_exp512(x, N, y512);
        check_against_expf("avx512", x, y512);
    }
    if (has256 && has512)
        for (int i = 0; i < N; i++)
            if (memcmp(&y256[i], &y512[i], sizeof(float)))
                fail_msg("e^%.9g: avx2 %.9g, avx512 %.9g", (double)x[i], (double)y256[i],
                         (double)y512[i]);
    /* the clamps: past them the value of the end */
    float far[16] = {-200, -120, -104, -100, -90, -87.5f, 88.5f, 89, 90, 100};
    if (has256) {
        test_exp256(far, 8, y256);
        for (int i = 0; i < 6; i++)
            assert_true(y256[i] == y256[5] && y256[i] > 0);
        assert_true(y256[6] == y256[7]);
    }
    if (has512) {
        test_exp512(far, 16, y512);
        assert_true(y512[0] == y512[1] && y512[1] == y512[2]);
        assert_true(y512[7] == y512[8] && y512[8] == y512[9]);
        for (int i = 3; i < 7; i++) /* within the wider clamps: still e^x, if subnormal */
            assert_true(fabsf(y512[i] - expf(far[i])) <= 1e-6f * expf(far[i]) + 1e-44f);
    }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_matches_expf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
