#include "tests/support/gguf_copy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

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
