/* The chat formats families name (models.md "Chat formats"): how a model frames its reasoning
 * and lays out its tool calls, its stop tokens, and where cached prompts are reused. */
#ifndef SPLASH_SERVER_CHAT_CHAT_FORMAT_H
#define SPLASH_SERVER_CHAT_CHAT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

enum splash_call_syntax {
    SPLASH_CALLS_QWEN_XML, /* <tool_call>\n<function=N>\n<parameter=P>\nV\n</parameter>... */
    SPLASH_CALLS_GLM_ARGS, /* <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value>... */
    SPLASH_CALLS_HARMONY,  /* <|start|>assistant to=functions.N<|channel|>commentary json
                              <|message|>{JSON}<|call|> (OpenAI's harmony, gpt-oss) */
};

#define SPLASH_CHAT_FORMAT_MAX_TOKENS 16

struct splash_chat_format {
    const char *name; /* "qwen", "flint" */
    enum splash_call_syntax calls;
    /* QWEN: the generation prompt opens the think block where the request thinks.
     * FLINT: the prompt is the assistant tag alone and the model opens <think> itself, as its
     * first token, when it reasons. */
    bool model_opens_think;
    const char *think_open, *think_close;
    const char *call_open, *call_close;
    const char *generation_prompt;    /* what the format's prompt ends with */
    const char *cache_reuse_after;    /* prompt tokens are reused up to and after this token */
    const char *stops[SPLASH_CHAT_FORMAT_MAX_TOKENS]; /* NULL-terminated */
    /* every text the format needs the tokenizer to hold as a single token */
    const char *tokens[SPLASH_CHAT_FORMAT_MAX_TOKENS]; /* NULL-terminated */
};

extern const struct splash_chat_format splash_chat_format_qwen;
extern const struct splash_chat_format splash_chat_format_flint;
extern const struct splash_chat_format splash_chat_format_harmony;

/* By name ("qwen", "flint", "harmony"); NULL when unknown. */
const struct splash_chat_format *splash_chat_format_find(const char *name);

/* Does generation start inside a think block: the prompt's last think_open is not closed?
 * (QWEN's prompt opens one where the request thinks; FLINT's never does.) */
bool splash_chat_prompt_opens_think(const struct splash_chat_format *f, const char *prompt,
                                    size_t len);

/* The tokenizer, as the format check sees it: encodes text with special tokens parsed into
 * ids (at most max), returns the count, or -1 on failure. */
typedef int (*splash_chat_tokenize_fn)(void *user, const char *text, size_t len, int32_t *ids,
                                       size_t max);

/* Ids of the format's tokens, in the order of f->tokens, then f->stops. */
struct splash_chat_format_ids {
    int32_t tokens[SPLASH_CHAT_FORMAT_MAX_TOKENS];
    int32_t stops[SPLASH_CHAT_FORMAT_MAX_TOKENS];
    int32_t cache_reuse_after;
};

/* Startup check: the tokenizer encodes each of the format's tokens as one token. The error
 * names the first that it does not ("chat format flint: <arg_key> encodes as 3 tokens"). */
enum splash_status splash_chat_format_check(const struct splash_chat_format *f,
                                            splash_chat_tokenize_fn tokenize, void *user,
                                            struct splash_chat_format_ids *out,
                                            struct splash_err *err);

#endif
