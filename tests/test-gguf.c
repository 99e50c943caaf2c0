/* GGUF reader and writer: llama.cpp's files against their golden tensor directories,
 * every value type, split GGUFs, and hostile files (truncations, huge counts, bad
 * alignment, out-of-file offsets) refused with their exact messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/meta.h"
#include "tests/support/testdata.h"
#include "tests/support/gguf_copy.h"

/* ---- helpers ---------------------------------------------------------------- */

static char tmp_root[64];

static int setup_tmp(void **state)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/splash-test-gguf-XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    DIR *d = opendir(tmp_root);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", tmp_root, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(tmp_root);
    return 0;
}

static const char *tmp_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmp_root, name);
    return buf;
}

static const struct splash_meta_api *api(void)
{
    return splash_meta_api_get();
}

/* A writer holding a small model: a few keys and n_tensors F32 [8 x 4] tensors whose
 * values encode their index, so data can be checked after a split. */
static float tensor_values[16][32];

static struct splash_gguf_writer *small_model(int n_tensors)
{
    struct splash_err err;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    assert_non_null(w);
    assert_int_equal(splash_gguf_writer_set_str(w, "general.architecture", "qwen35", &err), 0);
    assert_int_equal(splash_gguf_writer_set_u32(w, "qwen35.block_count", 8, &err), 0);
    for (int i = 0; i < n_tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", i);
        for (int j = 0; j < 32; j++)
            tensor_values[i][j] = (float)(i * 100 + j);
        int64_t ne[2] = {8, 4};
        assert_int_equal(splash_gguf_writer_add_tensor(w, name, 0, 2, ne, tensor_values[i],
                                                       sizeof tensor_values[i], &err),
                         0);
    }
    return w;
}

static void expect_parse_error(const void *buf, size_t size, unsigned flags,
                               enum splash_status want, const char *msg)
{
    struct splash_gguf *g = NULL;
    struct splash_err err = {{0}};
    enum splash_status st = splash_gguf_parse_buffer(buf, size, "t.gguf", flags, &g, &err);
    if (st == SPLASH_OK)
        splash_gguf_close(g);
    assert_int_equal(st, want);
    if (msg)
        assert_string_equal(err.msg, msg);
}

/* ---- llama.cpp's files against the golden directories ------------------------- */

static void test_gguf_testdata_models_match_golden(void **state)
{
    char dir[512], path[1024];
    DIR *d = opendir(test_testdata_path(dir, sizeof dir, "golden"));
    assert_non_null(d);
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_t *golden = json_load_file(path, 0, NULL);
        assert_non_null(golden);
        json_t *types = json_object_get(golden, "tensor_types");
        json_t *mix = json_object_get(golden, "type_mix");
        if (!types || !mix) {
            json_decref(golden);
            continue; /* not a model's golden file */
        }
        char model[256];
        snprintf(model, sizeof model, "models/%.*s.gguf", (int)(len - 5), e->d_name);
        struct splash_meta *m = NULL;
        struct splash_err err;
        enum splash_status st =
            splash_meta_open_gguf(test_testdata_path(path, sizeof path, model), 0, &m, &err);
        if (st)
            fail_msg("%s: %s", model, err.msg);
        assert_int_equal(api()->n_tensors(m), json_object_size(types));
        const char *name;
        json_t *type;
        json_object_foreach(types, name, type) {
            const struct splash_tensor_info *t = api()->tensor_find(m, name);
            if (!t)
                fail_msg("%s: tensor %s missing", model, name);
            if (strcmp(t->type_name, json_string_value(type)))
                fail_msg("%s: %s is %s, golden says %s", model, name, t->type_name,
                         json_string_value(type));
            assert_non_null(t->data);
        }
        json_object_foreach(mix, name, type) {
            json_int_t want = json_integer_value(type), got = 0;
            for (size_t i = 0; i < api()->n_tensors(m); i++)
                got += !strcmp(api()->tensor_at(m, i)->type_name, name);
            if (got != want)
                fail_msg("%s: %lld %s tensors, golden says %lld", model, (long long)got, name,
                         (long long)want);
        }
        splash_meta_close(m);
        json_decref(golden);
        checked++;
    }
    closedir(d);
    assert_true(checked >= 28);
}

