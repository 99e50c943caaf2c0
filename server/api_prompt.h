/* Request pieces the Messages, Responses and /apply-template handlers share: the reasoning
 * effort, OpenAI-shaped tools and rendering normalised messages into prompt token ids. */
#ifndef SPLASH_SERVER_API_PROMPT_H
#define SPLASH_SERVER_API_PROMPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server/text/tokenizer/tokenizer.h"
#include "server/app.h"
#include "server/chat_prompt.h"

/* An effort name ("none" ... "max") in v; absent or null leaves *effort as it is.
 * -1 with msg naming field on anything else. */
int splash_api_effort(const json_t *v, const char *field, int *effort, char *msg, size_t msg_size);

/* chat_template_kwargs: absent, null or an object (the template variables check the rest).
 * -1 with msg. */
int splash_api_check_kwargs(const json_t *kwargs, char *msg, size_t msg_size);

/* tools in the OpenAI chat shape: an array of {type: function, function: {name, ...}}; absent or
 * null is none. -1 with msg naming field[i]. */
/* The fewest tokens a prompt of len bytes holds when that is more than the context (*n_ctx),
 * else 0: no token is longer than the tokenizer's longest piece. */
int64_t splash_api_bytes_over_context(struct splash_app *app, size_t len, int64_t *n_ctx);

/* Tokenizes a prompt: 0, or -1 (msg) when the tokenizer refuses it, or 1 (msg) when its
 * bytes alone show it cannot fit the context, found before spending time on it. */
int splash_api_encode_bounded(struct splash_app *app, const char *text, size_t len,
                              struct splash_token_buf *ids, char *msg, size_t msg_size);
int splash_api_check_tools(const json_t *tools, const char *field, char *msg, size_t msg_size);

struct splash_api_prompt {
    struct splash_prompt prompt; /* the rendered text and whether it opened a think block */
    struct splash_token_buf ids;
    /* set when splash_api_prompt_make refused the prompt for its bytes alone: the fewest
     * tokens it holds and the context (for each API's context_length_exceeded) */
    int64_t over_context_tokens, n_ctx;
};

/* Renders normalised messages (splash_chat_normalize) and tokenizes the text. Returns 0, or an
 * HTTP status with msg. */
int splash_api_prompt_make(struct splash_app *app, const json_t *messages, const json_t *tools,
                           int effort, const json_t *kwargs, struct splash_api_prompt *out,
                           char *msg, size_t msg_size);
void splash_api_prompt_free(struct splash_api_prompt *p);

/* The prompt a Messages or a Responses request renders (the /apply-template of those APIs).
 * -1 with reply filled in the API's error shape. */
int splash_api_messages_prompt(struct splash_app *app, const json_t *body,
                               struct splash_api_prompt *out, struct splash_http_reply *reply);
int splash_api_responses_prompt(struct splash_app *app, const json_t *body,
                                struct splash_api_prompt *out, struct splash_http_reply *reply);

/* How the request reasons, for the console's Started line: "effort absent → low · thinking on".
 * effort is the request's own (-1 for none). */
void splash_api_reasoning_line(int effort, const struct splash_api_prompt *p, char *buf,
                               size_t size);

#endif
