/* Which safetensors shards a target needs (models.md "Vision", "--language-only"): the
 * files the index's weight_map names, wherever they lie (a tower may sit in a subdirectory
 * shard of its own); with --language-only, only those the text model needs (the core's
 * splash_safetensors_shard_needed, which the loader holds a directory to as well). Without
 * an index, the root's shards. */
#ifndef SPLASH_HUB_SHARDS_H
#define SPLASH_HUB_SHARDS_H

#include <jansson.h>

/* weight_map: the index's object (tensor -> file), or NULL when there is no index. */
int splash_hub_shard_wanted(const json_t *weight_map, const char *path, int language_only);

#endif
