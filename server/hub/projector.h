/* A GGUF repository's vision projector (models.md "Vision"): a root GGUF whose name holds
 * mmproj, chosen by its header: a clip projector whose weights are BF16, F32 or F16,
 * preferred in that order. Headers are read by range requests (or from the cache). */
#ifndef SPLASH_HUB_PROJECTOR_H
#define SPLASH_HUB_PROJECTOR_H

#include "server/hub/api.h"
#include "server/hub/env.h"

/* Is path a projector candidate (a root .gguf whose name holds mmproj)? */
int splash_hub_is_projector(const char *path);

/* The weight type a projector header names ("BF16", "F32", "F16"), or NULL when the file
 * is not a clip projector of those (reason in why). */
const char *splash_hub_projector_kind(const char *header_path, char *why, size_t why_size);

/* The repository's best projector, or NULL (with why) when it has none this server loads.
 * repo_dir: the cache folder (a blob there is read instead of the Hub); work_dir: where
 * the header copies go (removed after). */
const struct splash_hub_file *splash_hub_choose_projector(const struct splash_hub_env *env,
                                                          const char *repo_id,
                                                          const struct splash_hub_revision *rev,
                                                          const char *repo_dir,
                                                          const char *work_dir, char *why,
                                                          size_t why_size);

#endif
