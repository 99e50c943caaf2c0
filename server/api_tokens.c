/* POST /tokenize and /detokenize. */
#include <stdio.h>
#include <stdlib.h>

#include "server/text/tokenizer/tokenizer.h"
#include "server/api.h"

void splash_api_tokenize(void *appv, const struct splash_http_request *req,
                         struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    json_t *text = json_object_get(body, "content");
    if (!text)
        text = json_object_get(body, "prompt");
    if (!json_is_string(text)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_content",
                           "content must be a string");
        json_decref(body);
        return;
    }
    unsigned flags = json_is_false(json_object_get(body, "special")) ? 0
                                                                     : SPLASH_TOKENIZE_PARSE_SPECIAL;
    struct splash_token_buf ids = {0};
    struct splash_err err;
    if (splash_tokenizer_encode(app->tok, json_string_value(text), json_string_length(text), flags,
                                &ids, &err) != SPLASH_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "content: %s", err.msg);
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_content", msg);
    } else {
        json_t *arr = json_array();
        for (size_t i = 0; i < ids.n; i++)
            json_array_append_new(arr, json_integer(ids.ids[i]));
        reply->json = json_pack("{s:o, s:I}", "tokens", arr, "count", (json_int_t)ids.n);
    }
    splash_token_buf_free(&ids);
    json_decref(body);
}

void splash_api_detokenize(void *appv, const struct splash_http_request *req,
                           struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    json_t *tokens = json_object_get(body, "tokens");
    if (!json_is_array(tokens)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_tokens",
                           "tokens must be an array of token ids");
        json_decref(body);
        return;
    }
    size_t n = json_array_size(tokens), n_vocab = splash_tokenizer_n_tokens(app->tok);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) {
        json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            (size_t)json_integer_value(t) >= n_vocab) {
            char msg[128];
            snprintf(msg, sizeof msg, "tokens[%zu] is not a token id of this model", i);
            splash_reply_error(reply, 400, "invalid_request_error", "invalid_tokens", msg);
            free(ids);
            json_decref(body);
            return;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    struct splash_tok_bytes out = {0};
    struct splash_err err;
    if (ids && splash_tokenizer_decode(app->tok, ids, n, SPLASH_DETOK_SPECIAL, &out, &err) == SPLASH_OK)
        reply->json = json_pack("{s:s%}", "content", out.data ? out.data : "", out.len);
    else
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_tokens", "cannot decode");
    /* decoded bytes may end inside a character; jansson refuses invalid UTF-8 */
    if (!reply->json)
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_tokens",
                           "the tokens do not decode to whole UTF-8 characters");
    splash_tok_bytes_free(&out);
    free(ids);
    json_decref(body);
}
