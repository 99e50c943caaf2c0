/* safetensors reader: hand-built files of every dtype, sharded model directories, and
 * hostile headers refused with their exact messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/meta.h"
#include "core/safetensors.h"

static char tmp_root[64];

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            rm_tree(path);
        else
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int setup_tmp(void **state)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/splash-test-st-XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    rm_tree(tmp_root);
    return 0;
}

/* A safetensors image: the header's length (little-endian u64), the header, the data. */
static uint8_t *build(const char *header, const void *data, size_t data_len, size_t *size)
{
    size_t hlen = strlen(header);
    *size = 8 + hlen + data_len;
    uint8_t *buf = malloc(*size);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (data_len)
        memcpy(buf + 8 + hlen, data, data_len);
    return buf;
}

static void write_file(const char *rel, const void *buf, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, size, f), size);
    fclose(f);
}

static void write_st(const char *rel, const char *header, const void *data, size_t data_len)
{
    size_t size;
    uint8_t *buf = build(header, data, data_len, &size);
    write_file(rel, buf, size);
    free(buf);
}

static void write_text(const char *rel, const char *text)
{
    write_file(rel, text, strlen(text));
}

static void expect_error(const char *header, const void *data, size_t data_len, unsigned flags,
                         enum splash_status want, const char *msg)
{
    size_t size;
    uint8_t *buf = build(header, data, data_len, &size);
    struct splash_safetensors *st = NULL;
    struct splash_err err = {{0}};
    enum splash_status got = splash_safetensors_parse_buffer(buf, size, "x.safetensors", flags,
                                                             &st, &err);
    if (got == SPLASH_OK)
        splash_safetensors_close(st);
    free(buf);
    if (got != want)
        fail_msg("status %d, want %d (%s)", got, want, err.msg);
    if (strncmp(err.msg, msg, strlen(msg)))
        fail_msg("message \"%s\", want \"%s\"", err.msg, msg);
}

/* ---- dtypes and shapes --------------------------------------------------------- */

