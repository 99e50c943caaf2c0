/* Shards a safetensors target needs. */
#include "server/hub/shards.h"

#include <string.h>

#include "core/safetensors.h"

int splash_hub_shard_wanted(const json_t *weight_map, const char *path, int language_only)
{
    if (!json_is_object(weight_map))
        return !strchr(path, '/');
    int named = 0;
    const char *tensor;
    json_t *file;
    json_object_foreach((json_t *)weight_map, tensor, file)
        named |= json_is_string(file) && !strcmp(json_string_value(file), path);
    return named && (!language_only || splash_safetensors_shard_needed(weight_map, path));
}
