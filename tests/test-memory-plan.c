/* Memory budget (MemAvailable, cgroup limit, --max-memory) and the context plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/memory_plan.h"
#include "core/model_load.h"
#include "core/registry.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define GIB (1ull << 30)

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/splash-mem-XXXXXX");
    assert_non_null(mkdtemp(dir));
    write_file("meminfo", "MemTotal:       25000000 kB\nMemFree:  100 kB\nMemAvailable:   20971520 kB\n");
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void test_budget_takes_the_tighter_bound(void **state)
{
    char meminfo[128];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    struct splash_memory_budget b;
    struct splash_err err;
    /* no cgroup files: MemAvailable (20 GiB) less the 1 GiB margin */
    assert_int_equal(splash_memory_budget_read(0, meminfo, dir, &b, &err), SPLASH_OK);
    assert_true(b.usable == 19 * GIB);
    assert_string_equal(b.bound, "MemAvailable");
    /* a cgroup limit of 8 GiB with 2 GiB used leaves 6, less the margin */
    write_file("memory.max", "8589934592\n");
    write_file("memory.current", "2147483648\n");
    assert_int_equal(splash_memory_budget_read(0, meminfo, dir, &b, &err), SPLASH_OK);
    assert_true(b.usable == 5 * GIB);
    assert_string_equal(b.bound, "cgroup memory.max");
    /* --max-memory only lowers */
    assert_int_equal(splash_memory_budget_read(2 * GIB, meminfo, dir, &b, &err), SPLASH_OK);
    assert_true(b.usable == 2 * GIB);
    assert_string_equal(b.bound, "--max-memory");
    assert_int_equal(splash_memory_budget_read(100 * GIB, meminfo, dir, &b, &err), SPLASH_OK);
    assert_true(b.usable == 5 * GIB);
    write_file("memory.max", "max\n");
    assert_int_equal(splash_memory_budget_read(0, meminfo, dir, &b, &err), SPLASH_OK);
    assert_true(b.usable == 19 * GIB);
}

/* The process's own cgroup and its ancestors (a systemd unit's MemoryMax=, a container's
 * group), as /proc/self/cgroup names it, not only the hierarchy's root. */
