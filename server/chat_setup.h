/* The chat side of startup: the model's own chat template, its probes, and the
 * chat format the front parses output in. */
#ifndef SPLASH_SERVER_CHAT_SETUP_H
#define SPLASH_SERVER_CHAT_SETUP_H

#include <stddef.h>

#include "server/app.h"
#include "splash/status.h"

/* Loads tokenizer.chat_template from the GGUF at path, probes it (later system
 * messages, reasoning efforts) and checks the chat format's tokens. Logs the
 * "Chat template · ..." line. An error, err saying why, when the template cannot serve. */
enum splash_status splash_chat_setup(struct splash_app *app, const char *path,
                                     struct splash_err *err);
void splash_chat_teardown(struct splash_app *app);

#endif
