/* Thinking token budgets (server.md "Thinking token budget"). */
#ifndef SPLASH_SERVER_THINK_BUDGET_H
#define SPLASH_SERVER_THINK_BUDGET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct splash_tokenizer;

/* The budget that applies when the context leaves `room` tokens for an output
 * limit of max_tokens: the budget keeps its share of the room, a limit past
 * budget + room counting as budget + room. */
int64_t splash_think_budget_effective(int64_t budget, int64_t max_tokens, int64_t room);

/* Tokenizes the thinking end: text without special tokens, then </think> as its
 * own token, at most 64 tokens. Returns the count, or -1 with msg. */
int splash_think_end_tokens(const struct splash_tokenizer *tok, const char *text,
                            const char *think_close, int32_t *ids, int max, char *msg,
                            size_t msg_size);

/* Reads a request's thinking_token_budget: -1 none; absent/null takes the server's.
 * Returns 0 with *budget set (-1 = no cap), or -1 with msg naming the field. */
int splash_think_budget_param(const json_t *body, int64_t server_budget, int64_t *budget,
                              char *msg, size_t msg_size);

#endif
