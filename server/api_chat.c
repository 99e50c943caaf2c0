/* POST /v1/chat/completions (OpenAI), streamed or not, with reasoning and tool calls
 * parsed from the model's output in its chat format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/affinity.h"
#include "server/api.h"
#include "server/gen_read.h"
#include "server/api_prompt.h"
#include "server/api_run.h"
#include "server/sse.h"
#include "server/think_budget.h"

struct chat {
    struct splash_app *app;
    struct splash_api_run run;
    struct splash_sse sse;
    char id[48];
    int64_t created;
    int include_usage, stream, sent_role, finished;
    size_t logprobs_sent; /* entries of run.gen.logprobs already streamed */
    char call_ids[16][40];
};

static json_t *chunk_base(struct chat *c)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", c->id, "object", "chat.completion.chunk",
                     "created", (json_int_t)c->created, "model", splash_app_model_reported(c->app),
                     "system_fingerprint", "splash");
}

/* The logprobs of the tokens decoded since the last chunk that carried some: the chunks'
 * logprobs.content join to the whole answer's. */
static json_t *new_logprobs(struct chat *c)
{
    json_t *all = c->run.gen.logprobs;
    if (!all || c->logprobs_sent >= json_array_size(all))
        return json_null();
    json_t *content = json_array();
    for (; c->logprobs_sent < json_array_size(all); c->logprobs_sent++)
        json_array_append(content, json_array_get(all, c->logprobs_sent));
    return json_pack("{s:o}", "content", content);
}

static void emit_delta(struct chat *c, json_t *delta, const char *finish)
{
    json_t *chunk = chunk_base(c);
    /* the role's opening chunk carries no token */
    json_t *logprobs = c->sent_role ? new_logprobs(c) : json_null();
    json_object_set_new(chunk, "choices",
                        json_pack("[{s:i, s:o, s:o, s:o}]", "index", 0, "delta", delta, "logprobs",
                                  logprobs, "finish_reason",
                                  finish ? json_string(finish) : json_null()));
    splash_sse_event(&c->sse, NULL, chunk);
}

static void call_id(struct chat *c, int index, char *out, size_t size)
{
    if (index < 16) {
        if (!c->call_ids[index][0])
            splash_api_new_id(c->app, "call_", c->call_ids[index], sizeof c->call_ids[index]);
        snprintf(out, size, "%s", c->call_ids[index]);
    } else {
        splash_api_new_id(c->app, "call_", out, size);
    }
}

static void send_role(struct chat *c)
{
    if (!c->sent_role) {
        emit_delta(c, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL);
        c->sent_role = 1;
    }
}

/* Streaming: each certain delta becomes a chunk. */
static void on_delta(void *user, const struct splash_chat_delta *d)
{
    struct chat *c = user;
    send_role(c);
    switch (d->kind) {
    case SPLASH_DELTA_REASONING:
        emit_delta(c, json_pack("{s:s%}", "reasoning_content", d->text, d->len), NULL);
        break;
    case SPLASH_DELTA_CONTENT:
        emit_delta(c, json_pack("{s:s%}", "content", d->text, d->len), NULL);
        break;
    case SPLASH_DELTA_CALL_NAME: {
        char id[40];
        call_id(c, d->call, id, sizeof id);
        emit_delta(c, json_pack("{s:[{s:i, s:s, s:s, s:{s:s%, s:s}}]}", "tool_calls", "index",
                                d->call, "id", id, "type", "function", "function", "name", d->text,
                                d->len, "arguments", ""),
                   NULL);
        break;
    }
    case SPLASH_DELTA_CALL_ARGS:
        emit_delta(c, json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", d->call, "function",
                                "arguments", d->text, d->len),
                   NULL);
        break;
    }
}

static const char *finish_reason(struct chat *c)
{
    if (c->run.result.n_calls)
        return "tool_calls";
    return splash_api_run_hit_limit(&c->run) ? "length" : "stop";
}

static json_t *usage_json(struct chat *c)
{
    const struct splash_gen *g = &c->run.gen;
    return json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:I, s:I, s:I}}", "prompt_tokens",
                     (json_int_t)g->prompt_tokens, "completion_tokens",
                     (json_int_t)g->completion_tokens, "total_tokens",
                     (json_int_t)(g->prompt_tokens + g->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)g->cached_tokens, "completion_tokens_details",
                     "reasoning_tokens", (json_int_t)c->run.reasoning_tokens,
                     "accepted_prediction_tokens", (json_int_t)g->spec_accepted,
                     "rejected_prediction_tokens", (json_int_t)(g->spec_proposed - g->spec_accepted));
}

static json_t *error_json(const struct splash_gen *g)
{
    return json_pack("{s:{s:s, s:s, s:s, s:n}}", "error", "message", g->error_message, "type",
                     "server_error", "code", g->error_code, "param");
}

static ssize_t produce(void *ctx, char *buf, size_t max)
{
    struct chat *c = ctx;
    size_t n = splash_sse_take(&c->sse, buf, max);
    if (n)
        return (ssize_t)n;
    if (c->finished)
        return -1;
    if (!splash_api_run_pump(&c->run, 100)) {
        if (c->run.gen.error_code[0]) {
            splash_sse_event(&c->sse, NULL, error_json(&c->run.gen));
        } else {
            send_role(c);
            emit_delta(c, json_object(), finish_reason(c));
            if (c->include_usage) {
                json_t *u = chunk_base(c);
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", usage_json(c));
                splash_sse_event(&c->sse, NULL, u);
            }
        }
        splash_sse_raw(&c->sse, "[DONE]");
        c->finished = 1;
    }
    return 0;
}