/* ---- written files ------------------------------------------------------------------ */

/* The writer's bytes for one u32 key and one F32 tensor, spelled out by hand from the
 * GGUF v3 layout (magic, version, counts, key, type, value, tensor info, padding, data). */
static void test_gguf_writer_bytes_match_the_layout(void **state)
{
    struct splash_err err;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    float data[2] = {1.0f, -2.0f};
    int64_t ne[1] = {2};
    assert_int_equal(splash_gguf_writer_set_u32(w, "a.b", 7, &err), 0);
    assert_int_equal(splash_gguf_writer_add_tensor(w, "t", 0, 1, ne, data, 8, &err), 0);
    void *buf;
    size_t size;
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, &size, &err), 0);
    static const uint8_t want[] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0,  /* magic, version 3 */
        1, 0, 0, 0, 0, 0, 0, 0,          /* 1 tensor */
        1, 0, 0, 0, 0, 0, 0, 0,          /* 1 key */
        3, 0, 0, 0, 0, 0, 0, 0, 'a', '.', 'b', /* key "a.b" */
        4, 0, 0, 0, 7, 0, 0, 0,          /* u32 7 */
        1, 0, 0, 0, 0, 0, 0, 0, 't',     /* tensor "t" */
        1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, /* 1 dim: 2 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* F32, offset 0 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* padding to 96 */
        0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, /* 1.0f, -2.0f */
    };
    assert_int_equal(96 + 32, size); /* the data padded to the alignment too */
    assert_memory_equal(buf, want, sizeof want);
    free(buf);
    splash_gguf_writer_destroy(w);
}

