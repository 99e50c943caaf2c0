/* The plugin loader against deliberately broken plugins: each refusal's exact text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/family.h"
#include "core/model_check.h"
#include "core/gguf.h"
#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static const char *plugin_path(char *buf, size_t size, const char *name)
{
    const char *build = getenv("SPLASH_BUILD");
    snprintf(buf, size, "%s/tests/plugins/%s.so", build && *build ? build : "build", name);
    return buf;
}

/* Loads one plugin file into a fresh registry and returns the error text. */
static enum splash_status load_one(struct splash_registry *r, const char *name,
                                   struct splash_err *err)
{
    char path[512];
    memset(err, 0, sizeof *err);
    return splash_registry_load_file(r, plugin_path(path, sizeof path, name), err);
}

static void test_loader_accepts_valid_family(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "good_family", &err), SPLASH_OK);
    assert_int_equal(splash_registry_n_families(r), 1);
    assert_string_equal(splash_registry_family(r, 0)->header.name, "loader_test");
    assert_string_equal(splash_registry_family(r, 0)->gguf_architectures[0], "loader-test");
    splash_registry_destroy(r);
}

/* the ABI this core speaks, as the refusals print it */
#define STR_(x) #x
#define STR(x) STR_(x)
#define SPEAKS STR(SPLASH_ABI_MAJOR) "." STR(SPLASH_ABI_MINOR)

static void test_loader_refuses_wrong_major(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_major", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_major.so: ABI 2.0, this splash speaks " SPEAKS);
    assert_int_equal(splash_registry_n_families(r), 0);
    assert_string_equal(splash_registry_record(r, 0)->refusal, "ABI 2.0, this splash speaks " SPEAKS);
    splash_registry_destroy(r);
}

static void test_loader_refuses_newer_minor(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_minor", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_minor.so: ABI 1.9, this splash speaks " SPEAKS);
    splash_registry_destroy(r);
}

/* ABI 1.4's size presets are held to family.h: one naming an architecture the family does
 * not claim is refused, naming the preset. */
static void test_loader_refuses_bad_preset(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_preset", &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "plugin broken_preset.so: preset preset-test-tiny: "
                                 "architecture someone-else is not one the family claims");
    assert_int_equal(splash_registry_n_families(r), 0);
    splash_registry_destroy(r);
}

static void test_loader_refuses_short_descriptor(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    char want[256];
    assert_int_equal(load_one(r, "broken_size", &err), SPLASH_ERR_ABI);
    snprintf(want, sizeof want,
             "plugin broken_size.so: descriptor of %zu bytes, ABI 1.0 needs at least %zu",
             sizeof(struct splash_plugin_header), offsetof(struct splash_family_plugin, seq_fork));
    assert_string_equal(err.msg, want);
    splash_registry_destroy(r);
}

static void test_loader_refuses_missing_symbol(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_nosymbol", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg, "plugin broken_nosymbol.so: no splash_plugin_entry_v1 symbol");
    splash_registry_destroy(r);
}

static void test_loader_names_future_abi(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_v2", &err), SPLASH_ERR_ABI);
    assert_string_equal(err.msg,
                        "plugin broken_v2.so: not a v1 plugin (it exports splash_plugin_entry_v2)");
    splash_registry_destroy(r);
}

static void test_loader_refuses_duplicate_name(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    char first[512], want[700];
    assert_int_equal(load_one(r, "good_family", &err), SPLASH_OK);
    assert_int_equal(load_one(r, "duplicate_name", &err), SPLASH_ERR_INVALID);
    snprintf(want, sizeof want,
             "plugin duplicate_name.so: duplicate plugin name \"loader_test\" (already loaded from %s)",
             plugin_path(first, sizeof first, "good_family"));
    assert_string_equal(err.msg, want);
    assert_int_equal(splash_registry_n_families(r), 1);
    splash_registry_destroy(r);
}

static void test_loader_refuses_missing_file(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(splash_registry_load_file(r, "/nonexistent/libsplash-x.so", &err),
                     SPLASH_ERR_IO);
    assert_non_null(strstr(err.msg, "plugin libsplash-x.so: cannot load: "));
    splash_registry_destroy(r);
}

/* A format plugin built against ABI 1.0 (tests/plugins/abi10_format.c) loads: its types are
 * copied into full-size structs, so the members 1.0 predates read as NULL (not the poison
 * the fixture keeps after each type), and the copy works: to_float and its scalar row. */
