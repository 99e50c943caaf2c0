/* Presets for an architecture whose family plugin exports no preset table (one built
 * before ABI 1.4): make-model offers them only while the claiming family has none. */
#ifndef SPLASH_MODELGEN_LEGACY_PRESETS_H
#define SPLASH_MODELGEN_LEGACY_PRESETS_H

#include "splash/family.h"

/* A table ended by a NULL name. */
extern const struct splash_family_preset splash_legacy_presets[];

#endif
