/* POST /v1/completions: raw prompts, streamed or not (OpenAI legacy completions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/affinity.h"
#include "server/api.h"
#include "server/gen_read.h"
#include "server/api_prompt.h"
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
    char *echo;          /* echo: the prompt's text, sent before the completion */
    size_t echo_len;
    size_t logprobs_sent; /* entries of gen.logprobs already sent */
    size_t text_chars;    /* characters of the text the sent logprobs cover (text_offset) */
};

static json_t *usage_json(const struct splash_gen *g)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:I, s:I}}", "prompt_tokens",
                     (json_int_t)g->prompt_tokens, "completion_tokens",
                     (json_int_t)g->completion_tokens, "total_tokens",
                     (json_int_t)(g->prompt_tokens + g->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)g->cached_tokens, "completion_tokens_details",
                     "accepted_prediction_tokens", (json_int_t)g->spec_accepted,
                     "rejected_prediction_tokens", (json_int_t)(g->spec_proposed - g->spec_accepted));
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

/* The completions API's own logprobs shape for the tokens decoded since the last call:
 * {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}. NULL when none
 * were asked for. */
static json_t *new_logprobs(struct completion *c)
{
    json_t *all = c->gen.logprobs;
    if (!all)
        return NULL;
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(),
           *offsets = json_array();
    for (; c->logprobs_sent < json_array_size(all); c->logprobs_sent++) {
        json_t *e = json_array_get(all, c->logprobs_sent);
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *top = json_object(), *alts = json_object_get(e, "top_logprobs");
        for (size_t i = 0; i < json_array_size(alts); i++) {
            json_t *a = json_array_get(alts, i);
            json_object_set(top, json_string_value(json_object_get(a, "token")),
                            json_object_get(a, "logprob"));
        }
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer((json_int_t)c->text_chars));
        /* characters: the bytes that start one */
        json_t *bytes = json_object_get(e, "bytes");
        for (size_t i = 0; i < json_array_size(bytes); i++)
            if ((json_integer_value(json_array_get(bytes, i)) & 0xc0) != 0x80)
                c->text_chars++;
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offsets);
}

