/* From API messages to prompt tokens: normalisation (models.md "Tokenizer and
 * chat templates"), template variables for the reasoning effort, rendering. */
#ifndef SPLASH_SERVER_CHAT_PROMPT_H
#define SPLASH_SERVER_CHAT_PROMPT_H

#include <jansson.h>
#include <stddef.h>

#include "server/app.h"

/* Checks OpenAI chat messages and returns the normalised list: leading system and
 * developer messages merged into one system message (blank line between), text
 * parts joined, tool-call arguments as objects. NULL with msg naming the field. */
json_t *splash_chat_normalize(struct splash_app *app, const json_t *messages, char *msg,
                              size_t msg_size);

struct splash_prompt {
    char *text;
    size_t len;
    int thinks;                 /* the prompt opened a think block */
    int effort;                 /* enum splash_effort used, or -1 */
};

/* Renders normalised messages with the served template. effort: -1 = the default.
 * Returns 0, or an HTTP status (400 for a template error or refusal) with msg. */
int splash_chat_render(struct splash_app *app, const json_t *messages, const json_t *tools,
                       int effort, const json_t *kwargs, struct splash_prompt *out, char *msg,
                       size_t msg_size);
void splash_prompt_free(struct splash_prompt *p);

#endif
