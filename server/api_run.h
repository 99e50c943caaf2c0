/* One generation as the Messages and Responses adapters run it: admission, the engine, the
 * output parser (reasoning, text, tool calls) and stop sequences over the text. */
#ifndef SPLASH_SERVER_API_RUN_H
#define SPLASH_SERVER_API_RUN_H

#include <jansson.h>
#include <stdint.h>

#include "server/api_prompt.h"
#include "server/chat/chat_parser.h"
#include "server/generation.h"
#include "server/stop_strings.h"

struct splash_api_run {
    struct splash_app *app;
    struct splash_gen gen;
    struct splash_chat_parser *parser;
    struct splash_stop_filter stops;
    struct splash_chat_result result; /* everything the output said, accumulated */
    json_t *tools;                    /* the parser's copy of the request's tools */
    splash_chat_delta_fn fn;          /* also sent each delta as it is certain (streaming) */
    void *user;
    int in_reasoning;
    int64_t reasoning_tokens;
    int admitted, started, ended;
    const char *stop_matched; /* the stop sequence that ended the text, or NULL */
};

/* Prepares the parser and the stop sequences (a validated array of strings, or NULL).
 * fn (optional) receives the deltas as they come. -1 when memory runs out. */
int splash_api_run_init(struct splash_api_run *r, struct splash_app *app,
                        const struct splash_api_prompt *p, const json_t *tools, const json_t *stops,
                        splash_chat_delta_fn fn, void *user);
/* Admits the request and submits it (reasoning: the console's words, as for splash_gen_start); on
 * refusal fills reply (OpenAI shape) and returns -1. */
int splash_api_run_start(struct splash_api_run *r, const struct splash_api_prompt *p,
                         const struct splash_gen_params *params, const char *reasoning,
                         struct splash_http_reply *reply);
/* Pulls one engine event through the parser; 1 while the output goes on, 0 once it ended. */
int splash_api_run_pump(struct splash_api_run *r, int timeout_ms);
/* Cancels a generation still running, releases the admission and frees. */
void splash_api_run_free(struct splash_api_run *r);

/* Did the output end at the output limit? */
int splash_api_run_hit_limit(const struct splash_api_run *r);

/* Checks a list of stop sequences: an array of at most SPLASH_MAX_STOPS strings (absent or null
 * is none). -1 with msg naming field. */
int splash_api_check_stops(const json_t *stops, const char *field, char *msg, size_t msg_size);

#endif
