/* `splash serve --model OWNER/REPO[:VARIANT]`: the installation before the model loads. */
#ifndef SPLASH_HUB_SERVE_INSTALL_H
#define SPLASH_HUB_SERVE_INSTALL_H

#include <stddef.h>

struct splash_serve_opts;

/* Installs (or finds installed) the model the options name, with --revision and --offline,
 * printing its lines on the console; writes the model to load into path (the GGUF, or a
 * safetensors checkpoint's directory) and the draft the engine loads into draft: the one
 * installed beside it (the family's, or --draft-model's), "" when there is none or
 * --speculative ngram|off leaves it unused. Returns 0, or -1 with msg saying why (also
 * --speculative dflash on an installation without a draft). */
int splash_hub_serve_install(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *draft, size_t draft_size, char *msg, size_t msg_size);

/* `splash serve --model-dir PATH`: the same preparation splash prepare does (models.md
 * "Local model files"), the variant from --model's :VARIANT, --draft-model and --mmproj
 * linked beside it; the prepared directory is held while the server runs. draft gets the
 * assembly's draft directory, "" without --draft-model. */
int splash_hub_serve_prepare(const struct splash_serve_opts *o, char *path, size_t path_size,
                             char *draft, size_t draft_size, char *msg, size_t msg_size);

#endif