static void test_loader_copies_abi10_format_types(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "abi10_format", &err), SPLASH_OK);
    assert_string_equal(splash_registry_record(r, 0)->refusal, "");
    assert_int_equal(splash_registry_n_formats(r), 1);
    const struct splash_format_plugin *p = splash_registry_format(r, 0);
    assert_int_equal(p->header.abi_minor, 0);
    assert_null(p->checkpoint_formats); /* past the descriptor 1.0 sized */
    const struct splash_format_type *f = splash_registry_format_by_name(r, "ABI10_I8");
    assert_non_null(f);
    assert_ptr_equal(p->types[0], f);
    assert_int_equal(f->block_elems, 32);
    assert_int_equal(f->block_bytes, 36);
    assert_string_equal(f->act_type, "F32");
    assert_null(f->repack_to);
    assert_null(f->repack);
    assert_int_equal(f->row_group, 0);
    /* one block: d = 0.5, codes -16 .. 15 */
    unsigned char block[36];
    const float d = 0.5f;
    memcpy(block, &d, 4);
    float act[32], values[32], want = 0;
    for (int k = 0; k < 32; k++) {
        block[4 + k] = (unsigned char)(signed char)(k - 16);
        act[k] = (float)(k % 5) - 2.0f;
        want += 0.5f * (float)(k - 16) * act[k];
    }
    assert_int_equal(f->validate(block, sizeof block, 32, &err), SPLASH_OK);
    assert_int_equal(f->validate(block, sizeof block - 1, 32, &err), SPLASH_ERR_INVALID);
    f->to_float(block, values, 32);
    for (int k = 0; k < 32; k++)
        assert_true(values[k] == 0.5f * (float)(k - 16));
    assert_int_equal(f->n_rows, 1);
    float got = 0;
    f->rows[0].vec_dot(32, &got, block, act);
    assert_true(got == want);
    splash_registry_destroy(r);
}

/* A broken ABI 1.0 format plugin (tests/plugins/broken_abi10_repacked.c) flags its type
 * REPACKED, an ABI 1.1 flag whose row_group member 1.0 lacks: copied, row_group reads 0 and
 * the loader refuses the plugin with one line naming the file and the type. */
static void test_loader_refuses_abi10_format_with_repacked_flag(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_abi10_repacked", &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "plugin broken_abi10_repacked.so: format ABI10_R16: a repacked "
                                 "format needs row_group >= 2");
    assert_int_equal(splash_registry_n_formats(r), 0);
    assert_null(splash_registry_format_by_name(r, "ABI10_R16"));
    splash_registry_destroy(r);
}

/* A format type taking a GGUF id GGML defines with another block geometry would read
 * every file of that type wrongly: refused, naming both geometries, and the new id its
 * other type brings stays unknown (tests/plugins/broken_gguf_geometry.c). */
static void test_loader_refuses_gguf_id_of_other_geometry(void **state)
{
    struct splash_registry *r = splash_registry_create();
    struct splash_err err;
    assert_int_equal(load_one(r, "broken_gguf_geometry", &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "plugin broken_gguf_geometry.so: format NOT_Q8_0: GGUF type 8 "
                                 "is Q8_0, blocks of 32 values in 34 bytes, not 32 in 36");
    assert_int_equal(splash_registry_n_formats(r), 0);
    assert_int_equal(splash_gguf_type_info(202, NULL, NULL, NULL), 0);
    splash_registry_destroy(r);
}

/* Every plugin the build makes registers statically with unique type names. */
static void test_builtins_register_without_refusal(void **state)
{
    struct splash_registry *r = splash_registry_create();
    splash_registry_add_builtins(r, splash_builtin_plugins);
    for (size_t i = 0; i < splash_registry_n_records(r); i++) {
        const struct splash_plugin_record *rec = splash_registry_record(r, i);
        if (rec->refusal[0])
            fail_msg("builtin %s refused: %s", rec->name, rec->refusal);
    }
    assert_true(splash_registry_n_formats(r) >= 1);
    /* every format type's table ends in a scalar reference row */
    for (size_t i = 0; i < splash_registry_n_formats(r); i++) {
        const struct splash_format_plugin *f = splash_registry_format(r, i);
        for (uint32_t t = 0; t < f->n_types; t++) {
            const struct splash_format_type *ft = f->types[t];
            if (ft->flags & SPLASH_FORMAT_ACTIVATION_ONLY)
                continue;
            assert_int_equal(ft->rows[ft->n_rows - 1].cpu_requires, 0);
        }
    }
    splash_registry_destroy(r);
}

/* ---- format types: links, the linear flag, the host per registry ---------------------- */

static void toy_to_float(const void *src, float *dst, int64_t n)
{
    const int8_t *q = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = q[i];
}

static void toy_dot(int64_t n, float *out, const void *w, const void *act)
{
    const int8_t *q = w;
    const float *x = act;
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s += q[i] * x[i];
    *out = s;
}

static enum splash_status toy_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                       struct splash_err *err)
{
    return SPLASH_OK;
}

static const struct splash_kernel_row toy_rows[] = {{.cpu_requires = 0, .isa = "scalar", .vec_dot = toy_dot}};
static const struct splash_format_type toy_type = {
    .name = "TOY8", .gguf_type = 4000, .block_elems = 1, .block_bytes = 1,
    .bits_per_weight = 8, .act_type = "F32", .to_float = toy_to_float,
    .validate = toy_validate, .rows = toy_rows, .n_rows = 1};
