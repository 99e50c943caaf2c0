/* The chat side of startup: the model's own chat template, its probes, and the
 * chat format the front parses output in. */
#ifndef SPLASH_SERVER_CHAT_SETUP_H
#define SPLASH_SERVER_CHAT_SETUP_H

#include <stddef.h>

#include "server/app.h"

/* Loads tokenizer.chat_template from the GGUF at path, probes it (later system
 * messages, reasoning efforts) and checks the chat format's tokens. Logs the
 * "Chat template · ..." line. -1 with msg when the template cannot serve. */
int splash_chat_setup(struct splash_app *app, const char *path, char *msg, size_t size);
void splash_chat_teardown(struct splash_app *app);

#endif
