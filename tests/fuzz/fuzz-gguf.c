/* Fuzzes the GGUF reader: parse a buffer (with and without data), then read
 * every key and tensor back through the host's meta getters, as plugins do. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/meta.h"

/* A meta over one parsed GGUF, as splash_meta_open_gguf builds it from a file. */
static struct splash_meta *meta_wrap(struct splash_gguf *g)
{
    struct splash_meta *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->source = SPLASH_META_GGUF;
    m->path = strdup("fuzz.gguf");
    m->parts = malloc(sizeof *m->parts);
    if (!m->path || !m->parts) {
        free(m->path);
        free(m->parts);
        free(m);
        return NULL;
    }
    m->parts[0] = g;
    m->n_parts = 1;
    return m;
}

static void walk(const struct splash_meta *m, const struct splash_gguf *g)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    struct splash_err err;
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < g->n_kv; i++) {
        const char *key = g->kv[i].key;
        int64_t iv;
        double dv;
        int bv;
        const char *sv;
        size_t n = 0;
        sink += (uint64_t)api->has(m, key);
        if (!api->get_i64(m, key, &iv, &err))
            sink += (uint64_t)iv;
        if (!api->get_f64(m, key, &dv, &err))
            sink += (uint64_t)(dv == dv);
        if (!api->get_bool(m, key, &bv, &err))
            sink += (uint64_t)bv;
        if (!api->get_str(m, key, &sv, &err))
            sink += strlen(sv);
        if (api->arr_len(m, key, &n, &err))
            continue;
        /* the first elements, the last, and one past the end */
        for (size_t j = 0; j <= n && j < 8; j++) {
            size_t k = j < 4 ? j : n - (j - 4) ;
            if (!api->arr_i64(m, key, k, &iv, &err))
                sink += (uint64_t)iv;
            if (!api->arr_f64(m, key, k, &dv, &err))
                sink += (uint64_t)(dv == dv);
            if (!api->arr_str(m, key, k, &sv, &err))
                sink += strlen(sv);
        }
        if (!api->arr_i64(m, key, n, &iv, &err))
            __builtin_trap(); /* out of range must be refused */
    }
    size_t nt = api->n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const struct splash_tensor_info *t = api->tensor_at(m, i);
        if (!t || api->tensor_find(m, t->name) != t)
            __builtin_trap();
        sink += t->n_bytes + (uint64_t)t->n_dims + strlen(t->type_name);
        if (t->data && t->n_bytes) {
            const uint8_t *d = t->data;
            sink += d[0] + d[t->n_bytes - 1];
        }
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned flag_sets[2] = {0, SPLASH_GGUF_HEADERS_ONLY};
    for (int f = 0; f < 2; f++) {
        struct splash_gguf *g = NULL;
        struct splash_err err;
        if (splash_gguf_parse_buffer(data, size, "fuzz.gguf", flag_sets[f], &g, &err))
            continue;
        struct splash_meta *m = meta_wrap(g);
        if (!m) {
            splash_gguf_close(g);
            continue;
        }
        for (size_t i = 0; i < g->n_tensors; i++)
            if (splash_meta_add_tensor(m, &g->tensors[i].info, &err))
                break;
        walk(m, g);
        splash_meta_close(m);
    }
    return 0;
}
