/* Fuzzes the safetensors reader: parse a buffer with and without its data and read
 * every tensor's description and bytes back; then, the input cut at its first NUL into a
 * model.safetensors.index.json and one shard, a model directory of both through the
 * checkpoint rules and the shard reader (every shard the index names must exist and
 * hold the tensors it maps). */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checkpoint_rules.h"
#include "core/meta.h"
#include "core/safetensors.h"

static const char config[] =
    "{\"model_type\": \"qwen3_5\", \"quantization\": {\"bits\": 4, \"group_size\": 64}}";

static int write_file(const char *dir, const char *name, const void *data, size_t size)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = fwrite(data, 1, size, f) != size;
    return fclose(f) || bad ? -1 : 0;
}

static char dir[64];

static void remove_dir(void)
{
    const char *files[] = {"config.json", "model.safetensors.index.json",
                           "model-00001-of-00001.safetensors"};
    char path[256];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void model_dir(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz-safetensors-XXXXXX");
        if (!mkdtemp(dir)) {
            dir[0] = 0;
            return;
        }
        atexit(remove_dir);
        if (write_file(dir, "config.json", config, sizeof config - 1))
            return;
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t index_len = nul ? (size_t)(nul - data) : size;
    const uint8_t *shard = nul ? nul + 1 : data + size;
    if (write_file(dir, "model.safetensors.index.json", data, index_len) ||
        write_file(dir, "model-00001-of-00001.safetensors", shard,
                   (size_t)(data + size - shard)))
        return;
    struct splash_err err;
    int kind;
    splash_check_checkpoint(dir, &kind, &err);
    struct splash_meta *m = NULL;
    for (unsigned flags = 0; flags < 2; flags++)
        if (splash_safetensors_open_model(dir, flags, &m, &err) == SPLASH_OK) {
            const struct splash_meta_api *api = splash_meta_api_get();
            for (size_t i = 0; i < api->n_tensors(m); i++)
                if (!splash_safetensors_shard_name(m, api->tensor_at(m, i)))
                    __builtin_trap();
            splash_meta_close(m);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned flag_sets[2] = {0, SPLASH_SAFETENSORS_HEADERS_ONLY};
    for (int f = 0; f < 2; f++) {
        struct splash_safetensors *st = NULL;
        struct splash_err err;
        if (splash_safetensors_parse_buffer(data, size, "fuzz.safetensors", flag_sets[f], &st,
                                            &err))
            continue;
        volatile uint64_t sink = 0;
        for (size_t i = 0; i < st->n_tensors; i++) {
            const struct splash_safetensors_tensor *t = &st->tensors[i];
            uint64_t elems = 1;
            for (int d = 0; d < 4; d++)
                elems *= (uint64_t)t->info.ne[d];
            uint32_t esize;
            if (!splash_safetensors_dtype(t->info.type_name, NULL, &esize, NULL) ||
                elems * esize != t->info.n_bytes || t->end > st->data_size ||
                splash_safetensors_find(st, t->info.name) == NULL)
                __builtin_trap();
            if (t->info.data && t->info.n_bytes) {
                const uint8_t *d = t->info.data;
                sink += d[0] + d[t->info.n_bytes - 1];
            }
        }
        (void)sink;
        splash_safetensors_close(st);
    }
    model_dir(data, size);
    return 0;
}