static const struct splash_format_type *const toy_types[] = {&toy_type};

static struct splash_format_plugin toy_plugin = {
    .header = {.abi_major = SPLASH_ABI_MAJOR, .abi_minor = 1, .size = sizeof toy_plugin,
               .kind = SPLASH_PLUGIN_FORMAT, .name = "toy_format", .version = "1"},
    .types = toy_types, .n_types = 1};

static const struct splash_host *toy_host;

static const struct splash_plugin_header *toy_entry(const struct splash_host *host)
{
    toy_host = host;
    return &toy_plugin.header;
}

/* A format plugin built before ABI 1.2 could not flag its types linear: the registry
 * derives the flag (a quantized type of a GGUF id with kernel rows), so model-check keeps
 * accepting it for weights; one built against 1.2 says itself (here: it does not). The
 * plugin's host answers look-ups from its own registry. */
static void test_format_linear_flag_and_host_per_registry(void **state)
{
    for (int minor = 1; minor <= SPLASH_ABI_MINOR; minor++) {
        struct splash_registry *r = splash_registry_create();
        struct splash_err err;
        toy_plugin.header.abi_minor = (uint16_t)minor;
        assert_int_equal(splash_registry_add_entry(r, toy_entry, "toy", &err), SPLASH_OK);
        const struct splash_format_type *t = splash_registry_format_by_name(r, "TOY8");
        assert_non_null(t);
        int linear = (t->flags & SPLASH_FORMAT_LINEAR) != 0;
        assert_int_equal(linear, minor < 2);
        assert_int_equal(splash_decl_accepts(SPLASH_ACCEPT_LINEAR, t, 4000), minor < 2);
        assert_int_equal(splash_decl_accepts(SPLASH_ACCEPT_FLOAT, t, 4000), 0);
        /* the host the plugin got is this registry's */
        assert_ptr_equal(toy_host, splash_registry_host(r));
        assert_ptr_equal(toy_host->format_find_name(toy_host, "TOY8"), t);
        assert_ptr_equal(toy_host->format_find_gguf(toy_host, 4000), t);
        assert_null(toy_host->format_find_name(toy_host, "Q4_K"));
        assert_true(toy_host->meta->size >= sizeof(struct splash_meta_api));
        assert_non_null(toy_host->ssm);
        splash_registry_destroy(r);
    }
    toy_plugin.header.abi_minor = SPLASH_ABI_MINOR;
}

/* A family's verdict names its chat format from ABI 1.3; the core reads qwen for a plugin
 * that names none (one built before), and keeps the one a plugin names. */
static const char *toy_format_name;

static enum splash_status toy_check(const struct splash_host *host, const struct splash_meta *m,
                                    struct splash_family_verdict *v, struct splash_err *err)
{
    (void)host, (void)m, (void)err;
    v->score = 1;
    if (toy_format_name)
        snprintf(v->chat_format, sizeof v->chat_format, "%s", toy_format_name);
    return SPLASH_OK;
}

static void test_family_chat_format_default(void **state)
{
    (void)state;
    struct splash_family_plugin fam = {
        .header = {.abi_major = SPLASH_ABI_MAJOR, .abi_minor = 2, .size = sizeof fam,
                   .kind = SPLASH_PLUGIN_FAMILY, .name = "toy_family", .version = "1"},
        .check_config = toy_check};
    struct splash_family_verdict v;
    struct splash_err err;
    toy_format_name = NULL;
    assert_int_equal(splash_family_check_config(splash_registry_global(), &fam, NULL, &v, &err),
                     SPLASH_OK);
    assert_string_equal(v.chat_format, "qwen");
    toy_format_name = "flint";
    assert_int_equal(splash_family_check_config(splash_registry_global(), &fam, NULL, &v, &err),
                     SPLASH_OK);
    assert_string_equal(v.chat_format, "flint");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_accepts_valid_family),
        cmocka_unit_test(test_family_chat_format_default),
        cmocka_unit_test(test_loader_refuses_wrong_major),
        cmocka_unit_test(test_loader_refuses_newer_minor),
        cmocka_unit_test(test_loader_refuses_short_descriptor),
        cmocka_unit_test(test_loader_refuses_bad_preset),
        cmocka_unit_test(test_loader_refuses_missing_symbol),
        cmocka_unit_test(test_loader_names_future_abi),
        cmocka_unit_test(test_loader_refuses_duplicate_name),
        cmocka_unit_test(test_loader_refuses_missing_file),
        cmocka_unit_test(test_loader_copies_abi10_format_types),
        cmocka_unit_test(test_loader_refuses_abi10_format_with_repacked_flag),
        cmocka_unit_test(test_loader_refuses_gguf_id_of_other_geometry),
        cmocka_unit_test(test_builtins_register_without_refusal),
        cmocka_unit_test(test_format_linear_flag_and_host_per_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
