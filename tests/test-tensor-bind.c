/* host->bind_tensors and unbind_tensors: one declaration list, bound into a toy model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf_write.h"
#include "core/meta.h"
#include "core/registry.h"
#include "splash/family.h"
#include "splash/kernels.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

/* The toy family's model: where its list binds each tensor. */
struct toy_model {
    struct splash_tensor_ref embd;
    struct splash_weight *head, *proj;
    float *norm, *gone;
    int drop_proj_shape; /* declare proj with a shape the file does not have */
    int need_missing;    /* declare a tensor the file lacks */
};

static enum splash_status toy_declare(const struct splash_host *host, const struct splash_meta *m,
                                      void *model, splash_decl_emit_fn emit, void *ctx,
                                      struct splash_err *err)
{
    struct toy_model *t = model;
    struct splash_tensor_decl d[] = {
        {.name = "token_embd.weight",
         .layer = -1,
         .n_dims = 2,
         .ne = {32, 8, 1, 1},
         .accept = SPLASH_ACCEPT_LINEAR | SPLASH_ACCEPT_F32,
         .bind = SPLASH_BIND_TENSOR,
         .dst = t ? &t->embd : NULL},
        {.name = "output_norm.weight",
         .layer = -1,
         .n_dims = 1,
         .ne = {32, 1, 1, 1},
         .accept = SPLASH_ACCEPT_FLOAT,
         .bind = SPLASH_BIND_FLOATS,
         .dst = t ? &t->norm : NULL},
        /* the head tied to the token table: the same tensor again, as a weight */
        {.name = "token_embd.weight",
         .layer = -1,
         .n_dims = 2,
         .ne = {32, 8, 1, 1},
         .accept = SPLASH_ACCEPT_LINEAR | SPLASH_ACCEPT_F32,
         .flags = SPLASH_DECL_AGAIN,
         .bind = SPLASH_BIND_WEIGHT,
         .dst = t ? &t->head : NULL},
        {.name = "blk.0.proj.weight",
         .layer = 0,
         .n_dims = 2,
         .ne = {32, t && t->drop_proj_shape ? 4 : 16, 1, 1},
         .accept = SPLASH_ACCEPT_LINEAR | SPLASH_ACCEPT_F32,
         .bind = SPLASH_BIND_WEIGHT,
         .dst = t ? &t->proj : NULL},
        {.name = "blk.0.gone.weight",
         .layer = 0,
         .n_dims = 1,
         .ne = {32, 1, 1, 1},
         .accept = SPLASH_ACCEPT_F32,
         .flags = t && t->need_missing ? 0 : SPLASH_DECL_OPTIONAL,
         .bind = SPLASH_BIND_FLOATS,
         .dst = t ? &t->gone : NULL},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        emit(ctx, &d[i]);
    return SPLASH_OK;
}

static char path[64];
static struct splash_meta *meta;
static const struct splash_host *host;

static int setup(void **state)
{
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    host = splash_registry_host(r);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    struct splash_err err;
    splash_gguf_writer_set_str(w, "general.architecture", "toy", &err);
    static float embd[32 * 8], norm[32], proj[32 * 16];
    for (int i = 0; i < 32 * 8; i++)
        embd[i] = (float)i;
    for (int i = 0; i < 32; i++)
        norm[i] = 0.5f * (float)i;
    int64_t ne_e[4] = {32, 8, 1, 1}, ne_n[4] = {32, 1, 1, 1}, ne_p[4] = {32, 16, 1, 1};
    if (splash_gguf_writer_add_tensor(w, "token_embd.weight", 0, 2, ne_e, embd, sizeof embd,
                                      &err) ||
        splash_gguf_writer_add_tensor(w, "output_norm.weight", 0, 1, ne_n, norm, sizeof norm,
                                      &err) ||
        splash_gguf_writer_add_tensor(w, "blk.0.proj.weight", 0, 2, ne_p, proj, sizeof proj, &err))
        fail_msg("%s", err.msg);
    snprintf(path, sizeof path, "/tmp/splash-tensor-bind-XXXXXX.gguf");
    close(mkstemps(path, 5));
    if (splash_gguf_writer_write_file(w, path, &err))
        fail_msg("%s", err.msg);
    splash_gguf_writer_destroy(w);
    if (splash_meta_open_gguf(path, 0, &meta, &err))
        fail_msg("%s", err.msg);
    splash_meta_bind_formats(meta, r);
    return 0;
}

static int teardown(void **state)
{
    splash_meta_close(meta);
    unlink(path);
    return 0;
}

static void test_bind_fills_every_destination(void **state)
{
    struct toy_model t = {0};
    struct splash_err err = {{0}};
    uint64_t bytes = 0;
    assert_int_equal(host->bind_tensors(host, meta, toy_declare, &t, &bytes, &err), SPLASH_OK);
    /* the token table once (bound twice), the norm, the projection */
    assert_int_equal(bytes, (32 * 8 + 32 + 32 * 16) * sizeof(float));
    assert_non_null(t.embd.t);
    assert_string_equal(t.embd.t->name, "token_embd.weight");
    assert_true(t.embd.scale == 1.0f);
    assert_non_null(t.norm);
    assert_true(t.norm[31] == 15.5f);
    assert_non_null(t.head);
    assert_non_null(t.proj);
    /* the tied head multiplies by the token table */
    float x[32] = {0}, y[8];
    x[1] = 1.0f;
    host->kernels->matmul(NULL, t.head, x, 1, y);
    assert_true(y[2] == 65.0f); /* row 2, column 1 */
    host->unbind_tensors(host, meta, toy_declare, &t);
    assert_null(t.embd.t);
    assert_null(t.norm);
    assert_null(t.head);
    assert_null(t.proj);
}

static void test_bind_refuses_naming_the_tensor_and_unbinds(void **state)
{
    struct toy_model t = {.drop_proj_shape = 1};
    struct splash_err err = {{0}};
    assert_int_equal(host->bind_tensors(host, meta, toy_declare, &t, NULL, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_non_null(
        strstr(err.msg, "tensor blk.0.proj.weight: wrong shape (32x16, expected 32x4)"));
    assert_non_null(strstr(err.msg, path));
    /* what was bound before the problem is unbound again */
    assert_null(t.embd.t);
    assert_null(t.norm);
    assert_null(t.head);
    assert_null(t.proj);
    struct toy_model u = {.need_missing = 1};
    assert_int_equal(host->bind_tensors(host, meta, toy_declare, &u, NULL, &err),
                     SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "tensor blk.0.gone.weight is missing"));
    assert_null(u.norm);
    assert_null(u.proj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_fills_every_destination),
        cmocka_unit_test(test_bind_refuses_naming_the_tensor_and_unbinds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
