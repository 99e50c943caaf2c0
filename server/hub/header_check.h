/* Before any weight moves: the headers of a GGUF target's files, copied by range requests
 * (or from the cache's blob when it is there), and the engine's model-check on them. */
#ifndef SPLASH_HUB_HEADER_CHECK_H
#define SPLASH_HUB_HEADER_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "server/hub/api.h"
#include "server/hub/env.h"

struct splash_registry;

/* What model-check said of a model that passed. */
struct splash_hub_verdict {
    char family[64];      /* the plugin that claimed it */
    char draft_repo[128]; /* the DFlash2 draft its family names for its size, or "" */
};

/* Copies a GGUF's header (metadata and tensor directory) to out_path, from source when
 * local, else by range requests on url: a projector is chosen by its header. */
enum splash_status splash_hub_copy_gguf_header(const struct splash_hub_env *env,
                                               const struct splash_hub_file *f,
                                               const char *source, const char *url,
                                               const char *out_path, struct splash_err *err);

/* files: the target's parts in order; sources[i] is a local path to read, or NULL to read
 * urls[i]. Copies each header into work_dir under the part's name, then checks the first.
 * verdict receives the family and its draft. Errors give model-check's reasons. */
enum splash_status splash_hub_check_gguf_headers(const struct splash_hub_env *env,
                                                 const struct splash_registry *registry,
                                                 const struct splash_hub_file *const *files,
                                                 const char *const *sources,
                                                 const char *const *urls, size_t n,
                                                 const char *work_dir,
                                                 struct splash_hub_verdict *verdict,
                                                 struct splash_err *err);


/* The same for a safetensors (MLX, Model Optimizer, compressed-tensors) target: files are
 * its config.json, index and other small files, whose sources must be local (downloaded
 * already), and its .safetensors shards, whose headers (the 8-byte length and the JSON) are
 * read by range requests unless local. model-check runs on the directory of copies. */
enum splash_status splash_hub_check_safetensors_headers(const struct splash_hub_env *env,
                                                        const struct splash_registry *registry,
                                                        const struct splash_hub_file *const *files,
                                                        const char *const *sources,
                                                        const char *const *urls, size_t n,
                                                        const char *work_dir,
                                                        struct splash_hub_verdict *verdict,
                                                        struct splash_err *err);

#endif
