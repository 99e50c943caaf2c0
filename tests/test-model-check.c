/* model-check on the reference GGUFs and on copies with a tensor removed,
 * retyped or reshaped, and on a mostly-unquantized file. */
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

#include <jansson.h>

#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/registry.h"
#include "tests/support/testdata.h"
#include "tests/support/gguf_copy.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];
static struct splash_registry *reg;

static int setup(void **state)
{
    reg = splash_registry_global();
    if (splash_registry_n_records(reg) == 0)
        splash_registry_add_builtins(reg, splash_builtin_plugins);
    return 0;
}

/* A modification applied while copying a GGUF. */
struct edit {
    const char *drop_suffix;   /* drop tensors whose name ends so */
    const char *retype_suffix; /* give tensors ending so this type id */
    int32_t new_type;
    const char *reshape;       /* give this tensor a wrong shape */
    int all_f16;               /* rewrite every quantized matrix as F16 */
    const char *arch;          /* another general.architecture */
    int nextn;                 /* an MTP block after the last layer, as llama.cpp writes it */
    int nextn_no_eh_proj;      /* ... without its input projection */
};

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Copies testdata model `name` into a temp file with `e` applied; returns the path. */
static char *edited_copy(const char *name, const struct edit *e)
{
    char src[512], rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    test_testdata_path(src, sizeof src, rel);
    struct splash_gguf *g;
    struct splash_err err;
    if (splash_gguf_open(src, 0, &g, &err) != SPLASH_OK)
        fail_msg("%s", err.msg);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    for (size_t i = 0; i < g->n_kv; i++)
        test_gguf_copy_kv(w, &g->kv[i]);
    if (e->arch)
        splash_gguf_writer_set_str(w, "general.architecture", e->arch, &err);
    int64_t blocks = 0;
    if (e->nextn) {
        /* llama.cpp's layout: block_count counts the MTP block, blk.{n_layer} holds it (an
         * attention layer's tensors and nextn.*), nextn_predict_layers says how many */
        for (size_t i = 0; i < g->n_kv; i++)
            if (!strcmp(g->kv[i].key, "qwen35.block_count"))
                blocks = (int64_t)g->kv[i].v.u64;
        assert_true(blocks > 0);
        splash_gguf_writer_set_u32(w, "qwen35.block_count", (uint32_t)blocks + 1, &err);
        splash_gguf_writer_set_u32(w, "qwen35.nextn_predict_layers", 1, &err);
    }
    void **scratch = calloc(g->n_tensors, sizeof *scratch);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct splash_tensor_info *t = &g->tensors[i].info;
        if (e->drop_suffix && ends_with(t->name, e->drop_suffix))
            continue;
        int32_t type = t->dtype;
        const void *data = t->data;
        uint64_t n_bytes = t->n_bytes;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint64_t n_elems = (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]);
        if (e->retype_suffix && ends_with(t->name, e->retype_suffix)) {
            uint32_t be, bb;
            splash_gguf_type_info(e->new_type, NULL, &be, &bb);
            type = e->new_type;
            n_bytes = n_elems / be * bb;
            data = scratch[i] = calloc(1, n_bytes);
        } else if (e->all_f16 && t->n_dims >= 2 && t->dtype != 0) {
            type = 1;
            n_bytes = n_elems * 2;
            data = scratch[i] = calloc(1, n_bytes);
        }
        if (e->reshape && !strcmp(t->name, e->reshape)) {
            ne[1] = ne[1] / 2;
            n_bytes /= 2;
        }
        if (splash_gguf_writer_add_tensor(w, t->name, type, t->n_dims, ne, data, n_bytes, &err))
            fail_msg("%s", err.msg);
        char last[32], mtp[96];
        snprintf(last, sizeof last, "blk.%lld.", (long long)blocks - 1);
        if (e->nextn && !strncmp(t->name, last, strlen(last))) {
            snprintf(mtp, sizeof mtp, "blk.%lld.%s", (long long)blocks, t->name + strlen(last));
            if (splash_gguf_writer_add_tensor(w, mtp, type, t->n_dims, ne, data, n_bytes, &err))
                fail_msg("%s", err.msg);
        }
    }
    static float mtp_f32[2 * 256 * 256];
    if (e->nextn) {
        const struct splash_tensor_info *emb = NULL;
        for (size_t i = 0; i < g->n_tensors; i++)
            if (!strcmp(g->tensors[i].info.name, "token_embd.weight"))
                emb = &g->tensors[i].info;
        int64_t n_embd = emb->ne[0];
        assert_true(2 * n_embd * n_embd <= (int64_t)(sizeof mtp_f32 / sizeof *mtp_f32));
        const char *norms[] = {"enorm", "hnorm", "shared_head_norm"};
        char name[96];
        for (int i = 0; i < 3; i++) {
            int64_t ne[4] = {n_embd, 1, 1, 1};
            snprintf(name, sizeof name, "blk.%lld.nextn.%s.weight", (long long)blocks, norms[i]);
            splash_gguf_writer_add_tensor(w, name, 0, 1, ne, mtp_f32, (uint64_t)n_embd * 4, &err);
        }
        int64_t ne[4] = {2 * n_embd, n_embd, 1, 1};
        snprintf(name, sizeof name, "blk.%lld.nextn.eh_proj.weight", (long long)blocks);
        if (!e->nextn_no_eh_proj)
            splash_gguf_writer_add_tensor(w, name, 0, 2, ne, mtp_f32,
                                          (uint64_t)(2 * n_embd * n_embd) * 4, &err);
    }
    char *out = strdup("/tmp/splash-model-check-XXXXXX.gguf");
    int fd = mkstemps(out, 5);
    close(fd);
    if (splash_gguf_writer_write_file(w, out, &err))
        fail_msg("%s", err.msg);
    splash_gguf_writer_destroy(w);
    for (size_t i = 0; i < g->n_tensors; i++)
        free(scratch[i]);
    free(scratch);
    splash_gguf_close(g);
    return out;
}