static void test_safetensors_every_dtype(void **state)
{
    static const struct {
        const char *name;
        int32_t dtype;
        unsigned size;
    } want[] = {
        {"F64", SPLASH_DTYPE_ST_F64, 8},   {"F32", SPLASH_DTYPE_F32, 4},
        {"F16", SPLASH_DTYPE_F16, 2},      {"BF16", SPLASH_DTYPE_BF16, 2},
        {"I64", SPLASH_DTYPE_ST_I64, 8},   {"I32", SPLASH_DTYPE_ST_I32, 4},
        {"I16", SPLASH_DTYPE_ST_I16, 2},   {"I8", SPLASH_DTYPE_ST_I8, 1},
        {"U8", SPLASH_DTYPE_ST_U8, 1},     {"U16", SPLASH_DTYPE_ST_U16, 2},
        {"U32", SPLASH_DTYPE_ST_U32, 4},   {"U64", SPLASH_DTYPE_ST_U64, 8},
        {"BOOL", SPLASH_DTYPE_ST_BOOL, 1}, {"F8_E4M3", SPLASH_DTYPE_ST_F8_E4M3, 1},
        {"F8_E5M2", SPLASH_DTYPE_ST_F8_E5M2, 1},
    };
    enum { N = sizeof want / sizeof want[0] };
    /* each a [2, 3] tensor, laid out one after the other */
    char header[4096];
    size_t used = (size_t)snprintf(header, sizeof header, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < N; i++) {
        uint64_t n = 6ull * want[i].size;
        used += (size_t)snprintf(header + used, sizeof header - used,
                                 ",\"t.%s\":{\"dtype\":\"%s\",\"shape\":[2,3],"
                                 "\"data_offsets\":[%llu,%llu]}",
                                 want[i].name, want[i].name, (unsigned long long)off,
                                 (unsigned long long)(off + n));
        off += n;
    }
    snprintf(header + used, sizeof header - used, "}");
    uint8_t *data = malloc(off);
    for (uint64_t i = 0; i < off; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    size_t size;
    uint8_t *buf = build(header, data, off, &size);
    struct splash_safetensors *st;
    struct splash_err err;
    if (splash_safetensors_parse_buffer(buf, size, "x.safetensors", 0, &st, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(st->n_tensors, N);
    assert_int_equal(st->data_size, off);
    assert_non_null(st->metadata);
    assert_string_equal(json_string_value(json_object_get(st->metadata, "format")), "pt");
    off = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", want[i].name);
        const struct splash_safetensors_tensor *t = splash_safetensors_find(st, name);
        assert_non_null(t);
        assert_int_equal(t->info.dtype, want[i].dtype);
        assert_string_equal(t->info.type_name, want[i].name);
        assert_int_equal(t->info.n_dims, 2);
        assert_int_equal(t->info.ne[0], 3); /* the last stored dimension is the fastest */
        assert_int_equal(t->info.ne[1], 2);
        assert_int_equal(t->info.ne[2], 1);
        assert_int_equal(t->info.n_bytes, 6 * want[i].size);
        assert_ptr_equal(t->info.data, buf + 8 + strlen(header) + off);
        assert_memory_equal(t->info.data, data + off, t->info.n_bytes);
        off += t->info.n_bytes;
    }
    splash_safetensors_close(st);
    free(buf);
    free(data);
}

static void test_safetensors_scalar_empty_and_high_rank(void **state)
{
    const char *header = "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                         "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[4,4]},"
                         "\"r\":{\"dtype\":\"U8\",\"shape\":[2,3,1,2,2],\"data_offsets\":[4,28]}}  ";
    uint8_t data[28] = {0, 0, 0x80, 0x3f};
    size_t size;
    uint8_t *buf = build(header, data, sizeof data, &size);
    struct splash_safetensors *st;
    struct splash_err err;
    if (splash_safetensors_parse_buffer(buf, size, "x.safetensors", 0, &st, &err))
        fail_msg("%s", err.msg);
    const struct splash_safetensors_tensor *s = splash_safetensors_find(st, "s");
    assert_int_equal(s->info.n_dims, 0);
    assert_int_equal(s->rank, 0);
    assert_int_equal(s->info.ne[0], 1);
    assert_true(*(const float *)s->info.data == 1.0f);
    const struct splash_safetensors_tensor *e = splash_safetensors_find(st, "e");
    assert_int_equal(e->info.n_bytes, 0);
    assert_int_equal(e->info.ne[1], 0);
    const struct splash_safetensors_tensor *r = splash_safetensors_find(st, "r");
    assert_int_equal(r->rank, 5);
    assert_int_equal(r->info.n_dims, 4);
    assert_int_equal(r->info.ne[0], 2);
    assert_int_equal(r->info.ne[1], 2);
    assert_int_equal(r->info.ne[2], 1);
    assert_int_equal(r->info.ne[3], 6); /* 2 x 3 folded */
    assert_int_equal(r->shape[1], 3);
    splash_safetensors_close(st);
    free(buf);
}

static void test_safetensors_headers_only_copy(void **state)
{
    const char *header = "{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}";
    size_t size;
    uint8_t *buf = build(header, NULL, 0, &size); /* the header alone, as installers copy it */
    struct splash_safetensors *st;
    struct splash_err err;
    assert_int_equal(splash_safetensors_parse_buffer(buf, size, "x.safetensors", 0, &st, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "x.safetensors: the tensors cover 8 bytes of a 0-byte data section");
    assert_int_equal(splash_safetensors_parse_buffer(buf, size, "x.safetensors",
                                                     SPLASH_SAFETENSORS_HEADERS_ONLY, &st, &err),
                     0);
    assert_null(st->tensors[0].info.data);
    assert_int_equal(st->tensors[0].info.n_bytes, 8);
    splash_safetensors_close(st);
    free(buf);
}

/* ---- hostile headers ----------------------------------------------------------- */

static void test_safetensors_hostile_lengths_refused(void **state)
{
    struct splash_safetensors *st;
    struct splash_err err;
    uint8_t small[4] = {1, 0, 0, 0};
    assert_int_equal(splash_safetensors_parse_buffer(small, 4, "x.safetensors", 0, &st, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "x.safetensors: 4 bytes is too small for a safetensors header");
    uint8_t big[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100000001 */
    assert_int_equal(splash_safetensors_parse_buffer(big, 16, "x.safetensors", 0, &st, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "x.safetensors: header of 100000001 bytes exceeds the 100 MB limit");
    uint8_t huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    assert_int_equal(splash_safetensors_parse_buffer(huge, 16, "x.safetensors", 0, &st, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg,
                        "x.safetensors: header of 9223372036854775808 bytes exceeds the 100 MB limit");
    uint8_t past[16] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    assert_int_equal(splash_safetensors_parse_buffer(past, 16, "x.safetensors",
                                                     SPLASH_SAFETENSORS_HEADERS_ONLY, &st, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg,
                        "x.safetensors: header of 9 bytes runs past the end of the file (16 bytes)");
    expect_error("[1,2]", NULL, 0, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: header does not start with '{'");
    expect_error("{\"a\":", NULL, 0, 0, SPLASH_ERR_INVALID, "x.safetensors: header: line 1");
    expect_error("{\"a\":1,\"a\":2}", NULL, 0, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: header: line 1");
    expect_error("{}xx", NULL, 0, 0, SPLASH_ERR_INVALID, "x.safetensors: header: line 1");
    /* an empty model is well-formed */
    expect_error("{}", NULL, 0, 0, SPLASH_OK, "");
}

static void test_safetensors_hostile_tensors_refused(void **state)
{
    uint8_t data[64] = {0};
    expect_error("{\"__metadata__\":{\"format\":1}}", NULL, 0, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: __metadata__.format must be a string");
    expect_error("{\"__metadata__\":[]}", NULL, 0, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: __metadata__ must be an object");
    expect_error("{\"t\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", data, 1, 0,
                 SPLASH_ERR_UNSUPPORTED, "x.safetensors: t: dtype F4 is not supported");
    expect_error("{\"t\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,1]}}", data, 1, 0,
                 SPLASH_ERR_INVALID, "x.safetensors: t: dtype must be a string");
    expect_error("{\"t\":{\"dtype\":\"U8\",\"shape\":[2,-1],\"data_offsets\":[0,2]}}", data, 2, 0,
                 SPLASH_ERR_INVALID, "x.safetensors: t: shape[1] must be a non-negative integer");
    expect_error("{\"t\":{\"dtype\":\"U8\",\"shape\":[2.5],\"data_offsets\":[0,2]}}", data, 2, 0,
                 SPLASH_ERR_INVALID, "x.safetensors: t: shape[0] must be a non-negative integer");
    expect_error("{\"t\":{\"dtype\":\"U8\",\"shape\":\"2\",\"data_offsets\":[0,2]}}", data, 2, 0,
                 SPLASH_ERR_INVALID, "x.safetensors: t: shape must be an array");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
                 "\"data_offsets\":[0,2]}}",
                 data, 2, 0, SPLASH_ERR_INVALID, "x.safetensors: t: shape overflows");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952,2],"
                 "\"data_offsets\":[0,2]}}",
                 data, 2, 0, SPLASH_ERR_INVALID, "x.safetensors: t: shape overflows");
    expect_error("{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
                 data, 1, 0, SPLASH_ERR_UNSUPPORTED, "x.safetensors: t: 9 dimensions (at most 8)");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,6]}}", data, 6, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: t: data_offsets [0, 6] hold 6 bytes, its shape and dtype 8");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", data, 8, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: t: data_offsets must be [begin, end] with 0 <= begin <= end");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", data, 8, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: t: data_offsets must be [begin, end] with 0 <= begin <= end");
    expect_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", data, 8, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: t: data_offsets must be [begin, end] with 0 <= begin <= end");
    expect_error("{\"t\":[]}", data, 8, 0, SPLASH_ERR_INVALID, "x.safetensors: t: not an object");
    expect_error("{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", data, 1, 0,
                 SPLASH_ERR_INVALID, "x.safetensors: a tensor has an empty name");
    /* tiling: gaps, overlaps, a short or long data section */
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[10,18]}}",
                 data, 18, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: b: data_offsets [10, 18] leave a gap after the previous "
                 "tensor's end (8)");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 data, 12, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: b: data_offsets [4, 12] overlap the previous tensor's end (8)");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                 data, 8, 0, SPLASH_ERR_INVALID,
                 "x.safetensors: b: data_offsets [0, 8] overlap the previous tensor's end (8)");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", data, 12, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: a: data_offsets [4, 12] leave a gap after the previous tensor's "
                 "end (0)");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 12, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: the tensors cover 8 bytes of a 12-byte data section");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 8, 0,
                 SPLASH_ERR_INVALID,
                 "x.safetensors: the tensors cover 16 bytes of a 8-byte data section");
    /* order in the header does not matter, only the tiling */
    expect_error("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                 data, 16, 0, SPLASH_OK, "");
}

