/* Every call into a draft plugin goes through these wrappers (like core/family.h for
 * families): opening a draft directory, selection by claims against the target, and
 * the vtable members. */
#ifndef SPLASH_CORE_DRAFT_H
#define SPLASH_CORE_DRAFT_H

#include "splash/draft.h"

struct splash_registry;
struct splash_meta;

/* Opens a draft directory: config.json, its safetensors (the index's shards, else
 * model.safetensors, else model*.safetensors) and the files a release may add beside
 * them (mask_embedding.safetensors), each tensor bound to r's format. flags: SPLASH_SAFETENSORS_HEADERS_ONLY for header
 * copies. */
enum splash_status splash_draft_open(const struct splash_registry *r, const char *dir,
                                     unsigned flags, struct splash_meta **out,
                                     struct splash_err *err);

/* The draft plugin whose claims (config.json "architectures") and check take this draft
 * with this target; a plugin that claims it and refuses returns its error (naming the
 * key). Equal top scores are an error naming both plugins. */
enum splash_status splash_draft_select(const struct splash_registry *r,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       const struct splash_draft_plugin **plugin,
                                       struct splash_draft_verdict *verdict,
                                       struct splash_err *err);

/* The architecture name a draft plugin claims for a model's own MTP (nextn) layers, which it
 * reads from the target's file: the target's meta is the draft's too. */
#define SPLASH_DRAFT_NEXTN "NextN"

/* The draft plugin that runs the target's own MTP layers, held to the target's file (its
 * check): an error names the model and why (no nextn layers, a block it does not run). */
enum splash_status splash_draft_select_nextn(const struct splash_registry *r,
                                             const struct splash_meta *target,
                                             const struct splash_draft_plugin **plugin,
                                             struct splash_draft_verdict *verdict,
                                             struct splash_err *err);

/* create with r's host; info is filled. */
enum splash_status splash_draft_create(const struct splash_registry *r,
                                       const struct splash_draft_plugin *p,
                                       const struct splash_meta *draft,
                                       const struct splash_meta *target,
                                       const struct splash_draft_opts *opts, void **model,
                                       struct splash_draft_info *info, struct splash_err *err);
void splash_draft_destroy(const struct splash_draft_plugin *p, void *model);
enum splash_status splash_draft_ctx_create(const struct splash_draft_plugin *p, void *model,
                                           void **ctx, struct splash_err *err);
void splash_draft_ctx_destroy(const struct splash_draft_plugin *p, void *model, void *ctx);
/* A copy of ctx that goes on apart (ABI 1.4); SPLASH_ERR_UNSUPPORTED from an older plugin. */
enum splash_status splash_draft_ctx_fork(const struct splash_draft_plugin *p, void *model,
                                         const void *ctx, void **out, struct splash_err *err);
enum splash_status splash_draft_append_context(const struct splash_draft_plugin *p, void *model,
                                               void *ctx, const float *taps, int64_t stride,
                                               int32_t pos0, int32_t n, struct splash_err *err);
enum splash_status splash_draft_rollback(const struct splash_draft_plugin *p, void *model,
                                         void *ctx, int32_t n_keep, struct splash_err *err);
enum splash_status splash_draft_propose(const struct splash_draft_plugin *p, void *model,
                                        void *ctx, const struct splash_draft_block *b,
                                        struct splash_err *err);

#endif
