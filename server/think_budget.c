/* Thinking token budget arithmetic and the thinking end's tokens. */
#include "server/think_budget.h"

#include <stdio.h>
#include <string.h>

#include "server/text/tokenizer/tokenizer.h"

int64_t splash_think_budget_effective(int64_t budget, int64_t max_tokens, int64_t room)
{
    if (budget < 0)
        return -1;
    int64_t limit = max_tokens;
    if (limit > budget + room)
        limit = budget + room;
    if (room >= limit || limit <= 0)
        return budget;
    return (int64_t)((double)budget * (double)room / (double)limit);
}

int splash_think_end_tokens(const struct splash_tokenizer *tok, const char *text,
                            const char *think_close, int32_t *ids, int max, char *msg,
                            size_t msg_size)
{
    size_t len = strlen(text), close_len = strlen(think_close);
    int32_t close_id = splash_tokenizer_find_special(tok, think_close);
    if (close_id < 0) {
        snprintf(msg, msg_size, "--thinking-end-text: the vocabulary has no %s token", think_close);
        return -1;
    }
    if (len < close_len || strcmp(text + len - close_len, think_close)) {
        snprintf(msg, msg_size, "--thinking-end-text: must end with %s", think_close);
        return -1;
    }
    struct splash_token_buf buf = {0};
    struct splash_err err;
    /* the text before the close must hold no special token, spelled or not */
    if (splash_tokenizer_encode(tok, text, len - close_len, SPLASH_TOKENIZE_PARSE_SPECIAL, &buf,
                                &err) != SPLASH_OK) {
        snprintf(msg, msg_size, "--thinking-end-text: %s", err.msg);
        return -1;
    }
    for (size_t i = 0; i < buf.n; i++) {
        int type = splash_tokenizer_token_type(tok, buf.ids[i]);
        if (type == SPLASH_TOKEN_CONTROL || type == SPLASH_TOKEN_USER_DEFINED ||
            buf.ids[i] == close_id) {
            snprintf(msg, msg_size, "--thinking-end-text: holds a special token before %s",
                     think_close);
            splash_token_buf_free(&buf);
            return -1;
        }
    }
    if ((int)buf.n + 1 > max || buf.n + 1 > 64) {
        snprintf(msg, msg_size, "--thinking-end-text: %zu tokens, at most 64", buf.n + 1);
        splash_token_buf_free(&buf);
        return -1;
    }
    memcpy(ids, buf.ids, buf.n * sizeof *ids);
    ids[buf.n] = close_id;
    int n = (int)buf.n + 1;
    splash_token_buf_free(&buf);
    return n;
}

int splash_think_budget_param(const json_t *body, int64_t server_budget, int64_t *budget,
                              char *msg, size_t msg_size)
{
    json_t *v = json_object_get(body, "thinking_token_budget");
    if (!v || json_is_null(v)) {
        *budget = server_budget;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < -1) {
        snprintf(msg, msg_size, "thinking_token_budget must be a non-negative integer, or -1 for no cap");
        return -1;
    }
    *budget = json_integer_value(v);
    return 0;
}