static void test_budget_reads_the_process_group(void **state)
{
    char meminfo[128], self[128], sub[192];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    snprintf(self, sizeof self, "%s/self-cgroup", dir);
    snprintf(sub, sizeof sub, "%s/system.slice/splash.service", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s/memory/lxc/box", sub, dir);
    assert_int_equal(system(cmd), 0);
    write_file("memory.max", "max\n");
    write_file("system.slice/splash.service/memory.max", "4294967296\n");
    write_file("system.slice/splash.service/memory.current", "1073741824\n");
    write_file("self-cgroup", "12:cpu,cpuacct:/system.slice/splash.service\n"
                              "0::/system.slice/splash.service\n");
    struct splash_memory_budget b;
    struct splash_err err;
    /* the unit's 4 GiB with 1 GiB used: 3 GiB, less the margin */
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 3 * GIB);
    assert_true(b.usable == 2 * GIB);
    assert_string_equal(b.bound, "cgroup memory.max");
    /* a parent's tighter limit counts */
    write_file("system.slice/memory.max", "3221225472\n");
    write_file("system.slice/memory.current", "1610612736\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 1610612736ull);
    /* cgroup v1: the memory controller's group */
    write_file("self-cgroup", "5:memory:/lxc/box\n3:cpu:/\n0::/\n");
    write_file("memory/lxc/box/memory.limit_in_bytes", "2147483648\n");
    write_file("memory/lxc/box/memory.usage_in_bytes", "536870912\n");
    write_file("memory/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 1610612736ull);
    assert_string_equal(b.bound, "cgroup memory.max");
    /* a group with no limit anywhere: MemAvailable */
    write_file("memory/lxc/box/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == UINT64_MAX);
    assert_string_equal(b.bound, "MemAvailable");
}

/* A group's usage counts the page cache its processes read or wrote (a model file
 * downloaded or loaded in a container): the inactive part, which the kernel reclaims
 * before it refuses memory, is room, as MemAvailable counts it. */
static void test_budget_leaves_out_inactive_cache(void **state)
{
    char meminfo[128], self[128];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    snprintf(self, sizeof self, "%s/self-cgroup", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/box %s/memory/lxc/box", dir, dir);
    assert_int_equal(system(cmd), 0);
    struct splash_memory_budget b;
    struct splash_err err;
    /* v2: 8 GiB, 6 used of which 4 inactive file pages (inactive_file is recursive) */
    write_file("self-cgroup", "0::/box\n");
    write_file("box/memory.max", "8589934592\n");
    write_file("box/memory.current", "6442450944\n");
    write_file("box/memory.stat", "anon 1073741824\nfile 5368709120\nactive_file 1073741824\n"
                                  "inactive_file 4294967296\nunevictable 0\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 6 * GIB);
    assert_true(b.usable == 5 * GIB);
    assert_string_equal(b.bound, "cgroup memory.max");
    /* v1: the hierarchy's total_inactive_file, not the group's own inactive_file */
    write_file("self-cgroup", "5:memory:/lxc/box\n0::/\n");
    write_file("memory/lxc/box/memory.limit_in_bytes", "4294967296\n");
    write_file("memory/lxc/box/memory.usage_in_bytes", "3221225472\n");
    write_file("memory/lxc/box/memory.stat", "cache 2147483648\ninactive_file 536870912\n"
                                             "total_inactive_file 2147483648\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 3 * GIB);
    /* a stat larger than the usage it was sampled beside leaves the whole limit */
    write_file("memory/lxc/box/memory.usage_in_bytes", "1073741824\n");
    assert_int_equal(splash_memory_budget_read_at(0, meminfo, dir, self, &b, &err), SPLASH_OK);
    assert_true(b.cgroup_room == 4 * GIB);
}

static void test_plan_context_and_yarn(void **state)
{
    struct splash_memory_budget b = {.usable = 4 * GIB, .bound = "MemAvailable"};
    struct splash_model_info info = {.n_ctx_train = 262144, .weight_bytes = GIB,
                                     .kv_bytes_per_token = 4096, .state_bytes_per_seq = 16 << 20};
    struct splash_memory_plan p;
    struct splash_err err;
    /* auto: the native window */
    assert_int_equal(splash_memory_plan_make(&b, &info, 0, 0, 4, &p, &err), SPLASH_OK);
    assert_int_equal(p.context, 262144);
    assert_true(p.yarn_factor == 1.0);
    /* past the native window YaRN scales by context / window */
    assert_int_equal(splash_memory_plan_make(&b, &info, 524288, 0, 1, &p, &err), SPLASH_OK);
    assert_true(p.yarn_factor == 2.0);
    /* past the model's limit: refused naming the flag */
    assert_int_not_equal(splash_memory_plan_make(&b, &info, 2000000, 1010000, 1, &p, &err), SPLASH_OK);
    assert_string_equal(err.msg, "--max-context: 2000000 tokens is past this model's limit of 1010000");
    /* a context whose KV does not fit: refused with what it needs */
    struct splash_memory_budget small = {.usable = GIB + (64 << 20), .bound = "--max-memory"};
    assert_int_not_equal(splash_memory_plan_make(&small, &info, 262144, 0, 1, &p, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "--max-context: 262144 tokens need 1.00 GiB of KV cache"));
    assert_non_null(strstr(err.msg, "(--max-memory)"));
    /* it names the most that fits, in tokens */
    assert_non_null(strstr(err.msg, "at most 12288 tokens fit"));
    /* auto shrinks to what fits */
    assert_int_equal(splash_memory_plan_make(&small, &info, 0, 0, 1, &p, &err), SPLASH_OK);
    assert_int_equal(p.context, (int64_t)((48ull << 20) / 4096));
    /* weights alone too big */
    struct splash_memory_budget tiny = {.usable = GIB / 2, .bound = "MemAvailable"};
    assert_int_not_equal(splash_memory_plan_make(&tiny, &info, 0, 0, 1, &p, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "the weights (1.00 GiB)"));
}

/* A restarted engine whose budget shrank serves what it holds of the asked context. */
static void test_restart_serves_less(void **state)
{
    struct splash_model_info info = {.n_ctx_train = 262144, .weight_bytes = GIB,
                                     .kv_bytes_per_token = 4096, .state_bytes_per_seq = 16 << 20};
    struct splash_memory_budget b = {.usable = 4 * GIB, .bound = "MemAvailable"};
    struct splash_memory_plan p;
    struct splash_err err;
    /* still fits: the context asked for */
    assert_int_equal(splash_memory_plan_fit(&b, &info, 100000, 0, 1, &p, &err), SPLASH_OK);
    assert_int_equal(p.context, 100000);
    /* the budget shrank: as much of it as fits, not a refusal */
    struct splash_memory_budget small = {.usable = GIB + (64 << 20), .bound = "MemAvailable"};
    assert_int_equal(splash_memory_plan_fit(&small, &info, 100000, 0, 1, &p, &err), SPLASH_OK);
    assert_int_equal(p.context, 12288);
    assert_true(p.yarn_factor == 1.0);
    /* too little even for 256 tokens: refused as a first start would be */
    struct splash_memory_budget none = {.usable = GIB + (16 << 20) + 4096 * 100, .bound = "MemAvailable"};
    assert_int_not_equal(splash_memory_plan_fit(&none, &info, 100000, 0, 1, &p, &err), SPLASH_OK);
}

/* The context ceiling is the family's (model_info n_ctx_max): the Qwen families report the
 * 1,010,000 tokens Qwen validates, not four times the native window (1,048,576 at 256K). */
static void test_ceiling_is_the_familys(void **state)
{
    struct splash_memory_budget b = {.usable = 64 * GIB, .bound = "MemAvailable"};
    struct splash_model_info info = {.n_ctx_train = 262144, .weight_bytes = GIB,
                                     .kv_bytes_per_token = 4096, .n_ctx_max = 1010000};
    struct splash_memory_plan p;
    struct splash_err err;
    assert_int_equal(splash_memory_plan_make(&b, &info, 1010000, 0, 1, &p, &err), SPLASH_OK);
    assert_int_not_equal(splash_memory_plan_make(&b, &info, 1048576, 0, 1, &p, &err), SPLASH_OK);
    assert_string_equal(err.msg, "--max-context: 1048576 tokens is past this model's limit of 1010000");
    /* a plugin that reports no ceiling: four times the window */
    info.n_ctx_max = 0;
    assert_int_equal(splash_memory_plan_make(&b, &info, 1048576, 0, 1, &p, &err), SPLASH_OK);
    /* what the Qwen families report */
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    const char *models[] = {"models/qwen35-tiny-Q8_0.gguf", "models/qwen35moe-tiny-Q4_K_M.gguf"};
    for (int i = 0; i < 2; i++) {
        char path[512];
        struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8};
        struct splash_loaded_model *lm;
        assert_int_equal(splash_model_load(r, test_testdata_path(path, sizeof path, models[i]),
                                           &opts, 1, &lm, &err),
                         SPLASH_OK);
        assert_int_equal(lm->info.n_ctx_max, 1010000);
        splash_model_unload(lm);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_serves_less),
        cmocka_unit_test(test_budget_takes_the_tighter_bound),
        cmocka_unit_test(test_budget_reads_the_process_group),
        cmocka_unit_test(test_budget_leaves_out_inactive_cache),
        cmocka_unit_test(test_plan_context_and_yarn),
        cmocka_unit_test(test_ceiling_is_the_familys),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
