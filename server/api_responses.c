/* POST /v1/responses (OpenAI Responses), streamed or not: input items become chat messages for
 * the template, the output parser's deltas become output items (reasoning, message,
 * function_call). Nothing is stored: previous_response_id is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/affinity.h"
#include "server/api.h"
#include "server/gen_read.h"
#include "server/api_prompt.h"
#include "server/api_run.h"
#include "server/chat/chat_request.h"
#include "server/chat/template_probe.h"
#include "server/responses_tools.h"
#include "server/sse.h"
#include "server/think_budget.h"

static void bad_request(struct splash_http_reply *reply, const char *code, const char *msg)
{
    splash_reply_error(reply, 400, "invalid_request_error", code, msg);
}

/* ---- input conversion ---------------------------------------------------------------------- */

/* Text parts (input_text, output_text, text, refusal) as chat text parts. */
static json_t *parts_text(const json_t *content, const char *where, char *msg, size_t size)
{
    if (json_is_string(content))
        return json_incref((json_t *)content);
    if (!json_is_array(content)) {
        snprintf(msg, size, "%s.content must be a string or an array of content parts", where);
        return NULL;
    }
    json_t *parts = json_array();
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *p = json_array_get(content, k);
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, type && !strcmp(type, "refusal") ? "refusal" : "text");
        if (type && (!strcmp(type, "input_image") || !strcmp(type, "input_file") ||
                     !strcmp(type, "input_audio"))) {
            snprintf(msg, size,
                     "%s.content[%zu]: %s is not supported: this model serves text "
                     "only",
                     where, k, type);
            goto fail;
        }
        if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text") &&
                      strcmp(type, "text") && strcmp(type, "refusal"))) {
            snprintf(msg, size, "%s.content[%zu].type must be input_text or output_text", where, k);
            goto fail;
        }
        if (!json_is_string(text)) {
            snprintf(msg, size, "%s.content[%zu].%s must be a string", where, k,
                     strcmp(type, "refusal") ? "text" : "refusal");
            goto fail;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return parts;
fail:
    json_decref(parts);
    return NULL;
}

/* The assistant turn being gathered: its texts, calls and reasoning replay as one message. */
struct turn {
    json_t *items;
    char *reasoning;
};

static void turn_flush(struct turn *t, json_t *out)
{
    if (t->items && (json_array_size(t->items) || t->reasoning))
        json_array_append_new(out, splash_chat_replay_assistant(t->items, t->reasoning));
    if (t->items)
        json_decref(t->items);
    free(t->reasoning);
    t->items = NULL;
    t->reasoning = NULL;
}

static void turn_add(struct turn *t, json_t *item)
{
    if (!t->items)
        t->items = json_array();
    json_array_append_new(t->items, item);
}

/* A reasoning item's text: its reasoning_text content, else its summary. */
static int reasoning_text(const json_t *item, const char *where, struct turn *t, json_t *out,
                          char *msg, size_t size)
{
    json_t *list = json_object_get(item, "content");
    const char *part_type = "reasoning_text";
    if (!json_is_array(list) || !json_array_size(list)) {
        list = json_object_get(item, "summary");
        part_type = "summary_text";
    }
    if (list && !json_is_null(list) && !json_is_array(list)) {
        snprintf(msg, size, "%s.summary must be an array", where);
        return -1;
    }
    size_t total = 0;
    for (size_t k = 0; k < json_array_size(list); k++) {
        json_t *text = json_object_get(json_array_get(list, k), "text");
        if (!json_is_string(text)) {
            snprintf(msg, size, "%s: each %s part needs a string text", where, part_type);
            return -1;
        }
        total += json_string_length(text) + 1;
    }
    if (!total)
        return 0; /* encrypted_content only: nothing the template can render */
    /* reasoning after text or calls of the same turn starts the next turn */
    if (t->items && json_array_size(t->items))
        turn_flush(t, out);
    char *buf = malloc(total + 1);
    if (!buf)
        return -1;
    size_t off = 0;
    for (size_t k = 0; k < json_array_size(list); k++) {
        json_t *text = json_object_get(json_array_get(list, k), "text");
        if (off)
            buf[off++] = '\n';
        memcpy(buf + off, json_string_value(text), json_string_length(text));
        off += json_string_length(text);
    }
    buf[off] = 0;
    free(t->reasoning);
    t->reasoning = buf;
    return 0;
}