static void test_gguf_writer_every_value_type_reads_back(void **state)
{
    struct splash_err err;
    char path[512];
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    uint8_t u8 = 250;
    int8_t i8 = -100;
    uint16_t u16 = 65000;
    int16_t i16 = -32000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 0.5f;
    uint8_t b = 1;
    uint64_t u64 = 1ull << 60;
    int64_t i64 = -(1ll << 60);
    double f64 = -1e-300;
    assert_int_equal(splash_gguf_writer_set_scalar(w, "u8", GGUF_U8, &u8, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "i8", GGUF_I8, &i8, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "u16", GGUF_U16, &u16, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "i16", GGUF_I16, &i16, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "u32", GGUF_U32, &u32, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "i32", GGUF_I32, &i32, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "f32", GGUF_F32, &f32, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "bool", GGUF_BOOL, &b, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "u64", GGUF_U64, &u64, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "i64", GGUF_I64, &i64, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "f64", GGUF_F64, &f64, &err), 0);
    assert_int_equal(splash_gguf_writer_set_str(w, "str", "h\xc3\xa9llo", &err), 0);
    int16_t ai16[3] = {-1, 0, 300};
    double af64[2] = {1.5, -2.25};
    uint8_t abool[2] = {0, 1};
    const char *astr[3] = {"a", "", "<|im_end|>"};
    assert_int_equal(splash_gguf_writer_set_array(w, "ai16", GGUF_I16, ai16, 3, &err), 0);
    assert_int_equal(splash_gguf_writer_set_array(w, "af64", GGUF_F64, af64, 2, &err), 0);
    assert_int_equal(splash_gguf_writer_set_array(w, "abool", GGUF_BOOL, abool, 2, &err), 0);
    assert_int_equal(splash_gguf_writer_set_array(w, "astr", GGUF_STRING, astr, 3, &err), 0);
    assert_int_equal(splash_gguf_writer_set_array(w, "empty", GGUF_U32, NULL, 0, &err), 0);
    assert_int_equal(splash_gguf_writer_set_alignment(w, 64, &err), 0);
    /* a quantized tensor: 2 rows of one Q8_0 block each */
    uint8_t q8[2 * 34];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)i;
    int64_t ne[2] = {32, 2};
    assert_int_equal(splash_gguf_writer_add_tensor(w, "q", 8, 2, ne, q8, sizeof q8, &err), 0);
    assert_int_equal(splash_gguf_writer_add_tensor(w, "q2", 8, 2, ne, q8, 1, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(splash_gguf_writer_write_file(w, tmp_path(path, sizeof path, "all.gguf"),
                                                   &err),
                     0);
    splash_gguf_writer_destroy(w);

    struct splash_meta *m;
    if (splash_meta_open_gguf(path, 0, &m, &err))
        fail_msg("%s", err.msg);
    const struct splash_meta_api *a = api();
    int64_t iv;
    double dv;
    int bv;
    const char *sv;
    size_t n;
    assert_int_equal(a->get_i64(m, "u8", &iv, &err), 0);
    assert_int_equal(iv, 250);
    assert_int_equal(a->get_i64(m, "i8", &iv, &err), 0);
    assert_int_equal(iv, -100);
    assert_int_equal(a->get_i64(m, "u16", &iv, &err), 0);
    assert_int_equal(iv, 65000);
    assert_int_equal(a->get_i64(m, "i16", &iv, &err), 0);
    assert_int_equal(iv, -32000);
    assert_int_equal(a->get_i64(m, "u32", &iv, &err), 0);
    assert_int_equal(iv, 4000000000ll);
    assert_int_equal(a->get_i64(m, "i32", &iv, &err), 0);
    assert_int_equal(iv, -2000000000);
    assert_int_equal(a->get_f64(m, "f32", &dv, &err), 0);
    assert_true(dv == 0.5);
    assert_int_equal(a->get_bool(m, "bool", &bv, &err), 0);
    assert_int_equal(bv, 1);
    assert_int_equal(a->get_i64(m, "u64", &iv, &err), 0);
    assert_true(iv == 1ll << 60);
    assert_int_equal(a->get_i64(m, "i64", &iv, &err), 0);
    assert_true(iv == -(1ll << 60));
    assert_int_equal(a->get_f64(m, "f64", &dv, &err), 0);
    assert_true(dv == -1e-300);
    assert_int_equal(a->get_str(m, "str", &sv, &err), 0);
    assert_string_equal(sv, "h\xc3\xa9llo");
    assert_int_equal(a->get_i64(m, "general.alignment", &iv, &err), 0);
    assert_int_equal(iv, 64);
    assert_int_equal(a->arr_len(m, "ai16", &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(a->arr_i64(m, "ai16", 2, &iv, &err), 0);
    assert_int_equal(iv, 300);
    assert_int_equal(a->arr_i64(m, "ai16", 0, &iv, &err), 0);
    assert_int_equal(iv, -1);
    assert_int_equal(a->arr_f64(m, "af64", 1, &dv, &err), 0);
    assert_true(dv == -2.25);
    assert_int_equal(a->arr_i64(m, "abool", 1, &iv, &err), 0);
    assert_int_equal(iv, 1);
    assert_int_equal(a->arr_str(m, "astr", 1, &sv, &err), 0);
    assert_string_equal(sv, "");
    assert_int_equal(a->arr_str(m, "astr", 2, &sv, &err), 0);
    assert_string_equal(sv, "<|im_end|>");
    assert_int_equal(a->arr_len(m, "empty", &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(a->arr_str(m, "astr", 3, &sv, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "all.gguf: astr[3] is out of range");
    const struct splash_tensor_info *t = a->tensor_find(m, "q");
    assert_non_null(t);
    assert_string_equal(t->type_name, "Q8_0");
    assert_int_equal(t->n_bytes, sizeof q8);
    assert_int_equal((uintptr_t)t->data % 64, 0);
    assert_memory_equal(t->data, q8, sizeof q8);
    splash_meta_close(m);
}

/* ---- split GGUFs ----------------------------------------------------------------- */

static void test_gguf_split_three_parts_read_as_one(void **state)
{
    struct splash_err err;
    char prefix[512], path[512];
    struct splash_gguf_writer *w = small_model(7);
    int parts = 0;
    assert_int_equal(splash_gguf_writer_write_split(w, tmp_path(prefix, sizeof prefix, "m"), 3,
                                                    &parts, &err),
                     0);
    assert_int_equal(parts, 3);
    splash_gguf_writer_destroy(w);
    /* llama.cpp's split keys in part 2: split.no is 0-based, u16; tensors count i32 */
    struct splash_gguf *g;
    assert_int_equal(splash_gguf_open(tmp_path(path, sizeof path, "m-00002-of-00003.gguf"), 0, &g,
                                      &err),
                     0);
    assert_int_equal(g->n_kv, 3);
    assert_int_equal(g->n_tensors, 3);
    const struct splash_gguf_kv *kv = splash_gguf_find_kv(g, "split.no");
    assert_non_null(kv);
    assert_int_equal(kv->type, GGUF_U16);
    assert_int_equal(kv->v.u64, 1);
    kv = splash_gguf_find_kv(g, "split.tensors.count");
    assert_int_equal(kv->type, GGUF_I32);
    assert_int_equal(kv->v.i64, 7);
    assert_null(splash_gguf_find_kv(g, "general.architecture"));
    splash_gguf_close(g);

    /* opened through any part, the parts are one model */
    struct splash_meta *m;
    if (splash_meta_open_gguf(path, 0, &m, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(m->n_parts, 3);
    assert_int_equal(api()->n_tensors(m), 7);
    const char *arch;
    assert_int_equal(api()->get_str(m, "general.architecture", &arch, &err), 0);
    assert_string_equal(arch, "qwen35");
    for (int i = 0; i < 7; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", i);
        const struct splash_tensor_info *t = api()->tensor_find(m, name);
        assert_non_null(t);
        assert_memory_equal(t->data, tensor_values[i], sizeof tensor_values[i]);
    }
    splash_meta_close(m);
}

/* llama.cpp's Q4_K_M model split into 3 parts keeps every tensor's type (golden) and bytes. */
static void test_gguf_split_testdata_model_keeps_golden_types(void **state)
{
    struct splash_err err;
    char src[512], prefix[512], path[512];
    struct splash_gguf *g;
    test_testdata_path(src, sizeof src, "models/qwen35-tiny-Q4_K_M.gguf");
    assert_int_equal(splash_gguf_open(src, 0, &g, &err), 0);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    for (size_t i = 0; i < g->n_kv; i++)
        test_gguf_copy_kv(w, &g->kv[i]);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct splash_tensor_info *t = &g->tensors[i].info;
        assert_int_equal(splash_gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne,
                                                       t->data, t->n_bytes, &err),
                         0);
    }
    size_t per_part = (g->n_tensors + 2) / 3;
    int parts;
    assert_int_equal(splash_gguf_writer_write_split(w, tmp_path(prefix, sizeof prefix, "q4km"),
                                                    per_part, &parts, &err),
                     0);
    assert_int_equal(parts, 3);
    splash_gguf_writer_destroy(w);

    json_t *golden = json_load_file(test_testdata_path(path, sizeof path,
                                                       "golden/qwen35-tiny-Q4_K_M.json"),
                                    0, NULL);
    assert_non_null(golden);
    json_t *types = json_object_get(golden, "tensor_types");
    struct splash_meta *m;
    if (splash_meta_open_gguf(tmp_path(path, sizeof path, "q4km-00003-of-00003.gguf"), 0, &m,
                              &err))
        fail_msg("%s", err.msg);
    assert_int_equal(api()->n_tensors(m), json_object_size(types));
    const char *name;
    json_t *type;
    json_object_foreach(types, name, type) {
        const struct splash_tensor_info *t = api()->tensor_find(m, name);
        assert_non_null(t);
        assert_string_equal(t->type_name, json_string_value(type));
        const struct splash_gguf_tensor *orig = splash_gguf_find_tensor(g, name);
        assert_int_equal(t->n_bytes, orig->info.n_bytes);
        assert_memory_equal(t->data, orig->info.data, t->n_bytes);
    }
    int64_t blocks;
    assert_int_equal(api()->get_i64(m, "qwen35.block_count", &blocks, &err), 0);
    assert_int_equal(blocks, 8);
    splash_meta_close(m);
    json_decref(golden);
    splash_gguf_close(g);
}

/* Writes part k of n by hand, with the split keys given. */
static void write_part(const char *name, int k, int n, uint16_t count, int32_t tensors_count,
                       int first_tensor, int n_tensors)
{
    struct splash_err err;
    char path[512];
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    uint16_t no = (uint16_t)(k - 1);
    if (k == 1)
        assert_int_equal(splash_gguf_writer_set_str(w, "general.architecture", "qwen35", &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "split.no", GGUF_U16, &no, &err), 0);
    assert_int_equal(splash_gguf_writer_set_scalar(w, "split.count", GGUF_U16, &count, &err), 0);
    assert_int_equal(splash_gguf_writer_set_i32(w, "split.tensors.count", tensors_count, &err), 0);
    for (int i = first_tensor; i < first_tensor + n_tensors; i++) {
        char tname[64];
        int64_t ne[2] = {8, 4};
        snprintf(tname, sizeof tname, "blk.%d.attn_norm.weight", i);
        assert_int_equal(splash_gguf_writer_add_tensor(w, tname, 0, 2, ne, tensor_values[i],
                                                       sizeof tensor_values[i], &err),
                         0);
    }
    char file[128];
    snprintf(file, sizeof file, "%s-%05d-of-%05d.gguf", name, k, n);
    assert_int_equal(splash_gguf_writer_write_file(w, tmp_path(path, sizeof path, file), &err), 0);
    splash_gguf_writer_destroy(w);
}

static void expect_open_error(const char *file, enum splash_status want, const char *msg)
{
    char path[512];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    enum splash_status st = splash_meta_open_gguf(tmp_path(path, sizeof path, file), 0, &m, &err);
    if (st == SPLASH_OK)
        splash_meta_close(m);
    assert_int_equal(st, want);
    assert_string_equal(err.msg, msg);
}

static void test_gguf_split_missing_part_refused(void **state)
{
    write_part("miss", 1, 3, 3, 6, 0, 2);
    write_part("miss", 2, 3, 3, 6, 2, 2);
    expect_open_error("miss-00001-of-00003.gguf", SPLASH_ERR_NOT_FOUND,
                      "miss-00003-of-00003.gguf: split part 3 of 3 is missing");
    write_part("miss", 3, 3, 3, 6, 4, 2);
    char path[512];
    struct splash_meta *m;
    struct splash_err err;
    assert_int_equal(splash_meta_open_gguf(tmp_path(path, sizeof path, "miss-00002-of-00003.gguf"),
                                           0, &m, &err),
                     0);
    assert_int_equal(api()->n_tensors(m), 6);
    splash_meta_close(m);
}

static void test_gguf_split_wrong_count_refused(void **state)
{
    write_part("cnt", 1, 3, 2, 6, 0, 2);
    write_part("cnt", 2, 3, 2, 6, 2, 2);
    write_part("cnt", 3, 3, 2, 6, 4, 2);
    expect_open_error("cnt-00002-of-00003.gguf", SPLASH_ERR_INVALID,
                      "cnt-00001-of-00003.gguf: split.count is 2, the name says 3 parts");
}

static void test_gguf_split_wrong_tensors_count_refused(void **state)
{
    write_part("tc", 1, 3, 3, 7, 0, 2);
    write_part("tc", 2, 3, 3, 7, 2, 2);
    write_part("tc", 3, 3, 3, 7, 4, 2);
    expect_open_error("tc-00003-of-00003.gguf", SPLASH_ERR_INVALID,
                      "tc-00001-of-00003.gguf: split.tensors.count is 7, the parts hold 6 tensors");
}

/* ---- hostile files ---------------------------------------------------------------- */

static void test_gguf_truncated_files_refused_at_every_cut(void **state)
{
    struct splash_err err;
    struct splash_gguf_writer *w = small_model(3);
    const char *toks[2] = {"a", "bc"};
    assert_int_equal(splash_gguf_writer_set_array(w, "tokenizer.ggml.tokens", GGUF_STRING, toks, 2,
                                                  &err),
                     0);
    void *buf;
    size_t size;
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, &size, &err), 0);
    splash_gguf_writer_destroy(w);
    /* every tensor is 128 bytes, a multiple of the alignment: the file ends with data */
    for (size_t cut = 0; cut < size; cut++) {
        struct splash_gguf *g = NULL;
        enum splash_status st = splash_gguf_parse_buffer(buf, cut, "t.gguf", 0, &g, &err);
        if (st == SPLASH_OK)
            fail_msg("a file cut at %zu of %zu bytes was accepted", cut, size);
        assert_int_equal(st, SPLASH_ERR_INVALID);
    }
    expect_parse_error(buf, 10, 0, SPLASH_ERR_INVALID, "t.gguf: truncated at byte 8 reading tensor count");
    struct splash_gguf *g;
    assert_int_equal(splash_gguf_parse_buffer(buf, size, "t.gguf", 0, &g, &err), 0);
    splash_gguf_close(g);
    free(buf);

    /* llama.cpp's file cut at 500 points across header and data: refused, never a crash */
    char path[512];
    size_t msize;
    uint8_t *model = test_read_file(test_testdata_path(path, sizeof path,
                                                       "models/qwen35-tiny-Q4_K_M.gguf"),
                                    &msize);
    assert_non_null(model);
    for (size_t i = 0; i < 500; i++) {
        size_t cut = i < 250 ? i * 97 : (size_t)((double)msize * (i - 250) / 250.0);
        g = NULL;
        assert_int_not_equal(splash_gguf_parse_buffer(model, cut, "m.gguf", 0, &g, &err), 0);
    }
    free(model);
}

/* Offsets in the small model's header, from the layout: counts at 8 and 16, then the
 * first key's length at 24. */
static void *small_model_buffer(size_t *size)
{
    struct splash_err err;
    struct splash_gguf_writer *w = small_model(2);
    void *buf;
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, size, &err), 0);
    splash_gguf_writer_destroy(w);
    return buf;
}

static void put64(void *buf, size_t off, uint64_t v)
{
    memcpy((uint8_t *)buf + off, &v, 8);
}

static void test_gguf_huge_counts_refused(void **state)
{
    size_t size;
    uint8_t *buf = small_model_buffer(&size);
    uint8_t *copy = malloc(size);
    memcpy(copy, buf, size);
    put64(copy, 8, 1ull << 62);
    expect_parse_error(copy, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: tensor count 4611686018427387904 is impossible");
    memcpy(copy, buf, size);
    put64(copy, 16, UINT64_MAX);
    expect_parse_error(copy, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: metadata count 18446744073709551615 is impossible");
    memcpy(copy, buf, size);
    put64(copy, 24, 1ull << 40); /* the first key's length */
    expect_parse_error(copy, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: truncated at byte 32 reading metadata key 0");
    free(copy);
    free(buf);

    /* a string array claiming 2^61 elements */
    struct splash_err err;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    const char *one = "x";
    assert_int_equal(splash_gguf_writer_set_array(w, "arr", GGUF_STRING, &one, 1, &err), 0);
    assert_int_equal(splash_gguf_writer_write_buffer(w, (void **)&buf, &size, &err), 0);
    splash_gguf_writer_destroy(w);
    /* 24 header + 8 + "arr" + type 4 + elem type 4 = 43: the count */
    put64(buf, 43, 1ull << 61);
    expect_parse_error(buf, size, 0, SPLASH_ERR_INVALID, "t.gguf: truncated at byte 51 reading arr");
    free(buf);
}

static void test_gguf_bad_alignment_refused(void **state)
{
    struct splash_err err;
    struct splash_gguf_writer *w = small_model(1);
    assert_int_equal(splash_gguf_writer_set_u32(w, "general.alignment", 48, &err), 0);
    void *buf;
    size_t size;
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, &size, &err), 0);
    expect_parse_error(buf, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: general.alignment must be a power of two up to 65536");
    free(buf);
    assert_int_equal(splash_gguf_writer_set_alignment(w, 48, &err), SPLASH_ERR_INVALID);
    splash_gguf_writer_destroy(w);

    /* a tensor offset off the alignment: patch the second tensor's offset (128) to 4 */
    uint8_t *b = small_model_buffer(&size);
    uint64_t want = 128, four = 4;
    uint8_t *hit = NULL;
    for (size_t i = 24; i + 8 <= 256 && !hit; i++)
        if (!memcmp(b + i, &want, 8))
            hit = b + i;
    assert_non_null(hit);
    memcpy(hit, &four, 8);
    expect_parse_error(b, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: blk.1.attn_norm.weight: offset 4 is not aligned to 32");
    free(b);
}

static void test_gguf_out_of_file_offsets_refused(void **state)
{
    size_t size;
    uint8_t *b = small_model_buffer(&size);
    uint64_t want = 128, far = 1ull << 40;
    uint8_t *hit = NULL;
    for (size_t i = 24; i + 8 <= 256 && !hit; i++)
        if (!memcmp(b + i, &want, 8))
            hit = b + i;
    assert_non_null(hit);
    memcpy(hit, &far, 8);
    expect_parse_error(b, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: blk.1.attn_norm.weight: data (128 bytes at 1099511627776) runs "
                       "past the end of the file");
    /* a header copy has no data to check */
    struct splash_gguf *g;
    struct splash_err err;
    assert_int_equal(splash_gguf_parse_buffer(b, size, "t.gguf", SPLASH_GGUF_HEADERS_ONLY, &g,
                                              &err),
                     0);
    assert_null(g->tensors[1].info.data);
    splash_gguf_close(g);
    free(b);
}

static void test_gguf_unknown_type_and_bad_shape_refused(void **state)
{
    struct splash_err err;
    void *buf;
    size_t size;
    uint8_t data[64] = {0};
    int64_t ne[1] = {16};
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    assert_int_equal(splash_gguf_writer_add_tensor(w, "odd", 77, 1, ne, data, 16, &err), 0);
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, &size, &err), 0);
    splash_gguf_writer_destroy(w);
    expect_parse_error(buf, size, 0, SPLASH_ERR_UNSUPPORTED, "t.gguf: odd: unknown tensor type 77");
    free(buf);
    /* 16 columns of Q4_K (256 per block): the writer refuses, a retyped file is refused */
    w = splash_gguf_writer_create();
    assert_int_equal(splash_gguf_writer_add_tensor(w, "odd", 12, 1, ne, data, 9, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(splash_gguf_writer_add_tensor(w, "odd", 0, 1, ne, data, 64, &err), 0);
    assert_int_equal(splash_gguf_writer_write_buffer(w, &buf, &size, &err), 0);
    splash_gguf_writer_destroy(w);
    /* retype F32 -> Q4_K in place: the type id follows the dims (8 + "odd" + 4 + 8) */
    uint32_t q4k = 12;
    memcpy((uint8_t *)buf + 24 + 8 + 3 + 4 + 8, &q4k, 4);
    expect_parse_error(buf, size, 0, SPLASH_ERR_INVALID,
                       "t.gguf: odd: 16 columns are not a whole number of Q4_K blocks (256)");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_testdata_models_match_golden),
        cmocka_unit_test(test_gguf_writer_bytes_match_the_layout),
        cmocka_unit_test(test_gguf_writer_every_value_type_reads_back),
        cmocka_unit_test(test_gguf_split_three_parts_read_as_one),
        cmocka_unit_test(test_gguf_split_testdata_model_keeps_golden_types),
        cmocka_unit_test(test_gguf_split_missing_part_refused),
        cmocka_unit_test(test_gguf_split_wrong_count_refused),
        cmocka_unit_test(test_gguf_split_wrong_tensors_count_refused),
        cmocka_unit_test(test_gguf_truncated_files_refused_at_every_cut),
        cmocka_unit_test(test_gguf_huge_counts_refused),
        cmocka_unit_test(test_gguf_bad_alignment_refused),
        cmocka_unit_test(test_gguf_out_of_file_offsets_refused),
        cmocka_unit_test(test_gguf_unknown_type_and_bad_shape_refused),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
