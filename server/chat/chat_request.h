/* Request preparation for chat templates (models.md "Tokenizer and chat templates", server.md
 * "Default reasoning effort"): system messages, replayed history, and the variables a
 * template receives. */
#ifndef SPLASH_SERVER_CHAT_CHAT_REQUEST_H
#define SPLASH_SERVER_CHAT_CHAT_REQUEST_H

#include <stdbool.h>

#include <jansson.h>

#include "server/chat/template_probe.h"
#include "splash/status.h"

/* Merges the leading system and developer messages into one system message, their texts joined
 * by a blank line; a system message after that stays where it is. Returns a new array. */
json_t *splash_chat_merge_leading_system(const json_t *messages);

/* A Responses or Messages assistant turn as one message: its text parts, in order, precede its
 * calls, the order the chat template renders, even where the response wrote text after a call.
 * items: [{"type": "text", "text": ...} | {"type": "tool_call", "id", "name", "arguments"}];
 * reasoning (or NULL) becomes reasoning_content. */
json_t *splash_chat_replay_assistant(const json_t *items, const char *reasoning);

struct splash_chat_vars_opts {
    const json_t *messages;
    const json_t *tools;           /* NULL: no tools */
    bool add_generation_prompt;
    int effort;                    /* enum splash_effort, or -1 when the request sets none */
    const json_t *kwargs;          /* chat_template_kwargs, or NULL */
    const json_t *special;         /* the tokenizer's special tokens */
    const struct splash_effort_report *report; /* the template's aliases; NULL: none */
};

/* The template's variables. The effort reaches it as enable_thinking and reasoning_effort;
 * chat_template_kwargs outrank it but cannot set what Splash passes itself. A bad kwarg is
 * SPLASH_ERR_INVALID with the message a 400 carries. */
enum splash_status splash_chat_template_vars(const struct splash_chat_vars_opts *o, json_t **out,
                                             struct splash_err *err);

#endif