static int convert_item(const json_t *item, const char *where, struct turn *t, json_t *out,
                        json_t *call_names, const struct splash_responses_tools *tools, char *msg,
                        size_t size)
{
    if (!json_is_object(item)) {
        snprintf(msg, size, "%s must be an object", where);
        return -1;
    }
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *role = json_string_value(json_object_get(item, "role"));
    if (!type && role)
        type = "message";
    if (!type) {
        snprintf(msg, size, "%s.type must be a string", where);
        return -1;
    }
    if (!strcmp(type, "message")) {
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                      strcmp(role, "developer"))) {
            snprintf(msg, size, "%s.role must be user, assistant, system or developer", where);
            return -1;
        }
        json_t *content = parts_text(json_object_get(item, "content"), where, msg, size);
        if (!content)
            return -1;
        if (!strcmp(role, "assistant")) {
            if (json_is_string(content)) {
                turn_add(t, json_pack("{s:s, s:o}", "type", "text", "text", content));
            } else {
                for (size_t k = 0; k < json_array_size(content); k++)
                    turn_add(t, json_incref(json_array_get(content, k)));
                json_decref(content);
            }
            return 0;
        }
        turn_flush(t, out);
        json_array_append_new(out, json_pack("{s:s, s:o}", "role", role, "content", content));
        return 0;
    }
    if (!strcmp(type, "function_call")) {
        json_t *call_id = json_object_get(item, "call_id"), *name = json_object_get(item, "name");
        json_t *args = json_object_get(item, "arguments");
        if (!json_is_string(call_id) || !json_is_string(name)) {
            snprintf(msg, size, "%s: a function_call needs a string call_id and name", where);
            return -1;
        }
        if (!json_is_string(args)) {
            snprintf(msg, size, "%s.arguments must be a string", where);
            return -1;
        }
        /* a call without parameters may carry empty arguments */
        const char *text = json_string_value(args);
        text += strspn(text, " \t\r\n");
        json_t *obj = *text ? json_loads(text, 0, NULL) : json_object();
        if (!json_is_object(obj)) {
            if (obj)
                json_decref(obj);
            snprintf(msg, size, "%s.arguments must be a JSON object", where);
            return -1;
        }
        /* a namespaced tool's call goes back to the model under the name it knows */
        json_t *model_name = json_string(splash_responses_tools_model_name(
            tools, json_string_value(name),
            json_string_value(json_object_get(item, "namespace"))));
        turn_add(t, json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_call", "id", call_id, "name",
                              model_name, "arguments", obj));
        json_object_set_new(call_names, json_string_value(call_id), model_name);
        return 0;
    }
    if (!strcmp(type, "function_call_output")) {
        json_t *call_id = json_object_get(item, "call_id");
        if (!json_is_string(call_id)) {
            snprintf(msg, size, "%s.call_id must be a string", where);
            return -1;
        }
        json_t *output = json_object_get(item, "output");
        json_t *content = output && !json_is_null(output) ? parts_text(output, where, msg, size)
                                                          : json_string("");
        if (!content)
            return -1;
        turn_flush(t, out);
        json_t *tm = json_pack("{s:s, s:o, s:O}", "role", "tool", "content", content,
                               "tool_call_id", call_id);
        json_t *name = json_object_get(call_names, json_string_value(call_id));
        if (name)
            json_object_set(tm, "name", name);
        json_array_append_new(out, tm);
        return 0;
    }
    if (!strcmp(type, "reasoning"))
        return reasoning_text(item, where, t, out, msg, size);
    if (!strcmp(type, "item_reference")) {
        snprintf(msg, size,
                 "%s: item_reference needs stored responses, which this server does "
                 "not keep; send the items themselves",
                 where);
        return -1;
    }
    snprintf(msg, size,
             "%s.type %s is not message, function_call, function_call_output or "
             "reasoning",
             where, type);
    return -1;
}

