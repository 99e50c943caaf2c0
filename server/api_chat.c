/* POST /v1/chat/completions (OpenAI), streamed or not, with reasoning and tool calls
 * parsed from the model's output in its chat format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tokenizer/tokenizer.h"
#include "server/api.h"
#include "server/chat/chat_parser.h"
#include "server/chat/template_probe.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/sse.h"
#include "server/think_budget.h"

struct chat {
    struct splash_app *app;
    struct splash_gen gen;
    struct splash_chat_parser *parser;
    struct splash_sse sse;
    struct splash_chat_result result; /* accumulated (non-streamed replies, finish reason) */
    char id[48];
    int64_t created;
    int include_usage, stream, sent_role, finished;
    int in_reasoning;
    int64_t reasoning_tokens;
    char call_ids[16][40];
};

static json_t *chunk_base(struct chat *c)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", c->id, "object", "chat.completion.chunk",
                     "created", (json_int_t)c->created, "model", splash_app_model_reported(c->app),
                     "system_fingerprint", "splash");
}

static void emit_delta(struct chat *c, json_t *delta, const char *finish)
{
    json_t *chunk = chunk_base(c);
    json_object_set_new(chunk, "choices",
                        json_pack("[{s:i, s:o, s:n, s:o}]", "index", 0, "delta", delta, "logprobs",
                                  "finish_reason", finish ? json_string(finish) : json_null()));
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

/* Parser deltas become SSE chunks (streaming) and the accumulated result. */
static void on_delta(void *user, const struct splash_chat_delta *d)
{
    struct chat *c = user;
    splash_chat_result_add(&c->result, d);
    if (d->kind != SPLASH_DELTA_REASONING)
        c->in_reasoning = 0;
    if (!c->stream)
        return;
    if (!c->sent_role) {
        emit_delta(c, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL);
        c->sent_role = 1;
    }
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
    if (c->result.n_calls)
        return "tool_calls";
    return c->gen.finish_reason[0] && strcmp(c->gen.finish_reason, "cancelled") ? c->gen.finish_reason
                                                                                : "stop";
}

static json_t *usage_json(struct chat *c)
{
    const struct splash_gen *g = &c->gen;
    return json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:I}}", "prompt_tokens",
                     (json_int_t)g->prompt_tokens, "completion_tokens",
                     (json_int_t)g->completion_tokens, "total_tokens",
                     (json_int_t)(g->prompt_tokens + g->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)g->cached_tokens, "completion_tokens_details",
                     "reasoning_tokens", (json_int_t)c->reasoning_tokens);
}

/* Pulls one engine event through the parser; 0 once the generation ended. */
static int pump(struct chat *c, int timeout_ms)
{
    struct splash_tok_bytes text = {0};
    int64_t before = c->gen.completion_tokens;
    int running = splash_gen_next(&c->gen, &text, timeout_ms);
    if (text.len)
        splash_chat_parser_feed(c->parser, text.data, text.len, on_delta, c);
    if (c->in_reasoning)
        c->reasoning_tokens += c->gen.completion_tokens - before;
    splash_tok_bytes_free(&text);
    if (!running)
        splash_chat_parser_finish(c->parser, on_delta, c);
    return running;
}

static ssize_t produce(void *ctx, char *buf, size_t max)
{
    struct chat *c = ctx;
    size_t n = splash_sse_take(&c->sse, buf, max);
    if (n)
        return (ssize_t)n;
    if (c->finished)
        return -1;
    if (!pump(c, 100)) {
        if (c->gen.error_code[0]) {
            splash_sse_event(&c->sse, NULL,
                             json_pack("{s:{s:s, s:s, s:s}}", "error", "message", c->gen.error_message,
                                       "type", "server_error", "code", c->gen.error_code));
        } else {
            if (!c->sent_role) {
                emit_delta(c, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL);
                c->sent_role = 1;
            }
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

static void chat_free(struct chat *c)
{
    if (c->parser)
        splash_chat_parser_destroy(c->parser);
    splash_chat_result_free(&c->result);
    splash_sse_free(&c->sse);
    free(c);
}

static void done(void *ctx)
{
    struct chat *c = ctx;
    splash_gen_end(&c->gen);
    splash_app_release(c->app);
    chat_free(c);
}

static json_t *message_json(struct chat *c)
{
    struct splash_chat_result *r = &c->result;
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", r->content ? r->content : "",
                          r->content_len);
    if (r->reasoning_len)
        json_object_set_new(m, "reasoning_content", json_stringn(r->reasoning, r->reasoning_len));
    if (r->n_calls) {
        json_t *calls = json_array();
        for (size_t i = 0; i < r->n_calls; i++) {
            char id[40];
            call_id(c, (int)i, id, sizeof id);
            json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", id, "type",
                                                   "function", "function", "name", r->calls[i].name,
                                                   "arguments", r->calls[i].args ? r->calls[i].args : "{}",
                                                   r->calls[i].args ? r->calls[i].args_len : 2));
        }
        json_object_set_new(m, "tool_calls", calls);
        if (!r->content_len)
            json_object_set_new(m, "content", json_null());
    }
    return m;
}

