/* GGUF reader (v2 and v3): metadata, tensor directory, mapped data.
 * Every count, size, offset and string length is checked against the file
 * before use; errors name the file and the field. */
#ifndef SPLASH_CORE_GGUF_H
#define SPLASH_CORE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"
#include "splash/status.h"

enum splash_gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11,
    GGUF_F64 = 12,
};

struct splash_gguf_kv {
    char *key;
    uint32_t type;      /* enum splash_gguf_vtype */
    uint32_t arr_type;  /* element type when type == GGUF_ARRAY */
    uint64_t n;         /* array length (1 for scalars) */
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        char *str;
    } v;                /* scalars */
    void *arr;          /* arrays: n elements (char ** for strings, else packed values) */
};

struct splash_gguf_tensor {
    struct splash_tensor_info info; /* info.name points into this struct's name */
    uint64_t offset;                /* from the start of the data section */
};

#define SPLASH_GGUF_HEADERS_ONLY 1u /* a header copy: data need not be present */

struct splash_gguf {
    char *path;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;   /* file offset of the data section */
    uint64_t file_size;
    size_t n_kv;
    struct splash_gguf_kv *kv;
    size_t n_tensors;
    struct splash_gguf_tensor *tensors;
    void *map;              /* whole-file mapping, NULL with HEADERS_ONLY */
    size_t map_size;
};

/* Geometry of a GGUF type id, GGML's or one a format plugin claimed: name, elements and
 * bytes per block. 0 when unknown. */
int splash_gguf_type_info(int32_t type, const char **name, uint32_t *block_elems,
                          uint32_t *block_bytes);
/* A format type's GGUF id against what the id already means (GGML's table, or a plugin's
 * earlier claim): a different block geometry is SPLASH_ERR_INVALID naming both. */
enum splash_status splash_gguf_type_check(int32_t id, const char *name, uint32_t block_elems,
                                          uint32_t block_bytes, struct splash_err *err);
/* The same check, then an id GGML does not define becomes one GGUF files may name, with
 * this geometry, for the rest of the process (the registry claims each format type's). */
enum splash_status splash_gguf_type_claim(int32_t id, const char *name, uint32_t block_elems,
                                          uint32_t block_bytes, struct splash_err *err);

enum splash_status splash_gguf_open(const char *path, unsigned flags, struct splash_gguf **out,
                                    struct splash_err *err);
/* Parses a GGUF image already in memory (fuzzing, tests); data is not mapped. */
enum splash_status splash_gguf_parse_buffer(const void *buf, size_t size, const char *name,
                                            unsigned flags, struct splash_gguf **out,
                                            struct splash_err *err);
void splash_gguf_close(struct splash_gguf *g);

const struct splash_gguf_kv *splash_gguf_find_kv(const struct splash_gguf *g, const char *key);
const struct splash_gguf_tensor *splash_gguf_find_tensor(const struct splash_gguf *g,
                                                         const char *name);

#endif
