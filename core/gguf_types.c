/* The GGML tensor types a GGUF directory may name, with their block geometry, and the
 * type ids format plugins add beyond them. File-format knowledge only: decoding them is
 * the format plugins' job. */
#include "core/gguf.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int32_t id;
    const char *name;
    uint32_t block_elems, block_bytes;
} ggml_types[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18},     {142, "PQ2_0", 128, 34},
};

/* Ids a format plugin brought (splash_gguf_type_claim): process-wide, since a file's bytes
 * mean one thing whichever registry reads it. */
#define MAX_PLUGIN_TYPES 64
static struct {
    int32_t id;
    char name[32];
    uint32_t block_elems, block_bytes;
} plugin_types[MAX_PLUGIN_TYPES];
static size_t n_plugin_types;
static pthread_mutex_t plugin_types_lock = PTHREAD_MUTEX_INITIALIZER;

static int ggml_type_info(int32_t type, const char **name, uint32_t *block_elems,
                          uint32_t *block_bytes)
{
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++) {
        if (ggml_types[i].id != type)
            continue;
        if (name)
            *name = ggml_types[i].name;
        if (block_elems)
            *block_elems = ggml_types[i].block_elems;
        if (block_bytes)
            *block_bytes = ggml_types[i].block_bytes;
        return 1;
    }
    return 0;
}

/* The plugin-brought id, or -1; under the lock. */
static int plugin_type_at(int32_t type)
{
    for (size_t i = 0; i < n_plugin_types; i++)
        if (plugin_types[i].id == type)
            return (int)i;
    return -1;
}

int splash_gguf_type_info(int32_t type, const char **name, uint32_t *block_elems,
                          uint32_t *block_bytes)
{
    if (ggml_type_info(type, name, block_elems, block_bytes))
        return 1;
    pthread_mutex_lock(&plugin_types_lock);
    int i = plugin_type_at(type);
    if (i >= 0) {
        if (name)
            *name = plugin_types[i].name;
        if (block_elems)
            *block_elems = plugin_types[i].block_elems;
        if (block_bytes)
            *block_bytes = plugin_types[i].block_bytes;
    }
    pthread_mutex_unlock(&plugin_types_lock);
    return i >= 0;
}

enum splash_status splash_gguf_type_check(int32_t id, const char *name, uint32_t block_elems,
                                          uint32_t block_bytes, struct splash_err *err)
{
    const char *known;
    uint32_t be, bb;
    if (id < 0 || !splash_gguf_type_info(id, &known, &be, &bb))
        return SPLASH_OK;
    if (be != block_elems || bb != block_bytes)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "format %s: GGUF type %d is %s, blocks of %u values in %u bytes, not "
                              "%u in %u",
                              name, id, known, be, bb, block_elems, block_bytes);
    return SPLASH_OK;
}

enum splash_status splash_gguf_type_claim(int32_t id, const char *name, uint32_t block_elems,
                                          uint32_t block_bytes, struct splash_err *err)
{
    enum splash_status st = splash_gguf_type_check(id, name, block_elems, block_bytes, err);
    if (st || id < 0 || ggml_type_info(id, NULL, NULL, NULL))
        return st;
    pthread_mutex_lock(&plugin_types_lock);
    if (plugin_type_at(id) < 0) {
        if (n_plugin_types == MAX_PLUGIN_TYPES) {
            pthread_mutex_unlock(&plugin_types_lock);
            return splash_err_set(err, SPLASH_ERR_NOMEM,
                                  "format %s: GGUF type %d: plugins brought %d type ids already",
                                  name, id, MAX_PLUGIN_TYPES);
        }
        plugin_types[n_plugin_types].id = id;
        snprintf(plugin_types[n_plugin_types].name, sizeof plugin_types[n_plugin_types].name, "%s",
                 name);
        plugin_types[n_plugin_types].block_elems = block_elems;
        plugin_types[n_plugin_types].block_bytes = block_bytes;
        n_plugin_types++;
    }
    pthread_mutex_unlock(&plugin_types_lock);
    return SPLASH_OK;
}
