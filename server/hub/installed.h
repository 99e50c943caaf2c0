/* The one reader of the installed-model layout (DATA/models, server/hub/install.h) that
 * `splash models` and `splash --list-models` (the shell completions) share: each
 * installation whose current assembly is whole, with its model.json. */
#ifndef SPLASH_HUB_INSTALLED_H
#define SPLASH_HUB_INSTALLED_H

#include <jansson.h>

#include "server/hub/install.h"

/* meta: the assembly's model.json (borrowed for the call). Return non-zero to stop. */
typedef int (*splash_installed_fn)(const char *name, const struct splash_installed *inst,
                                   json_t *meta, void *user);
/* An installation a start could not serve as it is (half-installed, damaged). */
typedef void (*splash_installed_bad_fn)(const char *name, const struct splash_err *why,
                                        void *user);

/* Walks models_dir (NULL: Splash's) in name order. A missing models folder is no model. */
enum splash_status splash_installed_each(const char *models_dir, splash_installed_fn fn,
                                         splash_installed_bad_fn bad, void *user,
                                         struct splash_err *err);

#endif
