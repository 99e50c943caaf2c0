/* safetensors reader: the 8-byte header length, the JSON header, the mapped data;
 * and a model directory's config.json plus every shard as one splash_meta.
 *
 * Held to the safetensors format: header at most 100 MB starting with '{', no
 * duplicate keys, `__metadata__` a map of strings, each tensor's data_offsets inside
 * the data section and equal to its shape times its dtype's size, and the tensors
 * covering the data section exactly, without gaps or overlaps. */
#ifndef SPLASH_CORE_SAFETENSORS_H
#define SPLASH_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "splash/host.h"
#include "splash/status.h"

struct splash_meta;

#define SPLASH_SAFETENSORS_MAX_HEADER 100000000ull
#define SPLASH_SAFETENSORS_MAX_DIMS 8
/* A header copy: data need not be present (no size check against the file, no map). */
#define SPLASH_SAFETENSORS_HEADERS_ONLY 1u

struct splash_safetensors_tensor {
    /* info.name points at name; info.ne folds a rank above 4 into ne[3]; a scalar
     * (shape []) has n_dims 0 and every ne 1. */
    struct splash_tensor_info info;
    int32_t rank;                                 /* the stored shape's rank */
    int64_t shape[SPLASH_SAFETENSORS_MAX_DIMS];   /* as stored: shape[0] slowest */
    uint64_t begin, end;                          /* data_offsets in the data section */
};

struct splash_safetensors {
    char *path;
    uint64_t header_size;   /* the JSON's bytes */
    uint64_t data_offset;   /* 8 + header_size */
    uint64_t data_size;     /* the bytes the tensors cover */
    size_t n_tensors;
    struct splash_safetensors_tensor *tensors; /* in header order */
    json_t *metadata;       /* __metadata__ (a string map) or NULL */
    void *map;              /* whole-file mapping; NULL for a buffer or HEADERS_ONLY */
    size_t map_size;
};

/* dtype string ("BF16", "F8_E4M3") -> enum splash_dtype, its element size and
 * canonical name; 0 when unknown. */
int splash_safetensors_dtype(const char *s, int32_t *dtype, uint32_t *elem_size,
                             const char **name);

enum splash_status splash_safetensors_open(const char *path, unsigned flags,
                                           struct splash_safetensors **out,
                                           struct splash_err *err);
/* Parses an image in memory (tests, fuzzing); tensor data points into buf. */
enum splash_status splash_safetensors_parse_buffer(const void *buf, size_t size, const char *name,
                                                   unsigned flags,
                                                   struct splash_safetensors **out,
                                                   struct splash_err *err);
void splash_safetensors_close(struct splash_safetensors *st);

const struct splash_safetensors_tensor *
splash_safetensors_find(const struct splash_safetensors *st, const char *name);

/* Opens a model directory: config.json (top-level keys, or a model's under text_config,
 * through the meta's dotted paths) and its weights: the shards model.safetensors.index.json
 * maps (every shard must exist and hold the tensors mapped to it), else model.safetensors,
 * else every root model*.safetensors. Every shard's tensors are added to the meta, which
 * owns the shards. flags: SPLASH_SAFETENSORS_HEADERS_ONLY for header copies. */
enum splash_status splash_safetensors_open_model(const char *dir, unsigned flags,
                                                 struct splash_meta **out,
                                                 struct splash_err *err);

/* Adds one more safetensors file's tensors to a model splash_safetensors_open_model opened
 * (a draft's mask_embedding.safetensors); the meta owns it. A tensor name another file
 * holds is refused, naming both. */
enum splash_status splash_safetensors_add_file(struct splash_meta *m, const char *path,
                                               unsigned flags, struct splash_err *err);

/* The shard file (relative to the directory) holding tensor t of a meta that
 * splash_safetensors_open_model opened, for messages. */
const char *splash_safetensors_shard_name(const struct splash_meta *m,
                                         const struct splash_tensor_info *t);

/* Does the text model need `shard`? 1 when the index's weight_map (tensor -> file) maps to
 * it a tensor the checkpoint rules do not ignore (a vision tower, a projector and MTP layers
 * they ignore). The loader passes over a missing shard it does not need; the installer's
 * --language-only downloads none. */
int splash_safetensors_shard_needed(const json_t *weight_map, const char *shard);

/* The shard files of a model directory, relative to it, in load order (from the index,
 * else as above). *names is one malloc'ed block (free it); NOT_FOUND when there is none. */
enum splash_status splash_safetensors_list_shards(const char *dir, char ***names, size_t *n,
                                                  struct splash_err *err);

#endif
