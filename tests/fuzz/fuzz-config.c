/* Fuzzes the checkpoint rules on config.json text. The input is the JSON, optionally
 * followed by a NUL byte and newline-separated tensor names (as an index lists them). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/checkpoint_rules.h"

#define MAX_NAMES 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    json_t *config = json_loadb((const char *)data, json_len, JSON_REJECT_DUPLICATES, NULL);
    if (!config)
        return 0;
    char *names_buf = NULL;
    const char *names[MAX_NAMES];
    size_t n = 0;
    if (nul) {
        size_t rest = size - json_len - 1;
        names_buf = malloc(rest + 1);
        if (!names_buf) {
            json_decref(config);
            return 0;
        }
        memcpy(names_buf, nul + 1, rest);
        names_buf[rest] = 0;
        for (char *p = names_buf; p && n < MAX_NAMES;) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = 0;
            names[n++] = p;
            p = nl ? nl + 1 : NULL;
        }
    }
    struct splash_checkpoint_input in = {
        .config = config,
        .config_name = "config.json",
        .tensors = nul ? names : NULL,
        .n_tensors = n,
        .names_file = "model.safetensors.index.json",
    };
    struct splash_err err;
    int kind = 0;
    enum splash_status st = splash_checkpoint_check(&in, &kind, &err);
    if (st && !memchr(err.msg, 0, sizeof err.msg))
        __builtin_trap(); /* the message must be a terminated string */
    free(names_buf);
    json_decref(config);
    return 0;
}