static enum splash_status check(const char *path, struct splash_check_result *res)
{
    struct splash_err err = {{0}};
    return splash_model_check(reg, path, res, &err);
}

static void test_model_check_passes_reference_models(void **state)
{
    const char *models[] = {"qwen35-tiny-Q4_K_M.gguf", "qwen35-tiny-Q8_0.gguf", "qwen35-tiny-IQ2_XXS.gguf",
                            "qwen35-tiny-MXFP4.gguf", "qwen35-tiny-Q1_0.gguf", "qwen35-stories-Q8_0.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[512], rel[256];
        snprintf(rel, sizeof rel, "models/%s", models[i]);
        struct splash_check_result res;
        enum splash_status st = check(test_testdata_path(path, sizeof path, rel), &res);
        if (st != SPLASH_OK)
            fail_msg("%s: %s", models[i], res.problems ? res.problems : "?");
        assert_string_equal(res.family, "qwen_hybrid");
        assert_non_null(strstr(res.verdict.architecture, "qwen35"));
        splash_check_result_free(&res);
    }
}

/* A GGUF carrying an MTP block (llama.cpp's nextn layout) is the same model: the block is
 * not a layer of the trunk (models.md: MTP layers are subtracted from the layer count). */
static void test_model_check_nextn_layers_not_counted(void **state)
{
    struct edit e = {.nextn = 1};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    enum splash_status st = check(path, &res);
    if (st != SPLASH_OK)
        fail_msg("with an MTP block: %s", res.problems ? res.problems : "?");
    assert_non_null(strstr(res.verdict.summary, "8 layers (2 attention)"));
    assert_non_null(strstr(res.verdict.summary, "1 MTP layer"));
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

/* The MTP block is held to the trunk's shapes like any layer: one without its input
 * projection is refused, naming the tensor and the block. */
static void test_model_check_nextn_block_checked(void **state)
{
    struct edit e = {.nextn = 1, .nextn_no_eh_proj = 1};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    assert_non_null(res.problems);
    if (!strstr(res.problems, "nextn.eh_proj.weight in 1 layer (8)"))
        fail_msg("problems: %s", res.problems);
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

static void test_model_check_names_missing_tensor_and_layers(void **state)
{
    struct edit e = {.drop_suffix = "ssm_a"};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    /* GDN layers are 0-2 and 4-6 (3 and 7 attend) */
    assert_string_equal(res.problems, "missing tensors: ssm_a in 6 layers (0-2, 4-6)");
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

static void test_model_check_names_unsupported_type(void **state)
{
    struct edit e = {.retype_suffix = "ffn_gate.weight", .new_type = 9 /* Q8_1 */};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    assert_string_equal(res.problems, "unsupported tensor types: ffn_gate.weight (Q8_1) in 8 layers (0-7)");
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

static void test_model_check_names_wrong_shape(void **state)
{
    struct edit e = {.reshape = "blk.0.ffn_up.weight"};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    assert_string_equal(res.problems,
                        "tensors of the wrong shape: ffn_up.weight (256x256, expected 256x512) in 1 layer (0)");
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

static void test_model_check_refuses_mostly_f16(void **state)
{
    struct edit e = {.all_f16 = 1};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    struct splash_check_result res;
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    assert_non_null(strstr(res.problems, "of its values are BF16, F16 or F32"));
    assert_non_null(strstr(res.problems, "choose a quantized variant"));
    splash_check_result_free(&res);
    unlink(path);
    free(path);
    /* the reference BF16 file is refused the same way */
    char bf16[512];
    assert_int_not_equal(check(test_testdata_path(bf16, sizeof bf16, "models/qwen35-tiny-BF16.gguf"), &res),
                         SPLASH_OK);
    assert_non_null(strstr(res.problems, "100% of its values are BF16, F16 or F32"));
    splash_check_result_free(&res);
}

static void test_model_check_refuses_unknown_architecture(void **state)
{
    struct splash_check_result res;
    assert_int_equal(check("/nonexistent.gguf", &res), SPLASH_ERR_NOT_FOUND);
    splash_check_result_free(&res);
    struct edit e = {.arch = "mamba9"};
    char *path = edited_copy("qwen35-tiny-Q4_K_M.gguf", &e);
    assert_int_not_equal(check(path, &res), SPLASH_OK);
    assert_non_null(strstr(res.problems, "architecture mamba9 is not one Splash serves"));
    splash_check_result_free(&res);
    unlink(path);
    free(path);
}

/* The command installers run: a one-line verdict, --json, and exit codes. */
static void test_model_check_cli(void **state)
{
    const char *build = getenv("SPLASH_BUILD");
    char cmd[1024], out[8192], model[512];
    test_testdata_path(model, sizeof model, "models/qwen35-tiny-Q4_K_M.gguf");
    snprintf(cmd, sizeof cmd, "%s/splash model-check %s 2>&1", build ? build : "build", model);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "qwen35-tiny-Q4_K_M.gguf: Qwen hybrid (qwen35), another size of it "
                             "(hidden 256, 8 layers (2 attention), vocab 2048) · ok\n"
                             "  loads 45 F32, 9 Q6_K, 54 Q4_K (3.5 MiB)\n");
    snprintf(cmd, sizeof cmd, "%s/splash model-check --json %s", build ? build : "build", model);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    assert_int_equal(pclose(p), 0);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(j, "ok")));
    assert_string_equal(json_string_value(json_object_get(j, "plugin")), "qwen_hybrid");
    json_decref(j);
    test_testdata_path(model, sizeof model, "models/qwen35-tiny-BF16.gguf");
    snprintf(cmd, sizeof cmd, "%s/splash model-check --json %s", build ? build : "build", model);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    assert_int_equal(WEXITSTATUS(pclose(p)), 1);
    j = json_loads(out, 0, &jerr);
    assert_non_null(j);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "quantized variant"));
    json_decref(j);
}