static void chat_free(void *ctx)
{
    struct chat *c = ctx;
    splash_api_run_free(&c->run);
    splash_sse_free(&c->sse);
    free(c);
}

static json_t *message_json(struct chat *c)
{
    const struct splash_chat_result *r = &c->run.result;
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", r->content ? r->content : "",
                          r->content_len);
    if (r->reasoning_len)
        json_object_set_new(m, "reasoning_content", json_stringn(r->reasoning, r->reasoning_len));
    if (r->n_calls) {
        json_t *calls = json_array();
        for (size_t i = 0; i < r->n_calls; i++) {
            char id[40];
            call_id(c, (int)i, id, sizeof id);
            const char *args = r->calls[i].args ? r->calls[i].args : "{}";
            json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", id, "type",
                                                   "function", "function", "name", r->calls[i].name,
                                                   "arguments", args,
                                                   r->calls[i].args ? r->calls[i].args_len : 2));
        }
        json_object_set_new(m, "tool_calls", calls);
        if (!r->content_len)
            json_object_set_new(m, "content", json_null());
    }
    return m;
}

/* OpenAI's stop: a string or an array of strings. */
static json_t *stops_of(const json_t *stop, char *msg, size_t size)
{
    if (!stop || json_is_null(stop))
        return json_array();
    if (json_is_string(stop))
        return json_pack("[O]", stop);
    if (splash_api_check_stops(stop, "stop", msg, size))
        return NULL;
    return json_incref((json_t *)stop);
}

void splash_api_chat(void *appv, const struct splash_http_request *req, struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[SPLASH_API_MSG_MAX];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    json_t *messages = NULL, *stops = NULL;
    struct splash_gen_params params;
    splash_gen_params_init(&params);
    struct splash_api_prompt prompt = {0};
    struct chat *c = NULL;
    if (!splash_api_check_model(app, body, reply) ||
        splash_affinity_take(req, body, SPLASH_AFFINITY_OPENAI, reply))
        goto out;
    json_t *tools = json_object_get(body, "tools");
    int effort = -1;
    json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    if (splash_api_check_tools(tools, "tools", msg, sizeof msg) ||
        splash_api_effort(json_object_get(body, "reasoning_effort"), "reasoning_effort", &effort, msg,
                          sizeof msg) ||
        splash_api_check_kwargs(kwargs, msg, sizeof msg) ||
        !(stops = stops_of(json_object_get(body, "stop"), msg, sizeof msg))) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out;
    }
    json_t *choice = json_object_get(body, "tool_choice");
    if (json_is_string(choice) && !strcmp(json_string_value(choice), "none"))
        tools = NULL;
    struct splash_err nerr;
    if (splash_chat_normalize(app, json_object_get(body, "messages"), &messages, &nerr)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_messages", nerr.msg);
        goto out;
    }
    int status = splash_api_prompt_make(app, messages, tools, effort, kwargs, &prompt, msg, sizeof msg);
    if (status) {
        splash_reply_error(reply, status, "invalid_request_error",
                           prompt.over_context_tokens ? "context_length_exceeded" : "template_error",
                           msg);
        goto out;
    }
    int64_t budget;
    struct splash_err err;
    if (splash_gen_read_openai(body, &params, &err)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", err.msg);
        goto out;
    }
    if (splash_think_budget_param(body, app->opts->thinking_token_budget, &budget, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out;
    }
    if (prompt.prompt.thinks)
        splash_api_think_params(app, &params, budget, (int64_t)prompt.ids.n);
    if (splash_api_grammar_submit(app, body, splash_api_spec_chat, &prompt.prompt, &params, msg,
                                  sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out;
    }
    c = calloc(1, sizeof *c);
    if (!c)
        goto out;
    c->app = app;
    c->created = (int64_t)time(NULL);
    c->stream = json_is_true(json_object_get(body, "stream"));
    c->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    splash_api_new_id(app, "chatcmpl-", c->id, sizeof c->id);
    if (splash_api_run_init(&c->run, app, &prompt, tools, stops, c->stream ? on_delta : NULL, c)) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        goto out;
    }
    char reasoning[96];
    splash_api_reasoning_line(effort, &prompt, reasoning, sizeof reasoning);
    if (splash_api_run_start(&c->run, &prompt, &params, reasoning, reply))
        goto out;
    if (c->stream) {
        reply->produce = produce;
        reply->done = chat_free;
        reply->stream_ctx = c;
        c = NULL;
        goto out;
    }
    while (splash_api_run_pump(&c->run, -1))
        ;
    if (c->run.gen.error_code[0]) {
        int st = splash_gen_error_status(&c->run.gen);
        splash_reply_error(reply, st, st == 400 ? "invalid_request_error" : "server_error",
                           c->run.gen.error_code, c->run.gen.error_message);
        if (st == 503)
            reply->retry_after = 1;
    } else {
        json_t *ch = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "message", message_json(c),
                               "logprobs", "finish_reason", finish_reason(c));
        if (c->run.gen.logprobs)
            json_object_set_new(ch, "logprobs", json_pack("{s:O}", "content", c->run.gen.logprobs));
        reply->json = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:o}", "id", c->id, "object",
                                "chat.completion", "created", (json_int_t)c->created, "model",
                                splash_app_model_reported(app), "system_fingerprint", "splash",
                                "choices", ch, "usage", usage_json(c));
    }
out:
    splash_api_error_param(reply, body);
    if (c)
        chat_free(c);
    splash_api_prompt_free(&prompt);
    if (stops)
        json_decref(stops);
    if (messages)
        json_decref(messages);
    splash_gen_params_free(&params);
    json_decref(body);
}