/* instructions and input as OpenAI chat messages. */
static json_t *convert_input(const json_t *body, const struct splash_responses_tools *tools,
                            char *msg, size_t size)
{
    json_t *out = json_array();
    json_t *call_names = json_object();
    struct turn t = {0};
    json_t *instructions = json_object_get(body, "instructions");
    if (json_is_string(instructions)) {
        json_array_append_new(out,
                              json_pack("{s:s, s:O}", "role", "system", "content", instructions));
    } else if (instructions && !json_is_null(instructions)) {
        snprintf(msg, size, "instructions must be a string");
        goto fail;
    }
    json_t *input = json_object_get(body, "input");
    if (json_is_string(input)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "user", "content", input));
    } else if (json_is_array(input) && json_array_size(input)) {
        for (size_t i = 0; i < json_array_size(input); i++) {
            char where[32];
            snprintf(where, sizeof where, "input[%zu]", i);
            if (convert_item(json_array_get(input, i), where, &t, out, call_names, tools, msg,
                             size))
                goto fail;
        }
        turn_flush(&t, out);
    } else {
        snprintf(msg, size, "input must be a string or a non-empty array of items");
        goto fail;
    }
    json_decref(call_names);
    return out;
fail:
    turn_flush(&t, out);
    json_decref(call_names);
    json_decref(out);
    return NULL;
}

/* The function tools the model sees (flattened and checked, responses_tools.h) as OpenAI chat
 * tools. */
static json_t *convert_tools(const json_t *tools)
{
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
        json_t *params = json_object_get(t, "parameters");
        json_t *fn = json_pack("{s:O}", "name", name);
        if (json_is_string(desc))
            json_object_set(fn, "description", desc);
        json_object_set_new(fn, "parameters",
                            json_is_object(params)
                                ? json_incref(params)
                                : json_pack("{s:s, s:{}}", "type", "object", "properties"));
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return out;
}

/* ---- output items ---------------------------------------------------------------------------- */

static json_t *reasoning_item(const char *id, const char *text, size_t len)
{
    return json_pack("{s:s, s:s, s:[], s:[{s:s, s:s%}]}", "id", id, "type", "reasoning", "summary",
                     "content", "type", "reasoning_text", "text", text ? text : "", text ? len : 0);
}

static json_t *text_part(const char *text, size_t len)
{
    return json_pack("{s:s, s:s%, s:[], s:[]}", "type", "output_text", "text", text ? text : "",
                     text ? len : 0, "annotations", "logprobs");
}

static json_t *message_item(const char *id, const char *status, json_t *content)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "status", status,
                     "role", "assistant", "content", content);
}

/* A function_call item; a namespaced tool's call names the tool and its namespace as the
 * client offered them (to_client: responses_tools.h). */
static json_t *call_item(const json_t *to_client, const char *id, const char *status,
                         const char *call_id, const char *name, const char *args, size_t len)
{
    json_t *item = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status",
                             status, "call_id", call_id);
    splash_responses_tools_name_call(to_client, item, name, name ? strlen(name) : 0);
    json_object_set_new(item, "arguments", json_stringn(args ? args : "", args ? len : 0));
    return item;
}

/* ---- the reply ------------------------------------------------------------------------------- */

enum item { I_NONE, I_REASONING, I_MESSAGE, I_CALL };

struct resp {
    struct splash_app *app;
    struct splash_api_run run;
    struct splash_sse sse;
    char id[48];
    json_t *base;   /* the response object's fields that echo the request */
    json_t *output; /* the output items finished so far (streaming) */
    json_t *to_client; /* namespaced tools' names (responses_tools.h), or NULL */
    int64_t seq;    /* sequence_number of the next event */
    int finished;
    enum item open;
    char item_id[48], call_id[48];
    int call;     /* the open call's index in run.result.calls */
    size_t start; /* where the open item's text starts in run.result */
};

