/* The Hugging Face environment as huggingface_hub reads it: HF_ENDPOINT, HF_HOME,
 * HF_HUB_CACHE, HF_TOKEN (and the token file `hf auth login` writes), HF_HUB_OFFLINE. */
#ifndef SPLASH_HUB_ENV_H
#define SPLASH_HUB_ENV_H

#include <limits.h>

#include "splash/status.h"

struct splash_hub_env {
    char endpoint[512];  /* HF_ENDPOINT without trailing '/', or https://huggingface.co */
    char token[512];     /* "" when none */
    char home[PATH_MAX]; /* HF_HOME, or $XDG_CACHE_HOME/huggingface, or ~/.cache/huggingface */
    char cache[PATH_MAX];/* HF_HUB_CACHE, or HUGGINGFACE_HUB_CACHE, or HF_HOME/hub */
    int offline;         /* HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1, ON, YES or TRUE */
};

enum splash_status splash_hub_env_read(struct splash_hub_env *env, struct splash_err *err);

#endif