/* tools: an array of {type: function, function: {name, parameters}}; NULL when absent. */
static int check_tools(const json_t *tools, char *msg, size_t size)
{
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools)) {
        snprintf(msg, size, "tools must be an array");
        return -1;
    }
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        if (!json_is_string(json_object_get(json_object_get(t, "function"), "name"))) {
            snprintf(msg, size, "tools[%zu].function.name must be a string", i);
            return -1;
        }
    }
    return 0;
}

void splash_api_chat(void *appv, const struct splash_http_request *req, struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[1024];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    json_t *messages = NULL, *submit = NULL;
    struct splash_prompt prompt = {0};
    struct splash_token_buf ids = {0};
    struct chat *c = NULL;
    if (!splash_api_check_model(app, body, reply))
        goto out;
    json_t *tools = json_object_get(body, "tools");
    if (check_tools(tools, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_tools", msg);
        goto out;
    }
    json_t *choice = json_object_get(body, "tool_choice");
    if (json_is_string(choice) && !strcmp(json_string_value(choice), "none"))
        tools = NULL;
    int effort = -1;
    json_t *re = json_object_get(body, "reasoning_effort");
    if (re && !json_is_null(re)) {
        enum splash_effort e;
        if (!json_is_string(re) || !splash_effort_parse(json_string_value(re), &e)) {
            splash_reply_error(reply, 400, "invalid_request_error", "invalid_reasoning_effort",
                               "reasoning_effort must be none, minimal, low, medium, high, xhigh or max");
            goto out;
        }
        effort = (int)e;
    }
    json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    if (kwargs && !json_is_null(kwargs) && !json_is_object(kwargs)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter",
                           "chat_template_kwargs must be an object");
        goto out;
    }
    messages = splash_chat_normalize(app, json_object_get(body, "messages"), msg, sizeof msg);
    if (!messages) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_messages", msg);
        goto out;
    }
    int status = splash_chat_render(app, messages, tools, effort, kwargs, &prompt, msg, sizeof msg);
    if (status) {
        splash_reply_error(reply, status, "invalid_request_error", "template_error", msg);
        goto out;
    }
    struct splash_err err;
    if (splash_tokenizer_encode(app->tok, prompt.text, prompt.len, SPLASH_TOKENIZE_PARSE_SPECIAL,
                                &ids, &err) != SPLASH_OK) {
        snprintf(msg, sizeof msg, "messages: %s", err.msg);
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_messages", msg);
        goto out;
    }
    submit = json_object();
    if (splash_gen_params(body, submit, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out;
    }
    int64_t budget;
    if (splash_think_budget_param(body, app->opts->thinking_token_budget, &budget, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        goto out;
    }
    if (prompt.thinks)
        splash_api_think_submit(app, submit, budget, (int64_t)ids.n);
    c = calloc(1, sizeof *c);
    if (!c)
        goto out;
    c->app = app;
    c->created = (int64_t)time(NULL);
    c->stream = json_is_true(json_object_get(body, "stream"));
    c->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    c->in_reasoning = prompt.thinks;
    splash_api_new_id(app, "chatcmpl-", c->id, sizeof c->id);
    struct splash_chat_parser_opts po = {.format = app->format, .starts_in_reasoning = prompt.thinks,
                                         .tools = tools};
    c->parser = splash_chat_parser_create(&po);
    if (!c->parser || !splash_app_admit(app, reply)) {
        chat_free(c);
        c = NULL;
        goto out;
    }
    char reasoning[96];
    enum splash_effort used = prompt.effort >= 0 ? (enum splash_effort)prompt.effort : SPLASH_EFFORT_COUNT;
    snprintf(reasoning, sizeof reasoning, "effort %s%s%s · thinking %s",
             effort >= 0 ? splash_effort_name((enum splash_effort)effort) : "absent",
             effort < 0 ? " → " : "",
             effort < 0 ? (used < SPLASH_EFFORT_COUNT ? splash_effort_name(used) : "template") : "",
             prompt.thinks ? "on" : "off");
    if (splash_gen_start(&c->gen, app, ids.ids, ids.n, submit, reasoning, reply)) {
        splash_app_release(app);
        chat_free(c);
        c = NULL;
        goto out;
    }
    if (c->stream) {
        reply->produce = produce;
        reply->done = done;
        reply->stream_ctx = c;
        c = NULL;
        goto out;
    }
    while (pump(c, -1))
        ;
    if (c->gen.error_code[0]) {
        splash_reply_error(reply, 500, "server_error", c->gen.error_code, c->gen.error_message);
    } else {
        json_t *ch = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "message", message_json(c),
                               "logprobs", "finish_reason", finish_reason(c));
        if (c->gen.logprobs)
            json_object_set_new(ch, "logprobs", json_pack("{s:O}", "content", c->gen.logprobs));
        reply->json = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:o}", "id", c->id, "object",
                                "chat.completion", "created", (json_int_t)c->created, "model",
                                splash_app_model_reported(app), "system_fingerprint", "splash",
                                "choices", ch, "usage", usage_json(c));
    }
    done(c);
    c = NULL;
out:
    splash_token_buf_free(&ids);
    splash_prompt_free(&prompt);
    if (messages)
        json_decref(messages);
    if (submit)
        json_decref(submit);
    json_decref(body);
}