static json_t *usage_json(const struct resp *r)
{
    const struct splash_gen *g = &r->run.gen;
    return json_pack("{s:I, s:{s:I}, s:I, s:{s:I}, s:I}", "input_tokens",
                     (json_int_t)g->prompt_tokens, "input_tokens_details", "cached_tokens",
                     (json_int_t)g->cached_tokens, "output_tokens",
                     (json_int_t)g->completion_tokens, "output_tokens_details", "reasoning_tokens",
                     (json_int_t)r->run.reasoning_tokens, "total_tokens",
                     (json_int_t)(g->prompt_tokens + g->completion_tokens));
}

/* The response object: status in_progress, completed, incomplete or failed. */
static json_t *response_json(const struct resp *r, const char *status, json_t *output)
{
    json_t *o = json_deep_copy(r->base);
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "output", output ? output : json_array());
    if (!strcmp(status, "incomplete"))
        json_object_set_new(o, "incomplete_details",
                            json_pack("{s:s}", "reason", "max_output_tokens"));
    if (!strcmp(status, "failed"))
        json_object_set_new(o, "error",
                            json_pack("{s:s, s:s}", "code", r->run.gen.error_code, "message",
                                      r->run.gen.error_message));
    if (!strcmp(status, "completed") || !strcmp(status, "incomplete"))
        json_object_set_new(o, "usage", usage_json(r));
    return o;
}

static const char *final_status(const struct resp *r)
{
    return splash_api_run_hit_limit(&r->run) ? "incomplete" : "completed";
}

static json_t *output_json(struct resp *r)
{
    const struct splash_chat_result *res = &r->run.result;
    json_t *out = json_array();
    char id[48];
    if (res->reasoning_len) {
        splash_api_new_id(r->app, "rs_", id, sizeof id);
        json_array_append_new(out, reasoning_item(id, res->reasoning, res->reasoning_len));
    }
    if (res->content_len || (!res->n_calls && !res->reasoning_len)) {
        splash_api_new_id(r->app, "msg_", id, sizeof id);
        json_array_append_new(
            out, message_item(id, "completed",
                              json_pack("[o]", text_part(res->content, res->content_len))));
    }
    for (size_t i = 0; i < res->n_calls; i++) {
        char call_id[48];
        splash_api_new_id(r->app, "fc_", id, sizeof id);
        splash_api_new_id(r->app, "call_", call_id, sizeof call_id);
        json_array_append_new(out, call_item(r->to_client, id, "completed", call_id,
                                             res->calls[i].name, res->calls[i].args,
                                             res->calls[i].args_len));
    }
    return out;
}

/* ---- streaming ------------------------------------------------------------------------------- */

static void emit(struct resp *r, const char *type, json_t *event)
{
    json_t *e = json_pack("{s:s, s:I}", "type", type, "sequence_number", (json_int_t)r->seq++);
    json_object_update(e, event);
    json_decref(event);
    splash_sse_event(&r->sse, type, e);
}

static int out_index(const struct resp *r)
{
    return (int)json_array_size(r->output);
}

static void close_item(struct resp *r)
{
    const struct splash_chat_result *res = &r->run.result;
    json_t *item = NULL;
    int at = out_index(r);
    switch (r->open) {
    case I_NONE:
        return;
    case I_REASONING: {
        const char *text = res->reasoning ? res->reasoning + r->start : "";
        size_t len = res->reasoning_len - r->start;
        emit(r, "response.reasoning_text.done",
             json_pack("{s:s, s:i, s:i, s:s%}", "item_id", r->item_id, "output_index", at,
                       "content_index", 0, "text", text, len));
        emit(r, "response.content_part.done",
             json_pack("{s:s, s:i, s:i, s:{s:s, s:s%}}", "item_id", r->item_id, "output_index", at,
                       "content_index", 0, "part", "type", "reasoning_text", "text", text, len));
        item = reasoning_item(r->item_id, text, len);
        break;
    }
    case I_MESSAGE: {
        const char *text = res->content ? res->content + r->start : "";
        size_t len = res->content_len - r->start;
        emit(r, "response.output_text.done",
             json_pack("{s:s, s:i, s:i, s:s%, s:[]}", "item_id", r->item_id, "output_index", at,
                       "content_index", 0, "text", text, len, "logprobs"));
        emit(r, "response.content_part.done",
             json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index", at,
                       "content_index", 0, "part", text_part(text, len)));
        item = message_item(r->item_id, "completed", json_pack("[o]", text_part(text, len)));
        break;
    }
    case I_CALL: {
        const struct splash_chat_call *c = &res->calls[r->call];
        item = call_item(r->to_client, r->item_id, "completed", r->call_id, c->name, c->args,
                         c->args_len);
        emit(r, "response.function_call_arguments.done",
             json_pack("{s:s, s:i, s:O, s:s%}", "item_id", r->item_id, "output_index", at, "name",
                       json_object_get(item, "name"), "arguments", c->args ? c->args : "",
                       c->args ? c->args_len : 0));
        break;
    }
    }
    emit(r, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", at, "item", item));
    json_array_append_new(r->output, item);
    r->open = I_NONE;
}

