/* One generation as the API adapters see it: submit prompt tokens to the engine,
 * then pull decoded text as it arrives. */
#ifndef SPLASH_SERVER_GENERATION_H
#define SPLASH_SERVER_GENERATION_H

#include <jansson.h>
#include <stdint.h>

#include "server/engine/gen_params.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/app.h"

struct splash_gen {
    struct splash_app *app;
    struct splash_pending *pending;
    struct splash_detok_stream detok;
    int done;
    char finish_reason[24];   /* "stop", "length", "cancelled" */
    int64_t prompt_tokens, completion_tokens, cached_tokens;
    /* speculation: proposals the target verified for this request, those it accepted, cycles */
    int64_t spec_proposed, spec_accepted, spec_cycles;
    char error_code[48];
    char error_message[512];
    json_t *logprobs;         /* per token [{token, logprob, bytes, top_logprobs}] when asked */
    int want_logprobs, top_logprobs;
    uint64_t request;         /* the console's request number */
    double started;           /* monotonic seconds at submit */
    double first_token;       /* monotonic seconds of the first token, 0 before */
    int cancelled;            /* released before it ended */
    double deadline;          /* monotonic seconds, 0 = none (--request-timeout) */
    double client_checked;    /* monotonic seconds its connection was last looked at */
    char reasoning[160];      /* the Started line's reasoning note, printed once the engine
                                 takes the request (with what the prefix cache gave it) */
    int announced;            /* the Started line was printed */
};

/* The engine refuses a prompt its context cannot hold, but for a stream only after its 200
 * went out: so each endpoint checks first and answers 400 context_length_exceeded in its own
 * shape. Returns the context a prompt of n_prompt tokens fills, or 0 when it fits (or no
 * context is known yet, while the engine starts). */
int64_t splash_gen_context_overflow(struct splash_app *app, size_t n_prompt);

/* Submits the prompt with params (borrowed) (refusing a prompt splash_gen_context_overflow refuses, OpenAI's shape); on refusal fills reply (503 with Retry-After, 500, 400) and returns -1.
 * reasoning (may be NULL) describes the effort for the console's Started line:
 * "effort absent → low · thinking on". */
int splash_gen_start(struct splash_gen *g, struct splash_app *app, const int32_t *prompt,
                     size_t n_prompt, const struct splash_gen_params *params,
                     const char *reasoning, struct splash_http_reply *reply);
/* Waits up to timeout_ms for the engine; appends decoded text to out. Returns 1
 * while the generation runs, 0 once it has ended (done or error). */
int splash_gen_next(struct splash_gen *g, struct splash_tok_bytes *out, int timeout_ms);
/* The HTTP status for a generation that ended in error: 503 when capacity ran out
 * or the engine is restarting, 504 past --request-timeout, 500 otherwise. */
int splash_gen_error_status(const struct splash_gen *g);

/* Cancels if still running and frees. */
void splash_gen_end(struct splash_gen *g);

#endif
