/* From API messages to prompt tokens: normalisation (models.md "Tokenizer and
 * chat templates"), template variables for the reasoning effort, rendering. */
#ifndef SPLASH_SERVER_CHAT_PROMPT_H
#define SPLASH_SERVER_CHAT_PROMPT_H

#include <jansson.h>
#include <stddef.h>

#include "server/app.h"
#include "splash/status.h"

/* Checks OpenAI chat messages and gives the normalised list: leading system and
 * developer messages merged into one system message (blank line between), text
 * parts joined, tool-call arguments as objects. SPLASH_ERR_INVALID with err naming the
 * field (a 400), or SPLASH_ERR_NOMEM. */
enum splash_status splash_chat_normalize(struct splash_app *app, const json_t *messages,
                                         json_t **normalized, struct splash_err *err);

struct splash_prompt {
    char *text;
    size_t len;
    int thinks;                 /* the prompt opened a think block */
    int effort;                 /* enum splash_effort used, or -1 */
};

/* Renders normalised messages with the served template. effort: -1 = the default.
 * A template error or refusal is SPLASH_ERR_INVALID (a 400) with err saying so; a sandbox
 * bound SPLASH_ERR_UNSUPPORTED, memory SPLASH_ERR_NOMEM. With why (why_size > 0) the
 * same message goes there whole: a template's raise_exception reason may be longer than
 * err holds, and an API client gets all of it. */
enum splash_status splash_chat_render(struct splash_app *app, const json_t *messages,
                                      const json_t *tools, int effort, const json_t *kwargs,
                                      struct splash_prompt *out, struct splash_err *err,
                                      char *why, size_t why_size);
void splash_prompt_free(struct splash_prompt *p);

#endif