static void open_item(struct resp *r, enum item kind, json_t *item)
{
    close_item(r);
    r->open = kind;
    json_object_set_new(item, "id", json_string(r->item_id));
    emit(r, "response.output_item.added",
         json_pack("{s:i, s:o}", "output_index", out_index(r), "item", item));
}

static void on_delta(void *user, const struct splash_chat_delta *d)
{
    struct resp *r = user;
    const struct splash_chat_result *res = &r->run.result;
    switch (d->kind) {
    case SPLASH_DELTA_REASONING:
        if (r->open != I_REASONING) {
            close_item(r);
            splash_api_new_id(r->app, "rs_", r->item_id, sizeof r->item_id);
            open_item(r, I_REASONING,
                      json_pack("{s:s, s:[], s:[]}", "type", "reasoning", "summary", "content"));
            r->start = res->reasoning_len - d->len;
            emit(r, "response.content_part.added",
                 json_pack("{s:s, s:i, s:i, s:{s:s, s:s}}", "item_id", r->item_id, "output_index",
                           out_index(r), "content_index", 0, "part", "type", "reasoning_text",
                           "text", ""));
        }
        emit(r, "response.reasoning_text.delta",
             json_pack("{s:s, s:i, s:i, s:s%}", "item_id", r->item_id, "output_index", out_index(r),
                       "content_index", 0, "delta", d->text, d->len));
        break;
    case SPLASH_DELTA_CONTENT:
        if (r->open != I_MESSAGE) {
            close_item(r);
            splash_api_new_id(r->app, "msg_", r->item_id, sizeof r->item_id);
            open_item(r, I_MESSAGE,
                      json_pack("{s:s, s:s, s:s, s:[]}", "type", "message", "status", "in_progress",
                                "role", "assistant", "content"));
            r->start = res->content_len - d->len;
            emit(r, "response.content_part.added",
                 json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index",
                           out_index(r), "content_index", 0, "part", text_part("", 0)));
        }
        emit(r, "response.output_text.delta",
             json_pack("{s:s, s:i, s:i, s:s%, s:[]}", "item_id", r->item_id, "output_index",
                       out_index(r), "content_index", 0, "delta", d->text, d->len, "logprobs"));
        break;
    case SPLASH_DELTA_CALL_NAME:
        close_item(r);
        splash_api_new_id(r->app, "fc_", r->item_id, sizeof r->item_id);
        splash_api_new_id(r->app, "call_", r->call_id, sizeof r->call_id);
        r->call = d->call;
        json_t *item = json_pack("{s:s, s:s, s:s}", "type", "function_call", "status",
                                 "in_progress", "call_id", r->call_id);
        splash_responses_tools_name_call(r->to_client, item, d->text, d->len);
        json_object_set_new(item, "arguments", json_string(""));
        open_item(r, I_CALL, item);
        break;
    case SPLASH_DELTA_CALL_ARGS:
        if (r->open == I_CALL)
            emit(r, "response.function_call_arguments.delta",
                 json_pack("{s:s, s:i, s:s%}", "item_id", r->item_id, "output_index", out_index(r),
                           "delta", d->text, d->len));
        break;
    }
}

