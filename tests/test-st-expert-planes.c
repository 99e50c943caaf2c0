/* Streamed experts of an imported MLX checkpoint, their reads: each stacked switch_mlp
 * matrix's planes located in the shard, and every expert read from there (pread) and
 * imported on its own equal byte for byte to its slice of the whole import; tensors that
 * are not such experts, a header copy and a shard cut short are refused naming them; a
 * load's open (SPLASH_ST_DEFER_EXPERTS) imports no stack until one is realized. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/import_mem.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/st_target.h"
#include "splash/format.h"
#include "tests/support/st_write.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define MOE "safetensors/qwen35moe-tiny-mlx-4bit"
#define N_LAYERS 4

static const char *const exps[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight",
                                    "ffn_down_exps.weight"};

static int setup(void **state)
{
    (void)state;
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    return 0;
}

static struct splash_meta *open_moe(const char *dir, unsigned flags)
{
    char path[1024];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    if (splash_st_target_open(splash_registry_global(), test_testdata_path(path, sizeof path, dir),
                              flags, &m, &err))
        fail_msg("%s", err.msg);
    return m;
}

/* Every expert of every layer, read alone, is its bytes of the whole import. */
static void test_each_expert_reads_as_imported(void **state)
{
    (void)state;
    struct splash_meta *m = open_moe(MOE, 0);
    const struct splash_meta_api *api = splash_meta_api_get();
    int experts = 0;
    uint64_t read = 0;
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, exps[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            assert_non_null(t);
            struct splash_expert_planes pl;
            struct splash_err err = {{0}};
            if (splash_st_expert_planes(m, name, &pl, &err))
                fail_msg("%s", err.msg);
            assert_int_equal(pl.n_planes, 3); /* affine: codes, scales, biases */
            assert_ptr_equal(pl.format, t->format);
            assert_int_equal(pl.experts, t->ne[2]);
            assert_int_equal(pl.rows, t->ne[1]);
            assert_int_equal(pl.cols, t->ne[0]);
            assert_non_null(strstr(pl.path[0], "model.safetensors"));
            assert_non_null(strstr(pl.name[1], "switch_mlp"));
            size_t per = (size_t)(t->n_bytes / (uint64_t)t->ne[2]);
            char *one = malloc(per);
            assert_non_null(one);
            for (int64_t e = 0; e < pl.experts; e++) {
                memset(one, 0xa5, per);
                if (splash_st_expert_read(&pl, e, one, &err))
                    fail_msg("%s", err.msg);
                assert_memory_equal(one, (const char *)t->data + (size_t)e * per, per);
                experts++;
                for (int i = 0; i < pl.n_planes; i++)
                    read += pl.expert_bytes[i];
            }
            struct splash_err bad = {{0}};
            assert_int_equal(splash_st_expert_read(&pl, pl.experts, one, &bad), SPLASH_ERR_INVALID);
            assert_non_null(strstr(bad.msg, pl.name[0]));
            free(one);
        }
    printf("  %d expert slices (%.2f MiB of planes) read alone equal the whole import\n", experts,
           (double)read / 1048576.0);
    splash_meta_close(m);
}

/* What is not an imported expert stack is refused with its name. */
static void test_refusals_name_the_tensor(void **state)
{
    (void)state;
    struct splash_meta *m = open_moe(MOE, 0);
    struct splash_expert_planes pl;
    struct splash_err err = {{0}};
    /* not stacked experts: nothing to read alone (NOT_FOUND: place them as stored) */
    assert_int_equal(splash_st_expert_planes(m, "blk.0.attn_norm.weight", &pl, &err),
                     SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "blk.0.attn_norm.weight"));
    assert_int_equal(splash_st_expert_planes(m, "blk.0.ffn_up_shexp.weight", &pl, &err),
                     SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "blk.0.ffn_up_shexp.weight"));
    assert_int_equal(splash_st_expert_planes(m, "blk.9.ffn_up_exps.weight", &pl, &err),
                     SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "blk.9.ffn_up_exps.weight"));
    splash_meta_close(m);
    /* a header copy maps nothing to read from */
    m = open_moe(MOE, SPLASH_ST_HEADERS_ONLY);
    assert_int_equal(splash_st_expert_planes(m, "blk.1.ffn_down_exps.weight", &pl, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "switch_mlp.down_proj.weight"));
    printf("  refused: %s\n", err.msg);
    splash_meta_close(m);
}

