/* The demonstration model `splash serve --demo` serves: the tiny story model trained
 * and shipped under packaging/demo/ (its README.md is the model card). */
#ifndef SPLASH_MODELGEN_DEMO_MODEL_H
#define SPLASH_MODELGEN_DEMO_MODEL_H

#include <stddef.h>

#include "splash/status.h"

#define SPLASH_DEMO_MODEL_FILE "splash-demo-Q8_0.gguf"

/* Finds the shipped demo model from where the executable exe lives: installed,
 * <prefix>/bin/splash reads <prefix>/share/splash/demo/; uninstalled, build/splash
 * reads the source tree's packaging/demo/. No path is compiled in. out gets the
 * file's canonical path. Fails naming both places when neither holds the file. */
enum splash_status splash_demo_model_find(const char *exe, char *out, size_t size,
                                          struct splash_err *err);

/* splash_demo_model_find for the running executable (/proc/self/exe). */
enum splash_status splash_demo_model_path(char *out, size_t size, struct splash_err *err);

#endif
