/* The demonstration model `splash serve --demo` serves: a small random-weight
 * qwen35 model with the built-in tokenizer, built once into the data directory. */
#ifndef SPLASH_MODELGEN_DEMO_MODEL_H
#define SPLASH_MODELGEN_DEMO_MODEL_H

#include <stddef.h>

#include "splash/status.h"

/* Fills out with $XDG_DATA_HOME/splash/demo/<name>.gguf ($HOME/.local/share when
 * XDG_DATA_HOME is unset or not absolute), creating the directories and writing
 * the model with the global registry's plugins if the file is missing (written
 * under a temporary name, then renamed, so a reader never sees half a file). */
enum splash_status splash_demo_model_path(char *out, size_t size, struct splash_err *err);

#endif