static void test_safetensors_open_file_maps_data(void **state)
{
    float v[3] = {1.5f, -2.0f, 3.25f};
    write_st("one.safetensors",
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", v, sizeof v);
    char path[512];
    snprintf(path, sizeof path, "%s/one.safetensors", tmp_root);
    struct splash_safetensors *st;
    struct splash_err err;
    assert_int_equal(splash_safetensors_open(path, 0, &st, &err), 0);
    assert_memory_equal(st->tensors[0].info.data, v, sizeof v);
    splash_safetensors_close(st);
    assert_int_equal(splash_safetensors_open(path, SPLASH_SAFETENSORS_HEADERS_ONLY, &st, &err), 0);
    assert_null(st->map);
    assert_null(st->tensors[0].info.data);
    splash_safetensors_close(st);
    snprintf(path, sizeof path, "%s/none.safetensors", tmp_root);
    assert_int_equal(splash_safetensors_open(path, 0, &st, &err), SPLASH_ERR_NOT_FOUND);
}

/* ---- model directories -------------------------------------------------------------- */

static const char *mk_model(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    return dir;
}

static const char *const SHARD1_HEADER =
    "{\"model.embed_tokens.weight\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
    "\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
static const char *const SHARD2_HEADER =
    "{\"lm_head.weight\":{\"dtype\":\"U32\",\"shape\":[2,1],\"data_offsets\":[0,8]},"
    "\"lm_head.scales\":{\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[8,12]}}";
static const char *const CONFIG =
    "{\"model_type\":\"qwen3_5\",\"text_config\":{\"hidden_size\":2,\"num_hidden_layers\":1}}";

static void write_sharded(const char *model, const char *index)
{
    uint8_t d1[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, d2[12] = {21, 22, 23};
    char rel[256];
    snprintf(rel, sizeof rel, "%s/config.json", model);
    write_text(rel, CONFIG);
    snprintf(rel, sizeof rel, "%s/model-00001-of-00002.safetensors", model);
    write_st(rel, SHARD1_HEADER, d1, sizeof d1);
    snprintf(rel, sizeof rel, "%s/model-00002-of-00002.safetensors", model);
    write_st(rel, SHARD2_HEADER, d2, sizeof d2);
    snprintf(rel, sizeof rel, "%s/model.safetensors.index.json", model);
    write_text(rel, index);
}

static const char *const INDEX =
    "{\"metadata\":{\"total_size\":24},\"weight_map\":{"
    "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
    "\"model.norm.weight\":\"model-00001-of-00002.safetensors\","
    "\"lm_head.weight\":\"model-00002-of-00002.safetensors\","
    "\"lm_head.scales\":\"model-00002-of-00002.safetensors\"}}";

static void test_safetensors_sharded_model_opens_as_one(void **state)
{
    const char *dir = mk_model("sharded");
    write_sharded("sharded", INDEX);
    struct splash_meta *m;
    struct splash_err err;
    if (splash_safetensors_open_model(dir, 0, &m, &err))
        fail_msg("%s", err.msg);
    const struct splash_meta_api *api = splash_meta_api_get();
    assert_int_equal(api->source(m), SPLASH_META_CONFIG);
    assert_int_equal(api->n_tensors(m), 4);
    int64_t hidden;
    assert_int_equal(api->get_i64(m, "text_config.hidden_size", &hidden, &err), 0);
    assert_int_equal(hidden, 2);
    const struct splash_tensor_info *t = api->tensor_find(m, "model.norm.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, SPLASH_DTYPE_BF16);
    assert_int_equal(((const uint8_t *)t->data)[0], 9);
    t = api->tensor_find(m, "lm_head.weight");
    assert_int_equal(t->dtype, SPLASH_DTYPE_ST_U32);
    assert_int_equal(((const uint8_t *)t->data)[1], 22);
    assert_int_equal(t->ne[0], 1);
    assert_int_equal(t->ne[1], 2);
    splash_meta_close(m);

    char **names;
    size_t n;
    assert_int_equal(splash_safetensors_list_shards(dir, &names, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "model-00001-of-00002.safetensors");
    assert_string_equal(names[1], "model-00002-of-00002.safetensors");
    free(names);
}

static void expect_model_error(const char *dir, enum splash_status want, const char *msg)
{
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    enum splash_status st = splash_safetensors_open_model(dir, 0, &m, &err);
    if (st == SPLASH_OK)
        splash_meta_close(m);
    if (st != want)
        fail_msg("status %d, want %d (%s)", st, want, err.msg);
    assert_string_equal(err.msg, msg);
}

static void test_safetensors_sharded_model_errors(void **state)
{
    const char *dir = mk_model("missing");
    write_sharded("missing",
                  "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                  "\"b\":\"model-00003-of-00003.safetensors\"}}");
    expect_model_error(dir, SPLASH_ERR_NOT_FOUND,
                       "model.safetensors.index.json: shard model-00003-of-00003.safetensors is "
                       "missing");

    dir = mk_model("notheld");
    write_sharded("notheld",
                  "{\"weight_map\":{\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
                  "\"lm_head.weight\":\"model-00002-of-00002.safetensors\","
                  "\"x\":\"model-00001-of-00002.safetensors\"}}");
    expect_model_error(dir, SPLASH_ERR_INVALID,
                       "model.safetensors.index.json: tensor model.norm.weight is mapped to "
                       "model-00002-of-00002.safetensors, which does not hold it");

    dir = mk_model("escape");
    write_sharded("escape", "{\"weight_map\":{\"a\":\"../escape/config.json\"}}");
    expect_model_error(dir, SPLASH_ERR_INVALID,
                       "model.safetensors.index.json: weight_map.a must name a file in the "
                       "model's directory");

    /* a tensor held by two shards */
    dir = mk_model("twice");
    write_sharded("twice", INDEX);
    uint8_t d[12] = {0};
    write_st("twice/model-00002-of-00002.safetensors", SHARD1_HEADER, d, sizeof d);
    expect_model_error(dir, SPLASH_ERR_INVALID,
                       "model-00002-of-00002.safetensors: tensor model.embed_tokens.weight is also "
                       "in model-00001-of-00002.safetensors");

    /* a broken shard names itself */
    dir = mk_model("broken");
    write_sharded("broken", INDEX);
    write_st("broken/model-00002-of-00002.safetensors",
             "{\"lm_head.weight\":{\"dtype\":\"U32\",\"shape\":[2,1],\"data_offsets\":[0,9]}}", d,
             9);
    expect_model_error(dir, SPLASH_ERR_INVALID,
                       "model-00002-of-00002.safetensors: lm_head.weight: data_offsets [0, 9] hold "
                       "9 bytes, its shape and dtype 8");

    dir = mk_model("empty");
    write_text("empty/config.json", CONFIG);
    struct splash_meta *m;
    struct splash_err err;
    assert_int_equal(splash_safetensors_open_model(dir, 0, &m, &err), SPLASH_ERR_NOT_FOUND);
}

static void test_safetensors_single_file_model(void **state)
{
    const char *dir = mk_model("single");
    uint8_t d[12] = {0};
    write_text("single/config.json", CONFIG);
    write_st("single/model.safetensors", SHARD1_HEADER, d, sizeof d);
    struct splash_meta *m;
    struct splash_err err;
    if (splash_safetensors_open_model(dir, 0, &m, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(splash_meta_api_get()->n_tensors(m), 2);
    splash_meta_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_every_dtype),
        cmocka_unit_test(test_safetensors_scalar_empty_and_high_rank),
        cmocka_unit_test(test_safetensors_headers_only_copy),
        cmocka_unit_test(test_safetensors_hostile_lengths_refused),
        cmocka_unit_test(test_safetensors_hostile_tensors_refused),
        cmocka_unit_test(test_safetensors_open_file_maps_data),
        cmocka_unit_test(test_safetensors_sharded_model_opens_as_one),
        cmocka_unit_test(test_safetensors_sharded_model_errors),
        cmocka_unit_test(test_safetensors_single_file_model),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
