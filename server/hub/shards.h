/* Which safetensors shards a target needs (models.md "Vision", "--language-only"): the
 * files the index's weight_map names, wherever they lie (a tower may sit in a subdirectory
 * shard of its own); with --language-only, not a shard that holds only vision tensors.
 * Without an index, the root's shards. */
#ifndef SPLASH_HUB_SHARDS_H
#define SPLASH_HUB_SHARDS_H

#include <jansson.h>

/* A vision tower's tensor (MLX vision_tower.*, transformers model.visual.*)? */
int splash_hub_is_vision_tensor(const char *name);

/* weight_map: the index's object (tensor -> file), or NULL when there is no index. */
int splash_hub_shard_wanted(const json_t *weight_map, const char *path, int language_only);

#endif
