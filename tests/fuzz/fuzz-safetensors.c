/* Fuzzes the safetensors reader: parse a buffer with and without its data and read
 * every tensor's description and bytes back. */
#include <stdint.h>
#include <string.h>

#include "core/safetensors.h"

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
    return 0;
}
