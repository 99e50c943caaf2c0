/* A model's metadata and tensor directory behind the host's splash_meta_api:
 * one GGUF, the parts of a split GGUF read as one, or a config.json with
 * safetensors shards. */
#ifndef SPLASH_CORE_META_H
#define SPLASH_CORE_META_H

#include <jansson.h>

#include "core/gguf.h"
#include "splash/host.h"

struct splash_registry;

struct splash_meta {
    int source;                 /* enum splash_meta_source */
    char *path;                 /* the file named in messages */
    struct splash_gguf **parts; /* GGUF: every part in order (1 for a whole file) */
    size_t n_parts;
    json_t *config;             /* CONFIG: the parsed config.json */
    struct splash_tensor_info **tensors; /* all parts' tensors, in file order */
    size_t n_tensors, cap_tensors;
    size_t *index;              /* open-addressing hash of tensor names (n_index slots) */
    size_t n_index;
    void *owner_data;           /* safetensors shards etc., freed by owner_free */
    void (*owner_free)(void *owner_data);
    /* A loader whose tensors' data it makes when they are bound (an import deferred, see
     * core/st_target.h): 1 when t is one of them and not made yet; realize makes it. */
    int (*deferred)(void *owner_data, const struct splash_tensor_info *t);
    enum splash_status (*realize)(void *owner_data, const struct splash_tensor_info *t,
                                  struct splash_err *err);
};

/* Opens a GGUF target: a whole file, or any part NAME-0000K-of-0000N.gguf of a split
 * GGUF, whose parts 1..N must all lie beside it (split.count and split.tensors.count
 * checked). flags: SPLASH_GGUF_HEADERS_ONLY for header copies (model-check). */
enum splash_status splash_meta_open_gguf(const char *path, unsigned flags, struct splash_meta **out,
                                         struct splash_err *err);
/* A meta over a GGUF already parsed (its metadata and tensors), named path in messages;
 * takes g (closed with the meta, or at once on failure). */
enum splash_status splash_meta_from_gguf(struct splash_gguf *g, const char *path,
                                         struct splash_meta **out, struct splash_err *err);
/* Opens a config.json (no tensors yet; safetensors readers add them). */
enum splash_status splash_meta_open_config(const char *config_path, struct splash_meta **out,
                                           struct splash_err *err);
void splash_meta_close(struct splash_meta *m);

/* Appends tensors (the info structs are owned by the caller until close, via owner_data). */
enum splash_status splash_meta_add_tensor(struct splash_meta *m, struct splash_tensor_info *t,
                                          struct splash_err *err);
/* Sets info.format of each tensor from the registry (NULL where no plugin decodes it). */
void splash_meta_bind_formats(struct splash_meta *m, const struct splash_registry *r);

const struct splash_meta_api *splash_meta_api_get(void);

/* 1 when t's data is made only when it is bound (info.data NULL until then). */
int splash_meta_tensor_deferred(const struct splash_meta *m, const struct splash_tensor_info *t);
/* Makes a deferred tensor's data (info.data set); nothing for one that has it. Errors name
 * the file and tensor. */
enum splash_status splash_meta_tensor_realize(const struct splash_meta *m,
                                              const struct splash_tensor_info *t,
                                              struct splash_err *err);

/* Split-name parsing: "NAME-00002-of-00005.gguf" -> prefix length, k=2, n=5. */
int splash_gguf_split_name(const char *file, size_t *prefix_len, int *k, int *n);

#endif
