/* The chat side of startup: the model's own chat template, its probes, and the
 * chat format the front parses output in. */
#ifndef SPLASH_SERVER_CHAT_SETUP_H
#define SPLASH_SERVER_CHAT_SETUP_H

#include <stddef.h>

#include "server/app.h"
#include "splash/status.h"

struct splash_chat_format;
struct splash_registry;

/* The chat format the family of the model at path (a GGUF or a checkpoint directory)
 * names (models.md "Chat formats"), not a guess from its vocabulary. An error when no
 * family claims it or the format is unknown. */
enum splash_status splash_chat_format_of_model(const struct splash_registry *r, const char *path,
                                               const struct splash_chat_format **format,
                                               struct splash_err *err);

/* Loads the model's chat template (a GGUF's tokenizer.chat_template, a directory's
 * chat_template.jinja or tokenizer_config.json), probes it (later system
 * messages, reasoning efforts) and checks the chat format's tokens. Logs the
 * "Chat template · ..." line. An error, err saying why, when the template cannot serve. */
enum splash_status splash_chat_setup(struct splash_app *app, const char *path,
                                     const struct splash_chat_format *format,
                                     struct splash_err *err);
void splash_chat_teardown(struct splash_app *app);

#endif