static ssize_t produce(void *ctx, char *buf, size_t max)
{
    struct resp *r = ctx;
    size_t n = splash_sse_take(&r->sse, buf, max);
    if (n)
        return (ssize_t)n;
    if (r->finished)
        return -1;
    if (splash_api_run_pump(&r->run, 100))
        return 0;
    if (r->run.gen.error_code[0]) {
        close_item(r);
        emit(r, "response.failed",
             json_pack("{s:o}", "response", response_json(r, "failed", json_copy(r->output))));
    } else {
        if (r->open == I_NONE && !json_array_size(r->output)) {
            /* an empty answer is still a message */
            struct splash_chat_delta d = {SPLASH_DELTA_CONTENT, 0, "", 0};
            on_delta(r, &d);
        }
        close_item(r);
        const char *status = final_status(r);
        emit(r, !strcmp(status, "completed") ? "response.completed" : "response.incomplete",
             json_pack("{s:o}", "response", response_json(r, status, json_copy(r->output))));
    }
    r->finished = 1;
    return 0;
}

static void resp_free(struct resp *r)
{
    splash_api_run_free(&r->run);
    splash_sse_free(&r->sse);
    if (r->base)
        json_decref(r->base);
    if (r->output)
        json_decref(r->output);
    if (r->to_client)
        json_decref(r->to_client);
    free(r);
}

static void done(void *ctx)
{
    resp_free(ctx);
}

/* ---- the handler ------------------------------------------------------------------------------
 */

/* Fields of the Responses API this server cannot honour: a 400 naming each. */
static int refuse_unsupported(const json_t *body, char *msg, size_t size)
{
    static const char *const stored[] = {"previous_response_id", "conversation", "prompt"};
    for (size_t i = 0; i < sizeof stored / sizeof stored[0]; i++) {
        json_t *v = json_object_get(body, stored[i]);
        if (v && !json_is_null(v)) {
            snprintf(msg, size,
                     "%s is not supported: this server stores no responses, "
                     "conversations or prompts; send the whole input",
                     stored[i]);
            return -1;
        }
    }
    if (json_is_true(json_object_get(body, "background"))) {
        snprintf(msg, size, "background is not supported: responses run in the foreground");
        return -1;
    }
    json_t *text = json_object_get(body, "text");
    json_t *format = json_object_get(text, "format");
    const char *ftype = json_string_value(json_object_get(format, "type"));
    if (text && !json_is_null(text) && !json_is_object(text)) {
        snprintf(msg, size, "text must be an object");
        return -1;
    }
    /* json_object and json_schema formats constrain the output (grammar) */
    if (format && !json_is_null(format) &&
        (!ftype || (strcmp(ftype, "text") && strcmp(ftype, "json_object") &&
                    strcmp(ftype, "json_schema")))) {
        snprintf(msg, size, "text.format.type %s is not supported: text, json_object or json_schema",
                 ftype ? ftype : "(missing)");
        return -1;
    }
    json_t *stream = json_object_get(body, "stream");
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        snprintf(msg, size, "stream must be a boolean");
        return -1;
    }
    return 0;
}

