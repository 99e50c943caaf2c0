#include "tests/support/quantref.h"

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include <stdio.h>

#include "splash/act.h"
#include "splash/fp.h"
#include "tests/support/testdata.h"

void *test_quant_load(const char *file, const char *ext, size_t want, size_t *size)
{
    char rel[128], path[512];
    snprintf(rel, sizeof rel, "quant/%s.%s", file, ext);
    size_t n = 0;
    void *p = test_read_file(test_testdata_path(path, sizeof path, rel), &n);
    if (!p)
        fail_msg("cannot read %s", path);
    if (want && n != want)
        fail_msg("%s: %zu bytes, expected %zu", path, n, want);
    if (size)
        *size = n;
    return p;
}

json_t *test_quant_index_load(char *msg, size_t msg_size)
{
    char path[512];
    json_error_t jerr;
    json_t *index =
        json_load_file(test_testdata_path(path, sizeof path, "quant/index.json"), 0, &jerr);
    if (!index)
        snprintf(msg, msg_size, "%s: %s", path, jerr.text);
    return index;
}

const json_t *test_quant_index_type(const json_t *index, const char *file)
{
    const json_t *e = json_object_get(json_object_get(index, "types"), file);
    if (!e)
        fail_msg("index.json has no type %s", file);
    return e;
}

void test_q8_0_to_float(const void *blocks, float *out, int64_t n)
{
    const struct splash_q8_0_block *b = blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++)
        for (int j = 0; j < SPLASH_QK8_0; j++)
            out[i * SPLASH_QK8_0 + j] = splash_fp16_to_fp32(b[i].d) * (float)b[i].qs[j];
}
