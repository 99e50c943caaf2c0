/* Streaming parse of a model's output in its chat format: reasoning, answer and tool calls as
 * deltas, token by token, without waiting for the end. Tags may arrive split across tokens;
 * output that breaks the format stays text (no byte is lost and nothing crashes). */
#ifndef SPLASH_SERVER_CHAT_CHAT_PARSER_H
#define SPLASH_SERVER_CHAT_CHAT_PARSER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "server/chat/chat_format.h"

enum splash_chat_delta_kind {
    SPLASH_DELTA_REASONING,
    SPLASH_DELTA_CONTENT,
    SPLASH_DELTA_CALL_NAME, /* a call starts: its function name, whole */
    SPLASH_DELTA_CALL_ARGS, /* a fragment of the call's arguments, JSON object text */
};

struct splash_chat_delta {
    enum splash_chat_delta_kind kind;
    int call; /* index of the call, for CALL_NAME and CALL_ARGS */
    const char *text;
    size_t len;
};

typedef void (*splash_chat_delta_fn)(void *user, const struct splash_chat_delta *d);

struct splash_chat_parser_opts {
    const struct splash_chat_format *format;
    /* the prompt opened a think block (QWEN where the request thinks) */
    bool starts_in_reasoning;
    /* the request's tools (OpenAI shape) or NULL: calls are parsed only where there are tools,
     * and each argument converts by its JSON-schema type */
    const json_t *tools;
};

struct splash_chat_parser;

struct splash_chat_parser *splash_chat_parser_create(const struct splash_chat_parser_opts *o);
void splash_chat_parser_destroy(struct splash_chat_parser *p);
/* Feeds one token's text (any split works); deltas go to fn as soon as they are certain.
 * The whole output must be UTF-8 (the server replaces what is not before it gets here). */
void splash_chat_parser_feed(struct splash_chat_parser *p, const char *text, size_t len,
                             splash_chat_delta_fn fn, void *user);
/* The output ended: flushes what was held back (an unfinished tag stays text). */
void splash_chat_parser_finish(struct splash_chat_parser *p, splash_chat_delta_fn fn,
                               void *user);

/* ---- a whole reply, accumulated from deltas -------------------------------------------------- */

struct splash_chat_call {
    char *name;
    char *args; /* JSON object text */
    size_t args_len;
};

struct splash_chat_result {
    char *reasoning, *content;
    size_t reasoning_len, content_len;
    struct splash_chat_call *calls;
    size_t n_calls;
};

/* A splash_chat_delta_fn: user is a struct splash_chat_result (zero-initialized). */
void splash_chat_result_add(void *result, const struct splash_chat_delta *d);
void splash_chat_result_free(struct splash_chat_result *r);

#endif
