/* Elastic expert chunks' policy (server/engine/expert_memory_elastic.c): memory samples
 * read from PSI and meminfo files in their kernel formats, and the engine's ticks on the
 * tiny MoE's automatic store under a clock file: a chunk given back per second while
 * memory is short, never below the floor; none taken back before 30 s of calm, then one
 * per 30 s; a release gives every elastic chunk back and none returns until requests run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/family.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "server/engine/expert_memory_elastic.h"
#include "splash/family.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static char dir[64];
static char psi[128], meminfo[128], clockf[128];
static int lines;

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void put_psi(double some, double full)
{
    char t[256];
    snprintf(t, sizeof t,
             "some avg10=%.2f avg60=0.00 avg300=0.00 total=1000\n"
             "full avg10=%.2f avg60=0.00 avg300=0.00 total=500\n",
             some, full);
    put(psi, t);
}

static void put_available(unsigned long long kb)
{
    char t[256];
    snprintf(t, sizeof t, "MemTotal:       33554432 kB\nMemFree:  1000 kB\nMemAvailable:   %llu kB\n",
             kb);
    put(meminfo, t);
}

static void put_clock(double t)
{
    char s[64];
    snprintf(s, sizeof s, "%.3f\n", t);
    put(clockf, s);
}

static void count_line(void *ctx, const char *line)
{
    lines++;
    snprintf(ctx, 384, "%s", line);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/splash-elastic-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(psi, sizeof psi, "%s/psi", dir);
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    snprintf(clockf, sizeof clockf, "%s/clock", dir);
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void test_samples_read_the_kernel_formats(void **state)
{
    struct splash_memory_sample m;
    put_psi(0, 0);
    put_available(16ull << 20);
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_true(m.psi && !m.short_of_memory);
    assert_true(m.room == 16ull << 30);
    put_psi(12.5, 0.5);
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_true(m.short_of_memory && m.some10 == 12.5 && m.full10 == 0.5);
    assert_string_equal(m.why, "memory pressure: PSI some avg10 12.50%");
    put_psi(3, 2.25);
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_string_equal(m.why, "memory pressure: PSI full avg10 2.25%");
    /* under the thresholds: calm */
    put_psi(9.99, 1.99);
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_false(m.short_of_memory);
    /* the room under the 1 GiB margin */
    put_available(512 * 1024);
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_true(m.short_of_memory);
    assert_non_null(strstr(m.why, "512.0 MiB free (MemAvailable), under its 1 GiB margin"));
    /* a kernel without PSI, or a file cut short: the room alone */
    put_available(16ull << 20);
    put(psi, "some avg10=50.00 avg60=0.00 avg300=0.00 total=1\n");
    assert_int_equal(splash_memory_sample_read(psi, meminfo, &m), 0);
    assert_true(!m.psi && !m.short_of_memory);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none", dir);
    assert_int_equal(splash_memory_sample_read(missing, meminfo, &m), 0);
    assert_true(!m.psi && !m.short_of_memory);
    /* no MemAvailable: no sample */
    assert_int_equal(splash_memory_sample_read(psi, missing, &m), -1);
}

static int tick(struct splash_expert_elastic *x, double t, int busy, char *line)
{
    put_clock(t);
    return splash_expert_elastic_tick(x, busy, count_line, line);
}

static void test_ticks_on_an_automatic_store(void **state)
{
    char path[512], line[384] = "";
    test_testdata_path(path, sizeof path, "models/qwen35moe-tiny-Q4_K_M.gguf");
    struct splash_pool *pool = splash_pool_create(1);
    struct splash_model_opts mo = {.pool = pool, .kv_format = SPLASH_KV_BF16,
                                   .expert_memory = 3u << 20, .expert_elastic = 1};
    struct splash_loaded_model *lm;
    struct splash_err err = {{0}};
    if (splash_model_load(splash_registry_global(), path, &mo, 1, &lm, &err))
        fail_msg("%s", err.msg);
    struct splash_expert_elastic x;
    splash_expert_elastic_init(&x, lm->family, lm->model);
    assert_true(x.on);
    x.psi_path = psi;
    x.meminfo_path = meminfo;
    x.clock_path = clockf;
    struct splash_expert_stats s;
    splash_family_expert_stats(lm->family, lm->model, &s);
    int32_t floor_chunks = s.chunks, elastic = s.cap_chunks - s.chunks;
    assert_true(elastic >= 1);
    /* the start: no room beside the margin takes nothing; room takes them all */
    put_psi(0, 0);
    put_clock(0);
    put_available(1 << 20);
    assert_int_equal(splash_expert_elastic_start(&x, count_line, line), 0);
    put_available(16ull << 20);
    assert_int_equal(splash_expert_elastic_start(&x, count_line, line), elastic);
    assert_non_null(strstr(line, "Expert store took back a chunk of"));
    splash_family_expert_stats(lm->family, lm->model, &s);
    assert_int_equal(s.chunks, s.cap_chunks);
    /* short of memory: a chunk a second, down to the floor */
    put_psi(40, 0);
    int gave = 0;
    for (int t = 1; t <= elastic + 2; t++) {
        gave += tick(&x, t, 1, line) == -1;
        assert_int_equal(tick(&x, t + 0.5, 1, line), 0); /* one sample a second */
    }
    assert_int_equal(gave, elastic);
    assert_non_null(strstr(line, "gave back a chunk of"));
    assert_non_null(strstr(line, "(memory pressure: PSI some avg10 40.00%)"));
    splash_family_expert_stats(lm->family, lm->model, &s);
    assert_int_equal(s.chunks, floor_chunks);
    assert_int_equal(s.shrinks, (uint64_t)elastic);
    /* the last shortage at t = elastic + 2: nothing back before 30 s of calm */
    double last = elastic + 2;
    put_psi(0, 0);
    assert_int_equal(tick(&x, last + 29, 0, line), 0);
    assert_int_equal(tick(&x, last + 30, 0, line), 1);
    assert_non_null(strstr(line, "took back a chunk of"));
    /* the next try waits 30 s after this one */
    assert_int_equal(tick(&x, last + 45, 0, line), 0);
    /* a chunk that the room does not hold beside the margin stays out, and that try
     * counts too */
    if (elastic > 1) {
        put_available((1 << 20) + 1);
        assert_int_equal(tick(&x, last + 60, 0, line), 0);
        put_available(16ull << 20);
        assert_int_equal(tick(&x, last + 75, 0, line), 0);
        assert_int_equal(tick(&x, last + 90, 0, line), 1);
        last += 60;
    }
    /* a release gives every elastic chunk back; none returns while nothing runs */
    put_clock(last + 100);
    assert_true(splash_expert_elastic_release(&x, count_line, line) > 0);
    assert_non_null(strstr(line, "(the weights are released)"));
    splash_family_expert_stats(lm->family, lm->model, &s);
    assert_int_equal(s.chunks, floor_chunks);
    assert_int_equal(tick(&x, last + 200, 0, line), 0);
    assert_int_equal(tick(&x, last + 201, 1, line), 1);
    splash_model_unload(lm);
    splash_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_read_the_kernel_formats),
        cmocka_unit_test(test_ticks_on_an_automatic_store),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
