/* The server's state shared by the API handlers: options, the engine client,
 * the tokenizer and chat template the front renders prompts with, model names
 * and counters. */
#ifndef SPLASH_SERVER_APP_H
#define SPLASH_SERVER_APP_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "server/engine_client.h"
#include "server/http.h"
#include "server/options.h"

struct splash_tokenizer;
struct splash_jinja_template;
struct splash_chat_format;

struct splash_app {
    const struct splash_serve_opts *opts;
    struct splash_engine_client *engine;
    struct splash_tokenizer *tok;
    struct splash_jinja_template *chat_template; /* as requests render it (patched if needed) */
    char *template_text;
    int later_system;                /* enum splash_later_system */
    json_t *special;                 /* bos_token, eos_token for the template */
    json_t *reasoning;               /* /v1/models "reasoning" report */
    void *effort_report;             /* struct splash_effort_report, or NULL when unprobed */
    int thinks_by_default;           /* 1, 0, or -1 when the model decides */
    int default_effort;              /* enum splash_effort or -1 */
    const struct splash_chat_format *format;
    int32_t think_end[64];           /* the thinking end's tokens (budget runs out) */
    int n_think_end;
    int32_t think_close_id, call_open_id;
    void *grammar_format;            /* struct splash_grammar_format for checking grammars */
    const char *model_name;          /* --model */
    char bos_text[64], eos_text[64];
    int32_t stop_ids[8];             /* tokens that end a generation */
    int n_stop_ids;
    int32_t reuse_token;             /* the format's turn boundary for the prefix cache, or -1 */
    int demo;                        /* the shipped demonstration story model */
    double started_at;
    double last_activity;            /* monotonic seconds of the last admitted request */
    int released;                    /* the weights' memory was released while idle */
    pthread_mutex_t lock;
    int admitted;                    /* requests running or waiting */
    uint64_t requests_total, tokens_generated, prompt_tokens_total, rejected_503;
    int noted_default_model; /* a request without model was noted on the console */
    size_t max_token_bytes;  /* the longest token's bytes: bounds a prompt's tokens from below */
    uint64_t request_seq;
    json_t *prefix_cache;            /* the engine's prefix cache as its last request left it */
    /* speculative decoding, summed over the requests' DONE frames (/metrics) */
    uint64_t draft_proposed, draft_accepted, draft_cycles;
    json_t *speculation;             /* the engine's speculation rule as its READY/DONE gave it */
};

/* Does `name` name the served model (--model or a --served-model-name)? */
int splash_app_model_known(const struct splash_app *app, const char *name);
/* The name responses report (--announce-served-name picks the first alias). */
const char *splash_app_model_reported(const struct splash_app *app);

/* The context the engine serves (its READY frame's n_ctx); 0 while none is known. */
int64_t splash_app_context(struct splash_app *app);

/* Admission under --queue-size: 0 and a 503 reply filled when full. */
int splash_app_admit(struct splash_app *app, struct splash_http_reply *reply);
void splash_app_release(struct splash_app *app);

/* The routes the server answers. */
extern const struct splash_route splash_app_routes[];
extern const size_t splash_app_n_routes;

#endif
