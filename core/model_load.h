/* Loading a model for inference: open the target's files, hold them to
 * model-check's rules, and build the family's runnable model over them. */
#ifndef SPLASH_CORE_MODEL_LOAD_H
#define SPLASH_CORE_MODEL_LOAD_H

#include "splash/family.h"

struct splash_meta;
struct splash_registry;
struct splash_pool;

struct splash_loaded_model {
    struct splash_meta *meta;
    const struct splash_family_plugin *family;
    struct splash_family_verdict verdict;
    void *model;                 /* the family's */
    struct splash_model_info info;
    struct splash_pool *pool;    /* owned when created here */
    int owns_pool;
};

/* path: a GGUF file, any part of a split GGUF, or a directory holding one GGUF
 * target or a safetensors checkpoint (config.json and its shards). opts->pool NULL: a
 * pool of n_threads (0 = physical cores) is created. */
enum splash_status splash_model_load(const struct splash_registry *r, const char *path,
                                     const struct splash_model_opts *opts, int n_threads,
                                     struct splash_loaded_model **out, struct splash_err *err);
void splash_model_unload(struct splash_loaded_model *lm);

#endif
