/* `splash serve --model OWNER/REPO[:VARIANT]`: the installation before the model loads. */
#ifndef SPLASH_HUB_SERVE_INSTALL_H
#define SPLASH_HUB_SERVE_INSTALL_H

#include <stddef.h>

struct splash_serve_opts;

/* Installs (or finds installed) the model the options name, with --revision and --offline,
 * printing its lines on the console; writes the model to load into path (the GGUF, or a
 * safetensors checkpoint's directory). Returns 0, or -1 with msg saying why. */
int splash_hub_serve_install(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *msg, size_t msg_size);

/* `splash serve --model-dir PATH`: the same preparation splash prepare does (models.md
 * "Local model files"), the variant from --model's :VARIANT, --draft-model and --mmproj
 * linked beside it; the prepared directory is held while the server runs. */
int splash_hub_serve_prepare(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *msg, size_t msg_size);

#endif
