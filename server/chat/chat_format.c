/* The QWEN, FLINT and HARMONY chat formats, and the startup check of their tokens. */
#include <string.h>

#include "server/chat/chat_format.h"

const struct splash_chat_format splash_chat_format_qwen = {
    .name = "qwen",
    .calls = SPLASH_CALLS_QWEN_XML,
    .model_opens_think = false,
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = "<tool_call>",
    .call_close = "</tool_call>",
    .generation_prompt = "<|im_start|>assistant\n",
    .cache_reuse_after = "<|im_end|>",
    .stops = {"<|endoftext|>", "<|im_end|>", NULL},
    .tokens = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>",
               "<|im_end|>", NULL},
};

const struct splash_chat_format splash_chat_format_flint = {
    .name = "flint",
    .calls = SPLASH_CALLS_GLM_ARGS,
    .model_opens_think = true,
    .think_open = "<think>",
    .think_close = "</think>",
    .call_open = "<tool_call>",
    .call_close = "</tool_call>",
    .generation_prompt = "<|assistant|>",
    .cache_reuse_after = "<|assistant|>",
    .stops = {"<|end_of_text|>", "<|user|>", "<|observation|>", "<|developer|>", NULL},
    /* GLM-4.7's argument tags are each a token, as the grammar writes them */
    .tokens = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
               "<arg_value>", "</arg_value>", "<|assistant|>", "<|system|>", NULL},
};

/* OpenAI's harmony (gpt-oss): channels, not think tags. The model writes its reasoning in
 * the analysis channel and chooses it itself; think_open and think_close are the markers
 * around the analysis channel's text, as the prompt renders earlier reasoning. */
const struct splash_chat_format splash_chat_format_harmony = {
    .name = "harmony",
    .calls = SPLASH_CALLS_HARMONY,
    .model_opens_think = true,
    .think_open = "<|channel|>",
    .think_close = "<|end|>",
    .call_open = "<|call|>",
    .call_close = "<|call|>",
    .generation_prompt = "<|start|>assistant",
    .cache_reuse_after = "<|end|>",
    .stops = {"<|return|>", "<|call|>", NULL},
    .tokens = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
               "<|return|>", "<|call|>", NULL},
};

const struct splash_chat_format *splash_chat_format_find(const char *name)
{
    if (name && strcmp(name, "harmony") == 0)
        return &splash_chat_format_harmony;
    if (name && strcmp(name, "qwen") == 0)
        return &splash_chat_format_qwen;
    if (name && strcmp(name, "flint") == 0)
        return &splash_chat_format_flint;
    return NULL;
}

bool splash_chat_prompt_opens_think(const struct splash_chat_format *f, const char *prompt,
                                    size_t len)
{
    if (f->model_opens_think)
        return false;
    size_t ol = strlen(f->think_open), cl = strlen(f->think_close);
    const char *last = NULL;
    for (const char *p = prompt; p && (size_t)(p - prompt) + ol <= len;) {
        p = memmem(p, len - (size_t)(p - prompt), f->think_open, ol);
        if (p)
            last = p++;
    }
    if (!last)
        return false;
    const char *after = last + ol;
    return !memmem(after, len - (size_t)(after - prompt), f->think_close, cl);
}

static enum splash_status one_token(const struct splash_chat_format *f,
                                    splash_chat_tokenize_fn tokenize, void *user,
                                    const char *text, int32_t *id, struct splash_err *err)
{
    int32_t ids[8];
    int n = tokenize(user, text, strlen(text), ids, 8);
    if (n < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "chat format %s: the tokenizer cannot "
                              "encode %s", f->name, text);
    if (n != 1)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "chat format %s: %s encodes as %d "
                              "tokens, the format needs it as one", f->name, text, n);
    *id = ids[0];
    return SPLASH_OK;
}

enum splash_status splash_chat_format_check(const struct splash_chat_format *f,
                                            splash_chat_tokenize_fn tokenize, void *user,
                                            struct splash_chat_format_ids *out,
                                            struct splash_err *err)
{
    struct splash_chat_format_ids ids;
    memset(&ids, 0xff, sizeof ids);
    enum splash_status st;
    for (size_t i = 0; i < SPLASH_CHAT_FORMAT_MAX_TOKENS && f->tokens[i]; i++)
        if ((st = one_token(f, tokenize, user, f->tokens[i], &ids.tokens[i], err)))
            return st;
    for (size_t i = 0; i < SPLASH_CHAT_FORMAT_MAX_TOKENS && f->stops[i]; i++)
        if ((st = one_token(f, tokenize, user, f->stops[i], &ids.stops[i], err)))
            return st;
    if ((st = one_token(f, tokenize, user, f->cache_reuse_after, &ids.cache_reuse_after, err)))
        return st;
    if (out)
        *out = ids;
    return SPLASH_OK;
}
