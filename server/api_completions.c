/* POST /v1/completions: raw prompts, streamed or not (OpenAI legacy completions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api.h"
#include "server/generation.h"
#include "server/sse.h"
#include "server/stop_strings.h"

struct completion {
    struct splash_app *app;
    struct splash_gen gen;
    struct splash_stop_filter stops;
    struct splash_sse sse;
    char id[48];
    int64_t created;
    int include_usage;
    int finished;
};

static json_t *usage_json(const struct splash_gen *g)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)g->prompt_tokens,
                     "completion_tokens", (json_int_t)g->completion_tokens, "total_tokens",
                     (json_int_t)(g->prompt_tokens + g->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)g->cached_tokens);
}

static json_t *chunk(struct completion *c, const char *text, size_t len, const char *finish)
{
    json_t *choice = json_pack("{s:i, s:s%, s:n, s:o}", "index", 0, "text", text ? text : "",
                               text ? len : 0, "logprobs", "finish_reason",
                               finish ? json_string(finish) : json_null());
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", c->id, "object", "text_completion",
                     "created", (json_int_t)c->created, "model",
                     splash_app_model_reported(c->app), "choices", choice);
}

static const char *finish_reason(struct completion *c)
{
    return c->stops.matched ? "stop" : c->gen.finish_reason[0] ? c->gen.finish_reason : "stop";
}

static ssize_t produce(void *ctx, char *buf, size_t max)
{
    struct completion *c = ctx;
    size_t n = splash_sse_take(&c->sse, buf, max);
    if (n)
        return (ssize_t)n;
    if (c->finished)
        return -1;
    struct splash_tok_bytes text = {0};
    int running = splash_gen_next(&c->gen, &text, 100);
    char *out = NULL;
    size_t out_len = 0;
    int matched = text.len && splash_stop_filter_feed(&c->stops, text.data, text.len, &out, &out_len);
    splash_tok_bytes_free(&text);
    if (out_len)
        splash_sse_event(&c->sse, NULL, chunk(c, out, out_len, NULL));
    free(out);
    if (!running || matched) {
        if (c->gen.error_code[0]) {
            splash_sse_event(&c->sse, NULL,
                             json_pack("{s:{s:s, s:s, s:s}}", "error", "message", c->gen.error_message,
                                       "type", "server_error", "code", c->gen.error_code));
        } else {
            splash_stop_filter_flush(&c->stops, &out, &out_len);
            if (out_len)
                splash_sse_event(&c->sse, NULL, chunk(c, out, out_len, NULL));
            free(out);
            splash_sse_event(&c->sse, NULL, chunk(c, NULL, 0, finish_reason(c)));
            if (c->include_usage) {
                json_t *u = chunk(c, NULL, 0, NULL);
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", usage_json(&c->gen));
                splash_sse_event(&c->sse, NULL, u);
            }
        }
        splash_sse_raw(&c->sse, "[DONE]");
        c->finished = 1;
    }
    return 0;
}

static void done(void *ctx)
{
    struct completion *c = ctx;
    splash_gen_end(&c->gen);
    splash_stop_filter_free(&c->stops);
    splash_sse_free(&c->sse);
    splash_app_release(c->app);
    free(c);
}

void splash_api_completions(void *appv, const struct splash_http_request *req,
                            struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[512];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    if (!splash_api_check_model(app, body, reply))
        goto out_body;
    if (json_object_get(body, "thinking_token_budget")) {
        splash_reply_error(reply, 400, "invalid_request_error", "unsupported_parameter",
                           "thinking_token_budget: completions have no thinking to budget; use "
                           "/v1/chat/completions");
        goto out_body;
    }
    json_t *prompt = json_object_get(body, "prompt");
    if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
        json_is_string(json_array_get(prompt, 0)))
        prompt = json_array_get(prompt, 0);
    struct splash_token_buf ids = {0};
    if (json_is_string(prompt)) {
        struct splash_err err;
        if (splash_tokenizer_encode(app->tok, json_string_value(prompt), json_string_length(prompt),
                                    SPLASH_TOKENIZE_PARSE_SPECIAL, &ids, &err) != SPLASH_OK) {
            snprintf(msg, sizeof msg, "prompt: %s", err.msg);
            splash_reply_error(reply, 400, "invalid_request_error", "invalid_prompt", msg);
            goto out_body;
        }
    } else if (json_is_array(prompt) && json_array_size(prompt) > 0 &&
               json_is_integer(json_array_get(prompt, 0))) {
        size_t n_vocab = splash_tokenizer_n_tokens(app->tok);
        for (size_t i = 0; i < json_array_size(prompt); i++) {
            json_t *t = json_array_get(prompt, i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 ||
                (size_t)json_integer_value(t) >= n_vocab) {
                snprintf(msg, sizeof msg, "prompt[%zu] is not a token id of this model", i);
                splash_reply_error(reply, 400, "invalid_request_error", "invalid_prompt", msg);
                splash_token_buf_free(&ids);
                goto out_body;
            }
            if (ids.n == ids.cap) {
                size_t cap = ids.cap ? ids.cap * 2 : 64;
                int32_t *grown = realloc(ids.ids, cap * sizeof *grown);
                if (!grown)
                    goto out_ids;
                ids.ids = grown;
                ids.cap = cap;
            }
            ids.ids[ids.n++] = (int32_t)json_integer_value(t);
        }
    } else {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_prompt",
                           "prompt must be a non-empty string or an array of token ids");
        goto out_body;
    }
    if (ids.n == 0) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_prompt", "prompt is empty");
        goto out_ids;
    }
    struct completion *c = calloc(1, sizeof *c);
    if (!c)
        goto out_ids;
    c->app = app;
    c->created = (int64_t)time(NULL);
    splash_api_new_id(app, "cmpl-", c->id, sizeof c->id);
    if (splash_stop_filter_init(&c->stops, json_object_get(body, "stop"), msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_stop", msg);
        free(c);
        goto out_ids;
    }
    json_t *submit = json_object();
    if (splash_gen_params(body, submit, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out_submit;
    }
    if (!splash_app_admit(app, reply))
        goto out_submit;
    if (splash_gen_start(&c->gen, app, ids.ids, ids.n, submit, NULL, reply)) {
        splash_app_release(app);
        goto out_submit;
    }
    json_decref(submit);
    splash_token_buf_free(&ids);
    int stream = json_is_true(json_object_get(body, "stream"));
    c->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    json_decref(body);
    if (stream) {
        reply->produce = produce;
        reply->done = done;
        reply->stream_ctx = c;
        return;
    }
    /* not streamed: collect everything */
    struct splash_tok_bytes all = {0};
    while (splash_gen_next(&c->gen, &all, -1))
        ;
    if (c->gen.error_code[0]) {
        int st = splash_gen_error_status(&c->gen);
        splash_reply_error(reply, st, st == 400 ? "invalid_request_error" : "server_error",
                           c->gen.error_code, c->gen.error_message);
        if (st == 503)
            reply->retry_after = 1;
    } else {
        char *out = NULL, *tail = NULL;
        size_t out_len = 0, tail_len = 0;
        splash_stop_filter_feed(&c->stops, all.data ? all.data : "", all.len, &out, &out_len);
        splash_stop_filter_flush(&c->stops, &tail, &tail_len);
        size_t total = out_len + tail_len;
        char *text = malloc(total + 1);
        memcpy(text, out ? out : "", out_len);
        memcpy(text + out_len, tail ? tail : "", tail_len);
        text[total] = 0;
        json_t *r = chunk(c, text, total, finish_reason(c));
        if (c->gen.logprobs) {
            json_t *choice = json_array_get(json_object_get(r, "choices"), 0);
            json_object_set(choice, "logprobs", json_pack("{s:O}", "content", c->gen.logprobs));
        }
        json_object_set_new(r, "usage", usage_json(&c->gen));
        reply->json = r;
        free(text);
        free(out);
        free(tail);
    }
    splash_tok_bytes_free(&all);
    done(c);
    return;
out_submit:
    json_decref(submit);
    splash_stop_filter_free(&c->stops);
    free(c);
out_ids:
    splash_token_buf_free(&ids);
out_body:
    json_decref(body);
}