/* ---- a family plugin's accept masks, and an older plugin's roles ------------------- */

/* Three tensors as a family built against ABI 1.2 declared them (roles 5: shared-expert
 * gate, F32/BF16/Q8_0; 6: GDN, F32 only; 7: GDN alpha/beta, linear formats or F32), or
 * as a 1.3 family does (the same rules as accept masks). */
static uint32_t masks_minor;

static enum splash_status masks_check(const struct splash_host *host, const struct splash_meta *m,
                                      struct splash_family_verdict *v, struct splash_err *err)
{
    v->score = 1;
    return SPLASH_OK;
}

static enum splash_status masks_declare(const struct splash_host *host,
                                        const struct splash_meta *m, splash_decl_emit_fn emit,
                                        void *ctx, struct splash_err *err)
{
    static const struct {
        const char *name;
        uint32_t role, accept;
    } d[] = {
        {"gate", 5, SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16 | SPLASH_ACCEPT_Q8_0},
        {"conv", 6, SPLASH_ACCEPT_F32},
        {"beta", 7, SPLASH_ACCEPT_LINEAR | SPLASH_ACCEPT_F32},
    };
    for (int i = 0; i < 3; i++) {
        struct splash_tensor_decl t = {.layer = -1, .n_dims = 2, .ne = {64, 4, 1, 1},
                                       .accept = masks_minor < 3 ? d[i].role : d[i].accept};
        snprintf(t.name, sizeof t.name, "%s", d[i].name);
        emit(ctx, &t);
    }
    return SPLASH_OK;
}

