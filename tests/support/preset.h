/* make-model's presets in tests. */
#ifndef SPLASH_TEST_PRESET_H
#define SPLASH_TEST_PRESET_H

#include "cli/modelgen/model_shape.h"

/* The preset called name from the global registry's families, in static storage (the
 * next call replaces it: copy it to keep it); fails the test when there is none. */
struct splash_model_shape *test_preset(const char *name);

#endif