/* A chunk carrying the logprobs of the tokens decoded since the last one. */
static json_t *chunk_lp(struct completion *c, const char *text, size_t len, const char *finish)
{
    json_t *r = chunk(c, text, len, finish);
    json_t *lp = new_logprobs(c);
    if (lp)
        json_object_set_new(json_array_get(json_object_get(r, "choices"), 0), "logprobs", lp);
    return r;
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
        splash_sse_event(&c->sse, NULL, chunk_lp(c, out, out_len, NULL));
    free(out);
    if (!running || matched) {
        if (c->gen.error_code[0]) {
            splash_sse_event(&c->sse, NULL,
                             json_pack("{s:{s:s, s:s, s:s, s:n}}", "error", "message",
                                       c->gen.error_message, "type", "server_error", "code",
                                       c->gen.error_code, "param"));
        } else {
            splash_stop_filter_flush(&c->stops, &out, &out_len);
            if (out_len)
                splash_sse_event(&c->sse, NULL, chunk_lp(c, out, out_len, NULL));
            free(out);
            splash_sse_event(&c->sse, NULL, chunk_lp(c, NULL, 0, finish_reason(c)));
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
    free(c->echo);
    free(c);
}

/* The prompt's token ids: a string, or an array of token ids (one prompt; a batch of several
 * is refused). Returns 0, -1 with msg, or 1 with msg when the
 * text cannot fit the context. */
static int read_prompt(struct splash_app *app, json_t *prompt, struct splash_token_buf *ids,
                       char *msg, size_t msg_size)
{
    if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
        (json_is_string(json_array_get(prompt, 0)) || json_is_array(json_array_get(prompt, 0))))
        prompt = json_array_get(prompt, 0);
    if (json_is_string(prompt)) {
        char why[400];
        int st = splash_api_encode_bounded(app, json_string_value(prompt),
                                           json_string_length(prompt), ids, why, sizeof why);
        if (st)
            snprintf(msg, msg_size, "prompt: %s", why);
        return st;
    }
    if (json_is_array(prompt) && json_array_size(prompt) > 1 &&
        (json_is_string(json_array_get(prompt, 0)) || json_is_array(json_array_get(prompt, 0)))) {
        snprintf(msg, msg_size,
                 "prompt: a batch of %zu prompts is not supported; send one prompt per request",
                 json_array_size(prompt));
        return -1;
    }
    if (!json_is_array(prompt) || !json_array_size(prompt)) {
        snprintf(msg, msg_size, "prompt must be a non-empty string or an array of token ids");
        return -1;
    }
    size_t n_vocab = splash_tokenizer_n_tokens(app->tok);
    for (size_t i = 0; i < json_array_size(prompt); i++) {
        json_t *t = json_array_get(prompt, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            (size_t)json_integer_value(t) >= n_vocab) {
            snprintf(msg, msg_size, "prompt[%zu] is not a token id of this model", i);
            return -1;
        }
        if (ids->n == ids->cap) {
            size_t cap = ids->cap ? ids->cap * 2 : 64;
            int32_t *grown = realloc(ids->ids, cap * sizeof *grown);
            if (!grown) {
                snprintf(msg, msg_size, "out of memory");
                return -1;
            }
            ids->ids = grown;
            ids->cap = cap;
        }
        ids->ids[ids->n++] = (int32_t)json_integer_value(t);
    }
    return 0;
}

static int append_text(struct splash_tok_bytes *b, const char *text, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, text, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

/* echo: the prompt's text, its special tokens written out. */
static int set_echo(struct completion *c, const struct splash_token_buf *ids)
{
    struct splash_tok_bytes text = {0};
    struct splash_err err;
    if (splash_tokenizer_decode(c->app->tok, ids->ids, ids->n, SPLASH_DETOK_SPECIAL, &text, &err) !=
        SPLASH_OK) {
        splash_tok_bytes_free(&text);
        return -1;
    }
    c->echo = text.data;
    c->echo_len = text.len;
    for (size_t i = 0; i < text.len; i++)
        if (((unsigned char)text.data[i] & 0xc0) != 0x80)
            c->text_chars++;
    return 0;
}

void splash_api_completions(void *appv, const struct splash_http_request *req,
                            struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[512];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    struct splash_token_buf ids = {0};
    struct completion *c = NULL;
    struct splash_gen_params params;
    splash_gen_params_init(&params);
    struct splash_tok_bytes all = {0};
    if (!splash_api_check_model(app, body, reply) ||
        splash_affinity_take(req, body, SPLASH_AFFINITY_OPENAI, reply))
        goto out;
    if (json_object_get(body, "thinking_token_budget")) {
        splash_reply_error(reply, 400, "invalid_request_error", "unsupported_parameter",
                           "thinking_token_budget: completions have no thinking to budget; use "
                           "/v1/chat/completions");
        goto out;
    }
    json_t *v = json_object_get(body, "best_of");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) != 1)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter",
                           "best_of must be 1: this server generates one choice per request");
        goto out;
    }
    v = json_object_get(body, "echo");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter",
                           "echo must be a boolean");
        goto out;
    }
    int bad = read_prompt(app, json_object_get(body, "prompt"), &ids, msg, sizeof msg);
    if (bad) {
        splash_reply_error(reply, 400, "invalid_request_error",
                           bad > 0 ? "context_length_exceeded" : "invalid_prompt", msg);
        goto out;
    }
    if (ids.n == 0) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_prompt", "prompt is empty");
        goto out;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        goto out;
    }
    c->app = app;
    c->created = (int64_t)time(NULL);
    splash_api_new_id(app, "cmpl-", c->id, sizeof c->id);
    if (splash_stop_filter_init(&c->stops, json_object_get(body, "stop"), msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_stop", msg);
        goto out;
    }
    struct splash_err err;
    if (splash_gen_read_openai(body, &params, &err)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", err.msg);
        goto out;
    }
    if (json_is_true(json_object_get(body, "echo")) && set_echo(c, &ids)) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        goto out;
    }
    if (!splash_app_admit(app, reply))
        goto out;
    if (splash_gen_start(&c->gen, app, ids.ids, ids.n, &params, NULL, reply)) {
        splash_app_release(app);
        goto out;
    }
    c->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    if (json_is_true(json_object_get(body, "stream"))) {
        if (c->echo_len) {
            json_t *first = chunk(c, c->echo, c->echo_len, NULL);
            if (c->gen.logprobs) /* the prompt's tokens have no logprobs here: an empty list */
                json_object_set_new(json_array_get(json_object_get(first, "choices"), 0),
                                    "logprobs",
                                    json_pack("{s:[], s:[], s:[], s:[]}", "tokens",
                                              "token_logprobs", "top_logprobs", "text_offset"));
            splash_sse_event(&c->sse, NULL, first);
        }
        reply->produce = produce;
        reply->done = done;
        reply->stream_ctx = c;
        c = NULL;
        goto out;
    }
    /* not streamed: collect up to the end or a stop string, as a stream would */
    int running = 1;
    while (running) {
        struct splash_tok_bytes piece = {0};
        running = splash_gen_next(&c->gen, &piece, -1);
        char *out = NULL;
        size_t out_len = 0;
        int matched = piece.len && splash_stop_filter_feed(&c->stops, piece.data, piece.len, &out,
                                                          &out_len);
        splash_tok_bytes_free(&piece);
        if (out_len && append_text(&all, out, out_len))
            running = 0;
        free(out);
        if (matched)
            break;
    }
    if (c->gen.error_code[0]) {
        int st = splash_gen_error_status(&c->gen);
        splash_reply_error(reply, st, st == 400 ? "invalid_request_error" : "server_error",
                           c->gen.error_code, c->gen.error_message);
        if (st == 503)
            reply->retry_after = 1;
    } else {
        char *tail = NULL;
        size_t tail_len = 0;
        splash_stop_filter_flush(&c->stops, &tail, &tail_len);
        size_t total = c->echo_len + all.len + tail_len;
        char *text = malloc(total + 1);
        if (text) {
            memcpy(text, c->echo ? c->echo : "", c->echo_len);
            memcpy(text + c->echo_len, all.data ? all.data : "", all.len);
            memcpy(text + c->echo_len + all.len, tail ? tail : "", tail_len);
            text[total] = 0;
            json_t *r = chunk_lp(c, text, total, finish_reason(c));
            json_object_set_new(r, "usage", usage_json(&c->gen));
            reply->json = r;
            free(text);
        }
        free(tail);
    }
    done(c);
    c = NULL;
out:
    splash_api_error_param(reply, body);
    splash_tok_bytes_free(&all);
    if (c) {
        splash_stop_filter_free(&c->stops);
        free(c->echo);
        free(c);
    }
    splash_gen_params_free(&params);
    splash_token_buf_free(&ids);
    json_decref(body);
}
