/* The matrix products' fast activation quantizers (kernels/matmul_act.h: AVX-512 on x86-64,
 * NEON on arm64) give the activation format's reference from_float bytes. Kept apart from
 * test-kernels (whose thread-pool checks crawl under emulation) so `make test-arm64` runs it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"
#include "core/registry.h"
#include "kernels/matmul_act.h"
#include "splash/plugin.h"
#include "tests/support/kernel_rows.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *rand_vec(int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

extern const splash_plugin_entry_fn splash_builtin_plugins[];

/* The architecture's fast Q8_K quantizer (kernels/matmul_act.h) and what it needs. */
#if defined(__x86_64__)
#define ACT_Q8K_FAST splash_act_q8k_avx512
#define ACT_Q8K_CPU                                                                                \
    (SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL | SPLASH_CPU_AVX512DQ)
#elif defined(__aarch64__)
#define ACT_Q8K_FAST splash_act_q8k_neon
#define ACT_Q8K_CPU SPLASH_CPU_NEON
#endif

static void test_matmul_act_q8k_matches_format(void **state)
{
#if defined(ACT_Q8K_FAST)
    if (!test_cpu_has(ACT_Q8K_CPU, "the fast Q8_K quantizer")) {
        printf("  not on this CPU: skipped\n");
        return;
    }
    struct splash_registry *r = splash_registry_global();
    if (!splash_registry_format_by_name(r, "Q8_K"))
        splash_registry_add_builtins(r, splash_builtin_plugins);
    const struct splash_format_type *f = splash_registry_format_by_name(r, "Q8_K");
    assert_non_null(f);
    assert_int_equal(f->block_bytes, MATMUL_Q8K_BYTES);
    const int64_t n = 256 * 6;
    float *x = rand_vec(n, 3);
    /* block 1 all zero, block 2 with a tie of +max and -max (the first one wins), block 3
     * with tiny values, block 4 with values that round at .5 */
    memset(x + 256, 0, 256 * sizeof *x);
    x[512 + 7] = -5.0f, x[512 + 9] = 5.0f;
    for (int i = 0; i < 256; i++)
        x[768 + i] *= 1e-30f;
    for (int i = 0; i < 256; i++)
        x[1024 + i] = (float)(i - 128) * 0.5f;
    unsigned char *a = malloc((size_t)(n / 256) * MATMUL_Q8K_BYTES),
                  *b = malloc((size_t)(n / 256) * MATMUL_Q8K_BYTES);
    f->from_float(x, a, n, NULL);
    ACT_Q8K_FAST(x, b, n);
    for (int64_t i = 0; i < (n / 256) * MATMUL_Q8K_BYTES; i++)
        if (a[i] != b[i])
            fail_msg("Q8_K byte %lld (block %lld): %u, the format's %u", (long long)i,
                     (long long)(i / MATMUL_Q8K_BYTES), b[i], a[i]);
    free(x), free(a), free(b);
#endif
}

#if defined(__aarch64__)
/* The NEON Q8_0 quantizer gives the format's from_float bytes: random rows, an all-zero
 * block, a tie of +amax and -amax, tiny values, values that round at .5 (away from zero). */
static void test_matmul_act_q8_0_neon_matches_format(void **state)
{
    (void)state;
    if (!test_cpu_has(SPLASH_CPU_NEON, "splash_act_q8_0_neon"))
        return;
    struct splash_registry *r = splash_registry_global();
    if (!splash_registry_format_by_name(r, "Q8_0"))
        splash_registry_add_builtins(r, splash_builtin_plugins);
    const struct splash_format_type *f = splash_registry_format_by_name(r, "Q8_0");
    assert_non_null(f);
    assert_int_equal(f->block_bytes, MATMUL_Q80_BYTES);
    const int64_t n = 32 * 40;
    float *x = rand_vec(n, 5);
    memset(x + 32, 0, 32 * sizeof *x);
    x[64 + 3] = -5.0f, x[64 + 9] = 5.0f;
    for (int i = 0; i < 32; i++)
        x[96 + i] *= 1e-30f;
    for (int i = 0; i < 32; i++)
        x[128 + i] = (float)(i - 16) * 0.5f + (i == 31 ? 0.5f : 0.0f); /* amax 8: d 8/127 */
    for (int i = 0; i < 32; i++) /* amax 127: d = id = 1, so x * id = k + .5, ties */
        x[160 + i] = i == 31 ? 127.0f : (float)(i - 16) + 0.5f;
    unsigned char *a = malloc((size_t)(n / 32) * MATMUL_Q80_BYTES),
                  *b = malloc((size_t)(n / 32) * MATMUL_Q80_BYTES);
    f->from_float(x, a, n, NULL);
    splash_act_q8_0_neon(x, b, n);
    for (int64_t i = 0; i < (n / 32) * MATMUL_Q80_BYTES; i++)
        if (a[i] != b[i])
            fail_msg("Q8_0 byte %lld (block %lld): %u, the format's %u", (long long)i,
                     (long long)(i / MATMUL_Q80_BYTES), b[i], a[i]);
    free(x), free(a), free(b);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_act_q8k_matches_format),
#if defined(__aarch64__)
        cmocka_unit_test(test_matmul_act_q8_0_neon_matches_format),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
