/* Fuzzes the Hub's revision answer (server/hub/api.c) and target selection over the
 * listing it gives (core/target.c). The input is the JSON, optionally followed by a NUL
 * byte and a variant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/target.h"
#include "server/hub/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char variant[64] = "";
    if (nul) {
        size_t len = size - json_len - 1;
        if (len >= sizeof variant)
            len = sizeof variant - 1;
        memcpy(variant, nul + 1, len);
        variant[strnlen(variant, len)] = 0;
    }
    struct splash_hub_revision rev;
    struct splash_err err;
    if (splash_hub_revision_parse((const char *)data, json_len, &rev, &err))
        return 0;
    const char **paths = malloc((rev.n_files + 1) * sizeof *paths);
    if (paths) {
        for (size_t i = 0; i < rev.n_files; i++)
            paths[i] = rev.files[i].path;
        struct splash_target t;
        if (!splash_target_select_listing(paths, rev.n_files, variant, &t, &err) &&
            t.kind != SPLASH_TARGET_SAFETENSORS) {
            char part[PATH_MAX];
            for (int k = 1; k <= t.n_parts && k <= 64; k++)
                splash_target_part_path(&t, k, part, sizeof part);
        }
        free(paths);
    }
    splash_hub_revision_free(&rev);
    return 0;
}