static const char *const masks_archs[] = {"masks-test", NULL};
static struct splash_family_plugin masks_plugin = {
    .header = {.abi_major = SPLASH_ABI_MAJOR, .size = sizeof masks_plugin,
               .kind = SPLASH_PLUGIN_FAMILY, .name = "masks_test", .version = "1"},
    .gguf_architectures = masks_archs,
    .check_config = masks_check,
    .declare_tensors = masks_declare,
};

static const struct splash_plugin_header *masks_entry(const struct splash_host *host)
{
    masks_plugin.header.abi_minor = (uint16_t)masks_minor;
    return &masks_plugin.header;
}

/* gate Q4_0 (refused: Q8_0 is the one quantized type it takes), conv F16 (refused: F32
 * only), beta Q4_0 (accepted: a linear format). */
static char *masks_model(void)
{
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    struct splash_err err;
    splash_gguf_writer_set_str(w, "general.architecture", "masks-test", &err);
    static uint8_t zeros[1024];
    int64_t ne[4] = {64, 4, 1, 1};
    const struct {
        const char *name;
        int32_t type;
        uint64_t bytes;
    } t[] = {{"gate", 2, 4 * 2 * 18}, {"conv", 1, 64 * 4 * 2}, {"beta", 2, 4 * 2 * 18}};
    for (int i = 0; i < 3; i++)
        if (splash_gguf_writer_add_tensor(w, t[i].name, t[i].type, 2, ne, zeros, t[i].bytes, &err))
            fail_msg("%s", err.msg);
    char *out = strdup("/tmp/splash-model-check-XXXXXX.gguf");
    close(mkstemps(out, 5));
    if (splash_gguf_writer_write_file(w, out, &err))
        fail_msg("%s", err.msg);
    splash_gguf_writer_destroy(w);
    return out;
}

static void test_model_check_accept_masks_and_old_roles(void **state)
{
    char *path = masks_model();
    for (masks_minor = 2; masks_minor <= SPLASH_ABI_MINOR; masks_minor++) {
        struct splash_registry *r = splash_registry_create();
        struct splash_err err = {{0}};
        splash_registry_add_builtins(r, splash_builtin_plugins);
        assert_int_equal(splash_registry_add_entry(r, masks_entry, "masks", &err), SPLASH_OK);
        struct splash_meta *m;
        assert_int_equal(splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, &err), SPLASH_OK);
        splash_meta_bind_formats(m, r);
        struct splash_check_result res;
        memset(&res, 0, sizeof res);
        assert_int_not_equal(splash_model_check_meta(r, m, 0, NULL, &res, &err), SPLASH_OK);
        assert_string_equal(res.problems, "unsupported tensor types: gate (Q4_0); conv (F16)");
        splash_check_result_free(&res);
        splash_meta_close(m);
        splash_registry_destroy(r);
    }
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_check_passes_reference_models),
        cmocka_unit_test(test_model_check_nextn_layers_not_counted),
        cmocka_unit_test(test_model_check_nextn_block_checked),
        cmocka_unit_test(test_model_check_names_missing_tensor_and_layers),
        cmocka_unit_test(test_model_check_names_unsupported_type),
        cmocka_unit_test(test_model_check_names_wrong_shape),
        cmocka_unit_test(test_model_check_refuses_mostly_f16),
        cmocka_unit_test(test_model_check_refuses_unknown_architecture),
        cmocka_unit_test(test_model_check_cli),
        cmocka_unit_test(test_model_check_accept_masks_and_old_roles),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
