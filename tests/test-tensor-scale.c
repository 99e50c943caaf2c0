/* llama.cpp's NVFP4 GGUFs keep an F32 NAME.scale beside a weight, which multiplies its
 * products (models.md, NVFP4): the family applies it, model-check and the family refuse
 * one beside any other type or without its weight, and NAME.input_scale plays no part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/family.h"
#include "core/host_impl.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "splash/family.h"
#include "tests/support/gguf_copy.h"
#include "tests/support/model_run.h"
#include "tests/support/testdata.h"
#include "tests/support/preset.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;
static const struct splash_family_plugin *fam;
static char nvfp4_path[64] = "/tmp/splash-scale-XXXXXX.gguf";

/* An untied NVFP4 model of the tiny shape, written by our own writer (the oracle below is
 * arithmetic: a scale of 2 on the head doubles every logit exactly). */
static int setup(void **state)
{
    (void)state;
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    for (size_t i = 0; i < splash_registry_n_families(r); i++)
        if (!strcmp(splash_registry_family(r, i)->header.name, "qwen_hybrid"))
            fam = splash_registry_family(r, i);
    pool = splash_pool_create(2);
    struct splash_model_shape *shape = test_preset("qwen35-tiny");
    struct splash_err err = {{0}};
    if (splash_model_shape_parse_dims(shape, "tied=0", &err))
        return -1;
    int fd = mkstemps(nvfp4_path, 5);
    if (fd < 0)
        return -1;
    close(fd);
    struct splash_model_write_opts opts = {.mix = "NVFP4", .seed = 7, .pool = pool};
    if (splash_model_write(r, shape, &opts, nvfp4_path, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return fam && pool ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(nvfp4_path);
    splash_pool_destroy(pool);
    return 0;
}

static float *logits_of(const char *path, const int32_t *tokens, int32_t n, int64_t *n_vocab)
{
    struct test_run r;
    struct test_run_opts o = {.fam = fam, .pool = pool};
    test_run_open(&r, &o, path, path);
    float *l = test_run_logits(&r, tokens, n, 0, NULL);
    *n_vocab = r.info.n_vocab;
    test_run_close(&r);
    return l;
}

static void test_scale_beside_nvfp4_head_multiplies_logits(void **state)
{
    (void)state;
    const int32_t tokens[] = {11, 200, 37, 5, 90};
    const int32_t n = (int32_t)(sizeof tokens / sizeof *tokens);
    char *scaled = test_gguf_with_tensor(nvfp4_path, "output.scale", 1, 2.0f);
    char *ignored = test_gguf_with_tensor(nvfp4_path, "output.input_scale", 1, 3.0f);
    int64_t V, V2, V3;
    float *a = logits_of(nvfp4_path, tokens, n, &V);
    float *b = logits_of(scaled, tokens, n, &V2);
    float *c = logits_of(ignored, tokens, n, &V3);
    assert_int_equal(V, V2);
    int differs = 0;
    for (int64_t i = 0; i < (int64_t)n * V; i++) {
        assert_true(b[i] == 2.0f * a[i]);
        assert_true(c[i] == a[i]);
        differs |= a[i] != 0.0f;
    }
    assert_true(differs);
    free(a), free(b), free(c);
    unlink(scaled), unlink(ignored);
    free(scaled), free(ignored);
}

static void test_scale_beside_other_type_refused(void **state)
{
    (void)state;
    char src[512];
    test_testdata_path(src, sizeof src, "models/qwen35-tiny-Q4_K_M.gguf");
    char *bad = test_gguf_with_tensor(src, "blk.0.ffn_down.scale", 1, 2.0f);
    char *alone = test_gguf_with_tensor(nvfp4_path, "blk.1.nothing.scale", 1, 2.0f);
    struct splash_check_result res;
    struct splash_err err = {{0}};
    assert_int_not_equal(splash_model_check(splash_registry_global(), bad, &res, &err), SPLASH_OK);
    assert_non_null(strstr(res.problems, "ffn_down.scale"));
    assert_non_null(strstr(res.problems, "only NVFP4"));
    splash_check_result_free(&res);
    assert_int_not_equal(splash_model_check(splash_registry_global(), alone, &res, &err),
                         SPLASH_OK);
    assert_non_null(strstr(res.problems, "nothing.scale"));
    assert_non_null(strstr(res.problems, "without its weight"));
    splash_check_result_free(&res);
    /* the family refuses it too, naming the tensor, when it is handed the file anyway */
    struct splash_meta *m;
    assert_int_equal(splash_meta_open_gguf(bad, 0, &m, &err), SPLASH_OK);
    splash_meta_bind_formats(m, splash_registry_global());
    struct splash_model_opts opts = {.pool = pool};
    void *model = NULL;
    struct splash_model_info info;
    assert_int_not_equal(splash_family_model_create(splash_registry_global(), fam, m, &opts, &model,
                                                    &info, &err),
                         SPLASH_OK);
    assert_non_null(strstr(err.msg, "blk.0.ffn_down.scale"));
    splash_meta_close(m);
    unlink(bad), unlink(alone);
    free(bad), free(alone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_beside_nvfp4_head_multiplies_logits),
        cmocka_unit_test(test_scale_beside_other_type_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
