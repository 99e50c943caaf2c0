/* Local preparation (models.md "Local model files"): splash_prepare_local_model, the C
 * form of install.local.prepare_local_model. It never contacts the Hub. The files are
 * checked as a download is (model-check on their headers) and assembled as links in
 * MODELS/local--NAME--PATHHASH/KEY, KEY a hash of each file's real path, size and
 * modification time: preparing the same files again returns the same directory after a
 * stat of each; a changed file gives another, and the earlier one goes once no server holds
 * it. The first preparation reads each file outside the Hugging Face cache once, for the
 * SHA-256 that model.json records. */
#ifndef SPLASH_HUB_PREPARE_H
#define SPLASH_HUB_PREPARE_H

#include <limits.h>

#include "splash/status.h"

struct splash_registry;

struct splash_prepared {
    char dir[PATH_MAX];    /* the assembly: what a server is started on */
    char target[PATH_MAX]; /* the GGUF (first part) or the model directory in it */
    int kind;              /* enum splash_target_kind */
};

/* target: a GGUF file, any part of a split GGUF, a directory of GGUF targets of one name, or
 * an MLX model directory; variant selects among a directory's targets (NULL: its only one).
 * draft: NULL or a DFlash2 draft directory (config.json and its safetensors); mmproj: NULL or
 * a GGUF projector. models_dir: NULL for Splash's. Errors name the file and the reason. */
enum splash_status splash_prepare_local_model(const struct splash_registry *registry,
                                              const char *target, const char *variant,
                                              const char *draft, const char *mmproj,
                                              const char *models_dir,
                                              struct splash_prepared *out,
                                              struct splash_err *err);

#endif
