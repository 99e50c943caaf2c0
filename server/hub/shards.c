/* Shards a safetensors target needs. */
#include "server/hub/shards.h"

#include <string.h>

int splash_hub_is_vision_tensor(const char *name)
{
    static const char *const prefixes[] = {"vision_tower.", "model.visual.", "visual.",
                                           "model.vision_tower.", "multi_modal_projector.",
                                           "model.multi_modal_projector."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

int splash_hub_shard_wanted(const json_t *weight_map, const char *path, int language_only)
{
    if (!json_is_object(weight_map))
        return !strchr(path, '/');
    int named = 0, language = 0;
    const char *tensor;
    json_t *file;
    json_object_foreach((json_t *)weight_map, tensor, file) {
        if (!json_is_string(file) || strcmp(json_string_value(file), path))
            continue;
        named = 1;
        language |= !splash_hub_is_vision_tensor(tensor);
    }
    return named && (!language_only || language);
}