static json_t *base_json(struct resp *r, const json_t *body, int effort)
{
    json_t *v;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:b, s:n, s:n}", "id", r->id, "object", "response",
                          "created_at", (json_int_t)time(NULL), "status", "in_progress",
                          "background", 0, "error", "incomplete_details");
    v = json_object_get(body, "instructions");
    json_object_set_new(o, "instructions", json_is_string(v) ? json_incref(v) : json_null());
    v = json_object_get(body, "max_output_tokens");
    json_object_set_new(o, "max_output_tokens", json_is_integer(v) ? json_incref(v) : json_null());
    json_object_set_new(o, "model", json_string(splash_app_model_reported(r->app)));
    json_object_set_new(o, "output", json_array());
    v = json_object_get(body, "parallel_tool_calls");
    json_object_set_new(o, "parallel_tool_calls", json_boolean(!json_is_false(v)));
    json_object_set_new(o, "previous_response_id", json_null());
    json_object_set_new(
        o, "reasoning",
        json_pack("{s:o, s:n}", "effort",
                  effort >= 0 ? json_string(splash_effort_name(effort)) : json_null(), "summary"));
    json_object_set_new(o, "store", json_false());
    v = json_object_get(body, "temperature");
    json_object_set_new(o, "temperature", json_is_number(v) ? json_incref(v) : json_real(1.0));
    /* the text format the request asked for (json_object and json_schema constrain the output) */
    v = json_object_get(json_object_get(body, "text"), "format");
    json_object_set_new(o, "text",
                        json_is_object(v) ? json_pack("{s:O}", "format", v)
                                          : json_pack("{s:{s:s}}", "format", "type", "text"));
    v = json_object_get(body, "tool_choice");
    json_object_set_new(o, "tool_choice",
                        v && !json_is_null(v) ? json_incref(v) : json_string("auto"));
    v = json_object_get(body, "tools");
    json_object_set_new(o, "tools", json_is_array(v) ? json_incref(v) : json_array());
    v = json_object_get(body, "top_p");
    json_object_set_new(o, "top_p", json_is_number(v) ? json_incref(v) : json_real(1.0));
    json_object_set_new(o, "truncation", json_string("disabled"));
    json_object_set_new(o, "usage", json_null());
    v = json_object_get(body, "metadata");
    json_object_set_new(o, "metadata", json_is_object(v) ? json_incref(v) : json_object());
    return o;
}

/* Everything up to the prompt's token ids. */
struct prep {
    json_t *messages, *tools;
    struct splash_responses_tools rt; /* the request's tools as the model sees them */
    int effort;
    struct splash_api_prompt p;
};

static void prep_free(struct prep *r)
{
    splash_responses_tools_free(&r->rt);
    if (r->messages)
        json_decref(r->messages);
    if (r->tools)
        json_decref(r->tools);
    splash_api_prompt_free(&r->p);
}

static int prepare(struct splash_app *app, const json_t *body, struct prep *r,
                   struct splash_http_reply *reply)
{
    char msg[SPLASH_API_MSG_MAX];
    memset(r, 0, sizeof *r);
    r->effort = -1;
    if (!splash_api_check_model(app, body, reply))
        return -1;
    if (refuse_unsupported(body, msg, sizeof msg)) {
        bad_request(reply, "unsupported_parameter", msg);
        return -1;
    }
    if (splash_responses_tools_read(json_object_get(body, "tools"), &r->rt, msg, sizeof msg)) {
        bad_request(reply, "invalid_tools", msg);
        return -1;
    }
    r->tools = convert_tools(r->rt.flat);
    json_t *choice = json_object_get(body, "tool_choice");
    if (choice && !json_is_null(choice)) {
        const char *s = json_string_value(choice);
        const char *type = json_string_value(json_object_get(choice, "type"));
        int ok = s ? !strcmp(s, "none") || !strcmp(s, "auto") || !strcmp(s, "required")
                   : type && (strcmp(type, "function") ||
                              json_is_string(json_object_get(choice, "name")));
        if (!ok) {
            bad_request(reply, "invalid_tool_choice",
                        "tool_choice must be none, auto, required or {type: function, name}");
            return -1;
        }
        if (s && !strcmp(s, "none"))
            json_array_clear(r->tools);
    }
    if (!json_array_size(r->tools)) {
        json_decref(r->tools);
        r->tools = NULL;
    }
    json_t *reasoning = json_object_get(body, "reasoning");
    if (reasoning && !json_is_null(reasoning) && !json_is_object(reasoning)) {
        bad_request(reply, "invalid_parameter", "reasoning must be an object");
        return -1;
    }
    json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    if (splash_api_effort(json_object_get(reasoning, "effort"), "reasoning.effort", &r->effort, msg,
                          sizeof msg) ||
        splash_api_check_kwargs(kwargs, msg, sizeof msg)) {
        bad_request(reply, "invalid_parameter", msg);
        return -1;
    }
    json_t *converted = convert_input(body, &r->rt, msg, sizeof msg);
    if (!converted) {
        bad_request(reply, "invalid_input", msg);
        return -1;
    }
    struct splash_err err;
    enum splash_status st = splash_chat_normalize(app, converted, &r->messages, &err);
    json_decref(converted);
    if (st) {
        bad_request(reply, "invalid_input", err.msg);
        return -1;
    }
    int status =
        splash_api_prompt_make(app, r->messages, r->tools, r->effort,
                               json_is_object(kwargs) ? kwargs : NULL, &r->p, msg, sizeof msg);
    if (status) {
        splash_reply_error(reply, status, "invalid_request_error",
                           r->p.over_context_tokens ? "context_length_exceeded" : "template_error",
                           msg);
        return -1;
    }
    return 0;
}

