/* The typed request: everything the engine needs to generate for one request, read
 * once from the API body at the front (server/gen_read.c) and carried whole in the
 * SUBMIT frame (protocol.h). Its defaults live in splash_gen_params_init alone. */
#ifndef SPLASH_ENGINE_GEN_PARAMS_H
#define SPLASH_ENGINE_GEN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "server/engine/sampling.h"
#include "server/text/grammar/grammar.h"

#define SPLASH_GEN_MAX_STOP_IDS 32
#define SPLASH_GEN_MAX_THINK_END 64
#define SPLASH_GEN_MAX_LOGIT_BIAS 1024
#define SPLASH_GEN_MAX_TOP_LOGPROBS 20

struct splash_logit_bias {
    int32_t token;
    float bias; /* -100 to 100, added to the token's logit before masks and sampling */
};

/* The thinking budget (server.md "Thinking token budget"): set when the prompt opened a
 * think block, which the engine counts and, past the budget, closes with `end`. */
struct splash_think_params {
    int on;
    int64_t budget;    /* < 0: no cap */
    int32_t close;     /* the token that closes the block */
    int32_t call_open; /* the token that opens a tool call, -1: none */
    int32_t end[SPLASH_GEN_MAX_THINK_END];
    int n_end;         /* the tokens forced when the budget runs out */
};

struct splash_gen_params {
    int32_t max_tokens;                     /* 0: as many as the context leaves */
    struct splash_sampling_params sampling; /* the seed counts only with has_seed */
    int has_seed;                           /* else the engine draws one per request */
    struct splash_logit_bias *logit_bias;   /* owned */
    size_t n_logit_bias;
    int logprobs;                           /* report each token's log-probability */
    int top_logprobs;                       /* and that many alternatives (0-20) */
    struct splash_think_params think;
    /* the output constraint (response_format, forced tool calls) as the grammar spec's
     * JSON text (splash_grammar_compile_spec), NULL: the output is free; owned */
    char *grammar;
    enum splash_grammar_call_syntax grammar_calls;
};

/* What the SUBMIT frame carries: the prompt, the chat format's ids and the parameters. */
struct splash_submit {
    int32_t *prompt; /* owned once decoded; borrowed when encoding */
    size_t n_prompt;
    int32_t stop_ids[SPLASH_GEN_MAX_STOP_IDS];
    int n_stop;
    int32_t reuse_token; /* the chat format's turn boundary for the prefix cache, -1: none */
    struct splash_gen_params params;
};

/* The defaults every API starts from: temperature 1, top_p 1, repetition penalty 1, no
 * other filter or penalty, no seed, no limit but the context, no logprobs, no thinking
 * budget, no constraint. */
void splash_gen_params_init(struct splash_gen_params *p);
/* Frees what the parameters own and sets them to the defaults again. */
void splash_gen_params_free(struct splash_gen_params *p);

#endif