/* A shard cut short after the load fails the read of an expert past its end, naming it. */
static void test_cut_shard_names_the_file(void **state)
{
    (void)state;
    char dir[256], src[1024], dst[1024];
    assert_int_equal(test_st_tmpdir(dir, sizeof dir), 0);
    const char *files[2] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, MOE "/%s", files[i]);
        size_t size;
        void *bytes = test_read_file(test_testdata_path(src, sizeof src, rel), &size);
        assert_non_null(bytes);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        FILE *f = fopen(dst, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, size, f), size);
        fclose(f);
        free(bytes);
    }
    struct splash_meta *m = open_moe(dir, 0);
    struct splash_expert_planes pl;
    struct splash_err err = {{0}};
    /* the planes lie in header order: the last layer's down_proj is far from the start */
    if (splash_st_expert_planes(m, "blk.3.ffn_down_exps.weight", &pl, &err))
        fail_msg("%s", err.msg);
    int last = 0;
    for (int i = 1; i < pl.n_planes; i++)
        if (pl.off[i] > pl.off[last])
            last = i;
    /* the file now ends inside the last expert's slice of its furthest plane */
    uint64_t cut = pl.off[last] + (uint64_t)(pl.experts - 1) * pl.expert_bytes[last] + 1;
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    assert_int_equal(truncate(dst, (off_t)cut), 0);
    const struct splash_tensor_info *t =
        splash_meta_api_get()->tensor_find(m, "blk.3.ffn_down_exps.weight");
    assert_non_null(t);
    void *one = malloc((size_t)(t->n_bytes / (uint64_t)t->ne[2]));
    assert_non_null(one);
    assert_int_equal(splash_st_expert_read(&pl, pl.experts - 1, one, &err), SPLASH_ERR_IO);
    assert_non_null(strstr(err.msg, dst));
    assert_non_null(strstr(err.msg, pl.name[last]));
    printf("  refused: %s\n", err.msg);
    free(one);
    splash_meta_close(m);
    test_st_rmdir(dir);
}

/* Opened to load (SPLASH_ST_DEFER_EXPERTS), the stacks are not imported: no data, nothing
 * held for them, until splash_meta_tensor_realize imports one, equal to the open's import. */
static void test_deferred_until_bound(void **state)
{
    (void)state;
    struct splash_meta *eager = open_moe(MOE, 0);
    const size_t held_before = splash_import_held();
    struct splash_meta *m = open_moe(MOE, SPLASH_ST_DEFER_EXPERTS);
    const struct splash_meta_api *api = splash_meta_api_get();
    uint64_t stacked = 0;
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, exps[p]);
            const struct splash_tensor_info *t = api->tensor_find(m, name);
            assert_non_null(t);
            assert_null(t->data);
            assert_true(splash_meta_tensor_deferred(m, t));
            stacked += t->n_bytes;
        }
    /* the deferred open holds the other imports only */
    const size_t held_deferred = splash_import_held() - held_before;
    const struct splash_tensor_info *t = api->tensor_find(m, "blk.2.ffn_down_exps.weight");
    struct splash_err err = {{0}};
    assert_int_equal(splash_meta_tensor_realize(m, t, &err), SPLASH_OK);
    assert_non_null(t->data);
    assert_false(splash_meta_tensor_deferred(m, t));
    const struct splash_tensor_info *e = api->tensor_find(eager, t->name);
    assert_int_equal(e->n_bytes, t->n_bytes);
    assert_memory_equal(e->data, t->data, t->n_bytes);
    /* a GGUF-shaped tensor as stored is never deferred */
    assert_false(splash_meta_tensor_deferred(m, api->tensor_find(m, "blk.0.attn_norm.weight")));
    printf("  %.2f MiB of stacked experts deferred; the open held %.2f MiB of imports\n",
           (double)stacked / 1048576.0, (double)held_deferred / 1048576.0);
    splash_meta_close(m);
    splash_meta_close(eager);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_expert_reads_as_imported),
        cmocka_unit_test(test_refusals_name_the_tensor),
        cmocka_unit_test(test_cut_shard_names_the_file),
        cmocka_unit_test(test_deferred_until_bound),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