int splash_api_responses_prompt(struct splash_app *app, const json_t *body,
                                struct splash_api_prompt *out, struct splash_http_reply *reply)
{
    struct prep r;
    int rc = prepare(app, body, &r, reply);
    if (!rc) {
        *out = r.p;
        memset(&r.p, 0, sizeof r.p);
    }
    prep_free(&r);
    return rc;
}

void splash_api_responses(void *appv, const struct splash_http_request *req,
                          struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[SPLASH_API_MSG_MAX];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    struct splash_gen_params params;
    splash_gen_params_init(&params);
    struct prep pr;
    memset(&pr, 0, sizeof pr);
    struct resp *r = NULL;
    int64_t budget;
    struct splash_err err;
    int refused_params = splash_gen_read_responses(body, &params, &err) != SPLASH_OK;
    if (refused_params)
        snprintf(msg, sizeof msg, "%s", err.msg);
    if (refused_params ||
        splash_think_budget_param(body, app->opts->thinking_token_budget, &budget, msg,
                                  sizeof msg)) {
        if (!splash_api_check_model(app, body, reply))
            goto out;
        bad_request(reply, "invalid_parameter", msg);
        goto out;
    }
    if (prepare(app, body, &pr, reply) ||
        splash_affinity_take(req, body, SPLASH_AFFINITY_OPENAI, reply))
        goto out;
    const struct splash_api_prompt *p = &pr.p;
    if (p->prompt.thinks)
        splash_api_think_params(app, &params, budget, (int64_t)p->ids.n);
    /* a forced call chooses among the tools the model sees */
    json_t *seen = json_copy(body);
    json_object_set(seen, "tools", pr.rt.flat);
    int refused = splash_api_grammar_submit(app, seen, splash_api_spec_responses, &p->prompt,
                                            &params, msg, sizeof msg);
    json_decref(seen);
    if (refused) {
        bad_request(reply, "invalid_parameter", msg);
        goto out;
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        goto out;
    }
    r->app = app;
    if (json_object_size(pr.rt.to_client))
        r->to_client = json_incref(pr.rt.to_client);
    splash_api_new_id(app, "resp_", r->id, sizeof r->id);
    r->output = json_array();
    r->base = base_json(r, body, p->prompt.effort);
    int streaming = json_is_true(json_object_get(body, "stream"));
    if (splash_api_run_init(&r->run, app, p, pr.tools, NULL, streaming ? on_delta : NULL, r)) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        goto out;
    }
    char line[96];
    splash_api_reasoning_line(pr.effort, p, line, sizeof line);
    if (splash_api_run_start(&r->run, p, &params, line, reply))
        goto out;
    if (streaming) {
        emit(r, "response.created",
             json_pack("{s:o}", "response", response_json(r, "in_progress", NULL)));
        emit(r, "response.in_progress",
             json_pack("{s:o}", "response", response_json(r, "in_progress", NULL)));
        reply->produce = produce;
        reply->done = done;
        reply->stream_ctx = r;
        r = NULL;
        goto out;
    }
    while (splash_api_run_pump(&r->run, -1))
        ;
    if (r->run.gen.error_code[0]) {
        int status = splash_gen_error_status(&r->run.gen);
        splash_reply_error(reply, status, status == 400 ? "invalid_request_error" : "server_error",
                           r->run.gen.error_code, r->run.gen.error_message);
        if (status == 503)
            reply->retry_after = 1;
    }
    else
        reply->json = response_json(r, final_status(r), output_json(r));
out:
    splash_api_error_param(reply, body);
    if (r)
        resp_free(r);
    prep_free(&pr);
    splash_gen_params_free(&params);
    json_decref(body);
}
