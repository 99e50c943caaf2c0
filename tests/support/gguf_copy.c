#include "tests/support/gguf_copy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void test_gguf_copy_kv(struct splash_gguf_writer *w, const struct splash_gguf_kv *kv)
{
    struct splash_err err = {{0}};
    enum splash_status st;
    if (kv->type == GGUF_STRING) {
        st = splash_gguf_writer_set_str(w, kv->key, kv->v.str, &err);
    } else if (kv->type == GGUF_ARRAY) {
        st = splash_gguf_writer_set_array(w, kv->key, kv->arr_type, kv->arr, (size_t)kv->n, &err);
    } else {
        /* scalars are parsed into 64 bits: written back in their own width */
        union {
            uint8_t u8;
            uint16_t u16;
            uint32_t u32;
            uint64_t u64;
            float f32;
            double f64;
        } u;
        switch (kv->type) {
        case GGUF_U8:
        case GGUF_I8:
        case GGUF_BOOL: u.u8 = (uint8_t)kv->v.u64; break;
        case GGUF_U16:
        case GGUF_I16: u.u16 = (uint16_t)kv->v.u64; break;
        case GGUF_U32:
        case GGUF_I32: u.u32 = (uint32_t)kv->v.u64; break;
        case GGUF_F32: u.f32 = (float)kv->v.f64; break;
        case GGUF_F64: u.f64 = kv->v.f64; break;
        default: u.u64 = kv->v.u64; break;
        }
        st = splash_gguf_writer_set_scalar(w, kv->key, kv->type, &u, &err);
    }
    if (st)
        fail_msg("%s: %s", kv->key, err.msg);
}

/* src copied to a temporary file with an F32 tensor `name` of n values `value` added. */
char *test_gguf_with_tensor(const char *src, const char *name, int64_t n, float value)
{
    struct splash_gguf *g;
    struct splash_err err = {{0}};
    if (splash_gguf_open(src, 0, &g, &err))
        fail_msg("%s", err.msg);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    for (size_t i = 0; i < g->n_kv; i++)
        test_gguf_copy_kv(w, &g->kv[i]);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct splash_tensor_info *t = &g->tensors[i].info;
        if (splash_gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data,
                                          t->n_bytes, &err))
            fail_msg("%s", err.msg);
    }
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = value;
    int64_t ne[1] = {n};
    if (splash_gguf_writer_add_tensor(w, name, 0 /* F32 */, 1, ne, v, (size_t)n * sizeof *v,
                                      &err))
        fail_msg("%s", err.msg);
    char *out = strdup("/tmp/splash-scale-XXXXXX.gguf");
    int fd = mkstemps(out, 5);
    close(fd);
    if (splash_gguf_writer_write_file(w, out, &err))
        fail_msg("%s", err.msg);
    splash_gguf_writer_destroy(w);
    free(v);
    splash_gguf_close(g);
    return out;
}
