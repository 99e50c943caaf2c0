/* POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages), streamed or not:
 * requests become chat messages for the template, the output parser's deltas become content
 * blocks (thinking, text, tool_use), errors take Anthropic's shape. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/affinity.h"
#include "server/api.h"
#include "server/gen_read.h"
#include "server/api_prompt.h"
#include "server/api_run.h"
#include "server/chat/chat_request.h"
#include "server/chat/template_probe.h"
#include "server/schema_shape.h"
#include "server/sse.h"
#include "server/think_budget.h"

/* ---- errors ------------------------------------------------------------------------------- */

static const char *anthropic_type(int status)
{
    switch (status) {
    case 400:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
        return "overloaded_error";
    default:
        return "api_error";
    }
}

/* Helpers shared with the OpenAI adapters fill errors in OpenAI's shape: rewrap them. */
static void anthropic_shape(struct splash_http_reply *reply)
{
    json_t *err = json_object_get(reply->json, "error");
    if (reply->status < 400 || !json_is_object(err) || json_object_get(reply->json, "type"))
        return;
    char message[1024];
    const char *m = json_string_value(json_object_get(err, "message"));
    snprintf(message, sizeof message, "%s", m ? m : "error");
    json_decref(reply->json);
    reply->json = NULL;
    splash_reply_error_anthropic(reply, reply->status, anthropic_type(reply->status), message);
}

static void bad_request(struct splash_http_reply *reply, const char *msg)
{
    splash_reply_error_anthropic(reply, 400, "invalid_request_error", msg);
}

/* ---- request conversion ------------------------------------------------------------------- */

/* The text of a tool_result's content: a string or text blocks. */
static json_t *tool_result_text(const json_t *content, const char *where, char *msg, size_t size)
{
    if (!content || json_is_null(content))
        return json_string("");
    if (json_is_string(content))
        return json_incref((json_t *)content);
    if (!json_is_array(content)) {
        snprintf(msg, size, "%s.content must be a string or an array of text blocks", where);
        return NULL;
    }
    json_t *parts = json_array();
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *b = json_array_get(content, k);
        const char *type = json_string_value(json_object_get(b, "type"));
        json_t *text = json_object_get(b, "text");
        if (type && (!strcmp(type, "image") || !strcmp(type, "document"))) {
            snprintf(msg, size,
                     "%s.content[%zu]: %s input is not supported: this model serves "
                     "text only",
                     where, k, type);
            json_decref(parts);
            return NULL;
        }
        if (!type || strcmp(type, "text") || !json_is_string(text)) {
            snprintf(msg, size, "%s.content[%zu] must be a text block with a string text", where,
                     k);
            json_decref(parts);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return parts;
}

static void flush_user(json_t *out, json_t **parts)
{
    if (*parts && json_array_size(*parts))
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "user", "content", *parts));
    if (*parts)
        json_decref(*parts);
    *parts = NULL;
}

/* A user turn: its text blocks, and each tool_result as a tool message where it occurs. */
static int convert_user(json_t *out, const json_t *content, const json_t *call_names,
                        const char *where, char *msg, size_t size)
{
    json_t *parts = NULL;
    for (size_t j = 0; j < json_array_size(content); j++) {
        json_t *b = json_array_get(content, j);
        const char *type = json_string_value(json_object_get(b, "type"));
        char at[96];
        snprintf(at, sizeof at, "%s.content[%zu]", where, j);
        if (!json_is_object(b) || !type) {
            snprintf(msg, size, "%s.type must be a string", at);
            goto fail;
        }
        if (!strcmp(type, "text")) {
            json_t *text = json_object_get(b, "text");
            if (!json_is_string(text)) {
                snprintf(msg, size, "%s.text must be a string", at);
                goto fail;
            }
            if (!parts)
                parts = json_array();
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
        } else if (!strcmp(type, "tool_result")) {
            json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) {
                snprintf(msg, size, "%s.tool_use_id must be a string", at);
                goto fail;
            }
            json_t *text = tool_result_text(json_object_get(b, "content"), at, msg, size);
            if (!text)
                goto fail;
            flush_user(out, &parts);
            json_t *tm =
                json_pack("{s:s, s:o, s:O}", "role", "tool", "content", text, "tool_call_id", id);
            json_t *name = json_object_get(call_names, json_string_value(id));
            if (name)
                json_object_set(tm, "name", name);
            json_array_append_new(out, tm);
        } else if (!strcmp(type, "image") || !strcmp(type, "document")) {
            snprintf(msg, size, "%s: %s input is not supported: this model serves text only", at,
                     type);
            goto fail;
        } else {
            snprintf(msg, size, "%s.type %s is not text, tool_result, image or document", at, type);
            goto fail;
        }
    }
    flush_user(out, &parts);
    return 0;
fail:
    if (parts)
        json_decref(parts);
    return -1;
}

/* An assistant turn as one message, its text before its calls (models.md). */
static json_t *convert_assistant(const json_t *content, json_t *call_names, const char *where,
                                 char *msg, size_t size)
{
    json_t *items = json_array();
    char *reasoning = NULL;
    size_t reasoning_len = 0;
    json_t *m = NULL;
    for (size_t j = 0; j < json_array_size(content); j++) {
        json_t *b = json_array_get(content, j);
        const char *type = json_string_value(json_object_get(b, "type"));
        char at[96];
        snprintf(at, sizeof at, "%s.content[%zu]", where, j);
        if (!json_is_object(b) || !type) {
            snprintf(msg, size, "%s.type must be a string", at);
            goto out;
        }
        if (!strcmp(type, "text")) {
            json_t *text = json_object_get(b, "text");
            if (!json_is_string(text)) {
                snprintf(msg, size, "%s.text must be a string", at);
                goto out;
            }
            json_array_append_new(items, json_pack("{s:s, s:O}", "type", "text", "text", text));
        } else if (!strcmp(type, "tool_use")) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            json_t *input = json_object_get(b, "input");
            if (!json_is_string(id) || !json_is_string(name)) {
                snprintf(msg, size, "%s: a tool_use block needs a string id and name", at);
                goto out;
            }
            if (input && !json_is_null(input) && !json_is_object(input)) {
                snprintf(msg, size, "%s.input must be an object", at);
                goto out;
            }
            json_array_append_new(
                items,
                json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_call", "id", id, "name", name,
                          "arguments", json_is_object(input) ? json_incref(input) : json_object()));
            json_object_set(call_names, json_string_value(id), name);
        } else if (!strcmp(type, "thinking")) {
            json_t *t = json_object_get(b, "thinking");
            if (!json_is_string(t)) {
                snprintf(msg, size, "%s.thinking must be a string", at);
                goto out;
            }
            size_t n = json_string_length(t);
            char *grown = realloc(reasoning, reasoning_len + n + 1);
            if (!grown)
                goto out;
            reasoning = grown;
            memcpy(reasoning + reasoning_len, json_string_value(t), n);
            reasoning_len += n;
            reasoning[reasoning_len] = 0;
        } else if (!strcmp(type, "redacted_thinking")) {
            continue; /* encrypted elsewhere: nothing this template can render */
        } else {
            snprintf(msg, size, "%s.type %s is not text, tool_use, thinking or redacted_thinking",
                     at, type);
            goto out;
        }
    }
    m = splash_chat_replay_assistant(items, reasoning);
out:
    free(reasoning);
    json_decref(items);
    return m;
}

/* A system message inside messages (Claude Code's mid-conversation system messages): its
 * text, a string or text blocks, as a system chat message rendered where it stands. */
static json_t *convert_system(const json_t *content, const char *where, char *msg, size_t size)
{
    if (json_is_string(content))
        return json_pack("{s:s, s:O}", "role", "system", "content", content);
    if (!json_is_array(content) || !json_array_size(content)) {
        snprintf(msg, size, "%s.content must be a string or a non-empty array of text blocks",
                 where);
        return NULL;
    }
    json_t *parts = json_array();
    for (size_t j = 0; j < json_array_size(content); j++) {
        json_t *b = json_array_get(content, j);
        const char *type = json_string_value(json_object_get(b, "type"));
        json_t *text = json_object_get(b, "text");
        if (!type || strcmp(type, "text") || !json_is_string(text)) {
            snprintf(msg, size, "%s.content[%zu] must be a text block with a string text", where,
                     j);
            json_decref(parts);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return json_pack("{s:s, s:o}", "role", "system", "content", parts);
}

/* system and messages as OpenAI chat messages. A system message inside messages renders in
 * place where the template can (server.md "later system messages"); a refused role says "not
 * supported", the words on which Claude Code retries without it. */
static json_t *convert_messages(const struct splash_app *app, const json_t *body, char *msg,
                                size_t size)
{
    json_t *out = json_array();
    json_t *call_names = json_object(); /* tool_use id -> tool name */
    int saw_turn = 0;                   /* a user or assistant message came before */
    json_t *system = json_object_get(body, "system");
    if (json_is_string(system)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "system", "content", system));
    } else if (json_is_array(system)) {
        /* each block a system message: request preparation joins them by a blank line */
        for (size_t i = 0; i < json_array_size(system); i++) {
            json_t *b = json_array_get(system, i);
            json_t *text = json_object_get(b, "text");
            const char *type = json_string_value(json_object_get(b, "type"));
            if (!type || strcmp(type, "text") || !json_is_string(text)) {
                snprintf(msg, size, "system[%zu] must be a text block with a string text", i);
                goto fail;
            }
            json_array_append_new(out, json_pack("{s:s, s:O}", "role", "system", "content", text));
        }
    } else if (system && !json_is_null(system)) {
        snprintf(msg, size, "system must be a string or an array of text blocks");
        goto fail;
    }
    json_t *messages = json_object_get(body, "messages");
    if (!json_is_array(messages) || !json_array_size(messages)) {
        snprintf(msg, size, "messages must be a non-empty array");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!json_is_object(m) || !role) {
            snprintf(msg, size, "%s.role must be a string", where);
            goto fail;
        }
        json_t *content = json_object_get(m, "content");
        if (!strcmp(role, "system")) {
            if (saw_turn && app->later_system == SPLASH_LATER_SYSTEM_UNSUPPORTED) {
                snprintf(msg, size,
                         "%s.role system is not supported after the first user or assistant "
                         "message: this model's chat template cannot render it there",
                         where);
                goto fail;
            }
            json_t *sm = convert_system(content, where, msg, size);
            if (!sm)
                goto fail;
            json_array_append_new(out, sm);
            continue;
        }
        if (strcmp(role, "user") && strcmp(role, "assistant")) {
            snprintf(msg, size, "%s.role %s is not supported: user, assistant or system", where,
                     role);
            goto fail;
        }
        saw_turn = 1;
        if (json_is_string(content)) {
            json_array_append_new(out, json_pack("{s:s, s:O}", "role", role, "content", content));
            continue;
        }
        if (!json_is_array(content)) {
            snprintf(msg, size, "%s.content must be a string or an array of content blocks", where);
            goto fail;
        }
        if (!json_array_size(content)) {
            snprintf(msg, size, "%s.content must not be empty", where);
            goto fail;
        }
        if (!strcmp(role, "user")) {
            if (convert_user(out, content, call_names, where, msg, size))
                goto fail;
        } else {
            json_t *am = convert_assistant(content, call_names, where, msg, size);
            if (!am)
                goto fail;
            json_array_append_new(out, am);
        }
    }
    json_decref(call_names);
    return out;
fail:
    json_decref(call_names);
    json_decref(out);
    return NULL;
}

/* Anthropic tools as OpenAI function tools, for the template and the parser. */
static json_t *convert_tools(const json_t *tools, char *msg, size_t size)
{
    json_t *out = json_array();
    if (!tools || json_is_null(tools))
        return out;
    if (!json_is_array(tools)) {
        snprintf(msg, size, "tools must be an array");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        const char *type = json_string_value(json_object_get(t, "type"));
        json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
        json_t *schema = json_object_get(t, "input_schema");
        if (!json_is_object(t)) {
            snprintf(msg, size, "tools[%zu] must be an object", i);
            goto fail;
        }
        if (type && strcmp(type, "custom")) {
            snprintf(msg, size,
                     "tools[%zu].type %s: only custom tools (name, description, "
                     "input_schema) are supported",
                     i, type);
            goto fail;
        }
        if (!json_is_string(name) || !json_string_length(name)) {
            snprintf(msg, size, "tools[%zu].name must be a non-empty string", i);
            goto fail;
        }
        if (desc && !json_is_null(desc) && !json_is_string(desc)) {
            snprintf(msg, size, "tools[%zu].description must be a string", i);
            goto fail;
        }
        if (!json_is_object(schema)) {
            snprintf(msg, size, "tools[%zu].input_schema must be an object", i);
            goto fail;
        }
        char path[64];
        snprintf(path, sizeof path, "tools[%zu].input_schema", i);
        if (splash_schema_shape_check(schema, path, msg, size))
            goto fail;
        /* the template prints the tool as JSON: name, description, parameters, as OpenAI's */
        json_t *fn = json_pack("{s:O}", "name", name);
        if (json_is_string(desc))
            json_object_set(fn, "description", desc);
        json_object_set(fn, "parameters", schema);
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* ---- request preparation ------------------------------------------------------------------ */

/* A final assistant message of text alone is a prefill, as in Anthropic's API: the answer
 * continues it. Takes it off the converted messages; *text (malloc'ed) NULL when there is none. */
static int take_prefill(json_t *converted, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t n = json_array_size(converted);
    json_t *last = n > 1 ? json_array_get(converted, n - 1) : NULL;
    const char *role = json_string_value(json_object_get(last, "role"));
    if (!role || strcmp(role, "assistant") || json_object_get(last, "tool_calls") ||
        json_object_get(last, "reasoning_content"))
        return 0;
    json_t *content = json_object_get(last, "content");
    if (!json_is_string(content) || !json_string_length(content))
        return 0;
    *text = strdup(json_string_value(content));
    if (!*text)
        return -1;
    *len = json_string_length(content);
    json_array_remove(converted, n - 1);
    return 0;
}

/* Appends the prefill to the rendered prompt, after the generation prompt, and tokenizes the
 * whole again. */
static int add_prefill(struct splash_app *app, struct splash_api_prompt *p, const char *text,
                       size_t len, char *msg, size_t size)
{
    char *grown = realloc(p->prompt.text, p->prompt.len + len + 1);
    if (!grown) {
        snprintf(msg, size, "out of memory");
        return 500;
    }
    memcpy(grown + p->prompt.len, text, len);
    p->prompt.text = grown;
    p->prompt.len += len;
    grown[p->prompt.len] = 0;
    splash_token_buf_free(&p->ids);
    struct splash_err err;
    if (splash_tokenizer_encode(app->tok, p->prompt.text, p->prompt.len,
                                SPLASH_TOKENIZE_PARSE_SPECIAL, &p->ids, &err) != SPLASH_OK) {
        snprintf(msg, size, "messages: %s", err.msg);
        return 400;
    }
    return 0;
}

struct prep {
    json_t *messages; /* normalised chat messages */
    json_t *tools;    /* OpenAI shape; NULL: none */
    json_t *kwargs;   /* the template's chat_template_kwargs; NULL: none */
    int effort;
    int64_t budget; /* thinking token budget, -1 = no cap */
    int thinking;   /* the request asked for thinking */
    struct splash_api_prompt p;
};

static void prep_free(struct prep *r)
{
    if (r->messages)
        json_decref(r->messages);
    if (r->tools)
        json_decref(r->tools);
    if (r->kwargs)
        json_decref(r->kwargs);
    splash_api_prompt_free(&r->p);
}

/* thinking: absent, {type: enabled, budget_tokens}, {type: adaptive} or {type: disabled}. */
static int read_thinking(struct splash_app *app, const json_t *body, struct prep *r,
                         int64_t max_tokens, char *msg, size_t size)
{
    json_t *th = json_object_get(body, "thinking");
    r->budget = -1;
    if (!th || json_is_null(th))
        return 0;
    const char *type = json_string_value(json_object_get(th, "type"));
    if (!json_is_object(th) || !type) {
        snprintf(msg, size,
                 "thinking must be an object with a type (enabled, adaptive or "
                 "disabled)");
        return -1;
    }
    if (!strcmp(type, "disabled"))
        return 0;
    if (!strcmp(type, "adaptive")) {
        r->thinking = 1;
        r->budget = app->opts->thinking_token_budget;
        return 0;
    }
    if (strcmp(type, "enabled")) {
        snprintf(msg, size, "thinking.type %s is not enabled, adaptive or disabled", type);
        return -1;
    }
    json_t *bt = json_object_get(th, "budget_tokens");
    if (!json_is_integer(bt) || json_integer_value(bt) < 1024) {
        snprintf(msg, size, "thinking.budget_tokens must be an integer of at least 1024");
        return -1;
    }
    r->thinking = 1;
    /* a budget at or above max_tokens (interleaved thinking) sets no cap */
    r->budget =
        max_tokens > 0 && json_integer_value(bt) >= max_tokens ? -1 : json_integer_value(bt);
    return 0;
}

/* Everything up to the prompt's token ids. Returns 0, or fills reply (Anthropic shape). */
static int prepare(struct splash_app *app, const json_t *body, int64_t max_tokens, struct prep *r,
                   struct splash_http_reply *reply)
{
    char msg[SPLASH_API_MSG_MAX];
    memset(r, 0, sizeof *r);
    r->effort = SPLASH_EFFORT_NONE; /* Anthropic thinking is off unless asked for */
    if (!splash_api_check_model(app, body, reply))
        return -1;
    if (read_thinking(app, body, r, max_tokens, msg, sizeof msg))
        goto bad;
    json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    if (splash_api_check_kwargs(kwargs, msg, sizeof msg))
        goto bad;
    if (json_is_object(kwargs))
        r->kwargs = json_copy(kwargs);
    if (r->thinking) {
        /* on at the default effort, unless chat_template_kwargs say otherwise */
        r->effort = -1;
        json_t *et = json_object_get(r->kwargs, "enable_thinking");
        if (!et || json_is_null(et)) {
            if (!r->kwargs)
                r->kwargs = json_object();
            json_object_set_new(r->kwargs, "enable_thinking", json_true());
        }
    }
    r->tools = convert_tools(json_object_get(body, "tools"), msg, sizeof msg);
    if (!r->tools)
        goto bad;
    json_t *choice = json_object_get(body, "tool_choice");
    if (choice && !json_is_null(choice)) {
        const char *type = json_string_value(json_object_get(choice, "type"));
        if (!type || (strcmp(type, "auto") && strcmp(type, "any") && strcmp(type, "tool") &&
                      strcmp(type, "none"))) {
            snprintf(msg, sizeof msg, "tool_choice.type must be auto, any, tool or none");
            goto bad;
        }
        if (!strcmp(type, "tool") && !json_is_string(json_object_get(choice, "name"))) {
            snprintf(msg, sizeof msg, "tool_choice.name must be a string for type tool");
            goto bad;
        }
        if (!strcmp(type, "none")) {
            json_decref(r->tools);
            r->tools = json_array();
        }
    }
    if (!json_array_size(r->tools)) {
        json_decref(r->tools);
        r->tools = NULL;
    }
    json_t *converted = convert_messages(app, body, msg, sizeof msg);
    if (!converted)
        goto bad;
    char *prefill = NULL;
    size_t prefill_len = 0;
    if (take_prefill(converted, &prefill, &prefill_len)) {
        json_decref(converted);
        splash_reply_error_anthropic(reply, 500, "api_error", "out of memory");
        return -1;
    }
    struct splash_err err;
    enum splash_status st = splash_chat_normalize(app, converted, &r->messages, &err);
    json_decref(converted);
    if (st) {
        snprintf(msg, sizeof msg, "%s", err.msg);
        free(prefill);
        goto bad;
    }
    int status = splash_api_prompt_make(app, r->messages, r->tools, r->effort, r->kwargs, &r->p,
                                        msg, sizeof msg);
    if (!status && prefill && r->p.prompt.thinks) {
        snprintf(msg, sizeof msg,
                 "messages: a final assistant message (a prefill) cannot be continued while "
                 "thinking is on");
        status = 400;
    } else if (!status && prefill) {
        status = add_prefill(app, &r->p, prefill, prefill_len, msg, sizeof msg);
    }
    free(prefill);
    if (status && r->p.over_context_tokens)
        /* Anthropic's words, as for a prompt counted over the context (Claude Code compacts) */
        snprintf(msg, sizeof msg, "prompt is too long: more than %lld tokens > %lld maximum",
                 (long long)r->p.over_context_tokens, (long long)r->p.n_ctx - 1);
    if (status) {
        splash_reply_error_anthropic(reply, status, anthropic_type(status), msg);
        return -1;
    }
    return 0;
bad:
    bad_request(reply, msg);
    return -1;
}

/* ---- the reply ------------------------------------------------------------------------------ */

enum block { B_NONE, B_THINKING, B_TEXT, B_TOOL };

struct msg {
    struct splash_app *app;
    struct splash_api_run run;
    struct splash_sse sse;
    char id[48];
    int finished;
    enum block open;
    int index;          /* of the open block; blocks counted from 0 */
    size_t think_start; /* where the open thinking block starts in run.result.reasoning */
    json_t *start;      /* message_start's message until it is sent: it waits for the
                           engine to say what the prefix cache gave the prompt */
};

/* A thinking block's signature: the SHA-256 of its text, which a client sends back unchanged. */
static json_t *signature(const char *text, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    if (!EVP_Digest(text ? text : "", len, md, &n, EVP_sha256(), NULL))
        return json_string("");
    for (unsigned int i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[2 * n] = 0;
    return json_string(hex);
}

static const char *stop_reason(const struct msg *m)
{
    if (m->run.stop_matched)
        return "stop_sequence";
    if (splash_api_run_hit_limit(&m->run))
        return "max_tokens";
    if (m->run.result.n_calls)
        return "tool_use";
    return "end_turn";
}

static json_t *usage_json(const struct msg *m)
{
    const struct splash_gen *g = &m->run.gen;
    return json_pack("{s:I, s:I, s:i, s:I}", "input_tokens",
                     (json_int_t)(g->prompt_tokens - g->cached_tokens), "output_tokens",
                     (json_int_t)g->completion_tokens, "cache_creation_input_tokens", 0,
                     "cache_read_input_tokens", (json_int_t)g->cached_tokens);
}

/* message_start (and a ping), once: the usage of what is known when the request has its
 * lane (the prompt's tokens, those read from the cache), or when it ends first. */
static void send_start(struct msg *m)
{
    if (!m->start)
        return;
    json_object_set_new(m->start, "usage", usage_json(m));
    splash_sse_event(&m->sse, "message_start",
                     json_pack("{s:s, s:o}", "type", "message_start", "message", m->start));
    m->start = NULL;
    splash_sse_event(&m->sse, "ping", json_pack("{s:s}", "type", "ping"));
}

static json_t *tool_input(const char *args, size_t len)
{
    json_t *v = args ? json_loadb(args, len, JSON_ALLOW_NUL, NULL) : NULL;
    if (json_is_object(v))
        return v;
    if (v)
        json_decref(v);
    return json_object();
}

static json_t *message_json(struct msg *m)
{
    const struct splash_chat_result *r = &m->run.result;
    json_t *content = json_array();
    if (r->reasoning_len)
        json_array_append_new(content, json_pack("{s:s, s:s%, s:o}", "type", "thinking", "thinking",
                                                 r->reasoning, r->reasoning_len, "signature",
                                                 signature(r->reasoning, r->reasoning_len)));
    if (r->content_len)
        json_array_append_new(
            content, json_pack("{s:s, s:s%}", "type", "text", "text", r->content, r->content_len));
    for (size_t i = 0; i < r->n_calls; i++) {
        char id[48];
        splash_api_new_id(m->app, "toolu_", id, sizeof id);
        json_array_append_new(content,
                              json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", id,
                                        "name", r->calls[i].name, "input",
                                        tool_input(r->calls[i].args, r->calls[i].args_len)));
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", m->id, "type", "message",
                     "role", "assistant", "model", splash_app_model_reported(m->app), "content",
                     content, "stop_reason", stop_reason(m), "stop_sequence",
                     m->run.stop_matched ? json_string(m->run.stop_matched) : json_null(), "usage",
                     usage_json(m));
}

/* ---- streaming ----------------------------------------------------------------------------- */

static void close_block(struct msg *m)
{
    send_start(m);
    if (m->open == B_NONE)
        return;
    if (m->open == B_THINKING) {
        const struct splash_chat_result *r = &m->run.result;
        json_t *sig = signature(r->reasoning ? r->reasoning + m->think_start : "",
                                r->reasoning_len - m->think_start);
        splash_sse_event(&m->sse, "content_block_delta",
                         json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta",
                                   "index", m->index, "delta", "type", "signature_delta",
                                   "signature", sig));
    }
    splash_sse_event(&m->sse, "content_block_stop",
                     json_pack("{s:s, s:i}", "type", "content_block_stop", "index", m->index));
    m->open = B_NONE;
    m->index++;
}

static void open_block(struct msg *m, enum block kind, json_t *block)
{
    close_block(m); /* message_start first */
    m->open = kind;
    splash_sse_event(&m->sse, "content_block_start",
                     json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", m->index,
                               "content_block", block));
}

static void block_delta(struct msg *m, json_t *delta)
{
    splash_sse_event(&m->sse, "content_block_delta",
                     json_pack("{s:s, s:i, s:o}", "type", "content_block_delta", "index", m->index,
                               "delta", delta));
}

static void on_delta(void *user, const struct splash_chat_delta *d)
{
    struct msg *m = user;
    switch (d->kind) {
    case SPLASH_DELTA_REASONING:
        if (m->open != B_THINKING) {
            open_block(
                m, B_THINKING,
                json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""));
            m->think_start = m->run.result.reasoning_len - d->len;
        }
        block_delta(
            m, json_pack("{s:s, s:s%}", "type", "thinking_delta", "thinking", d->text, d->len));
        break;
    case SPLASH_DELTA_CONTENT:
        if (m->open != B_TEXT)
            open_block(m, B_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""));
        block_delta(m, json_pack("{s:s, s:s%}", "type", "text_delta", "text", d->text, d->len));
        break;
    case SPLASH_DELTA_CALL_NAME: {
        char id[48];
        splash_api_new_id(m->app, "toolu_", id, sizeof id);
        open_block(m, B_TOOL,
                   json_pack("{s:s, s:s, s:s%, s:{}}", "type", "tool_use", "id", id, "name",
                             d->text, d->len, "input"));
        break;
    }
    case SPLASH_DELTA_CALL_ARGS:
        if (m->open == B_TOOL)
            block_delta(m, json_pack("{s:s, s:s%}", "type", "input_json_delta", "partial_json",
                                     d->text, d->len));
        break;
    }
}

static ssize_t produce(void *ctx, char *buf, size_t max)
{
    struct msg *m = ctx;
    size_t n = splash_sse_take(&m->sse, buf, max);
    if (n)
        return (ssize_t)n;
    if (m->finished)
        return -1;
    if (splash_api_run_pump(&m->run, 100)) {
        if (m->run.gen.announced)
            send_start(m);
        return 0;
    }
    send_start(m);
    const struct splash_gen *g = &m->run.gen;
    if (g->error_code[0]) {
        char message[600];
        snprintf(message, sizeof message, "%s: %s", g->error_code, g->error_message);
        splash_sse_event(&m->sse, "error",
                         json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
                                   !strcmp(g->error_code, "engine_recovering") ? "overloaded_error"
                                                                               : "api_error",
                                   "message", message));
    } else {
        close_block(m);
        splash_sse_event(
            &m->sse, "message_delta",
            json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason",
                      stop_reason(m), "stop_sequence",
                      m->run.stop_matched ? json_string(m->run.stop_matched) : json_null(), "usage",
                      usage_json(m)));
        splash_sse_event(&m->sse, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    }
    m->finished = 1;
    return 0;
}

static void msg_free(struct msg *m)
{
    json_decref(m->start);
    splash_api_run_free(&m->run);
    splash_sse_free(&m->sse);
    free(m);
}

static void done(void *ctx)
{
    msg_free(ctx);
}

/* ---- handlers -------------------------------------------------------------------------------- */

void splash_api_messages(void *appv, const struct splash_http_request *req,
                         struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char msg[SPLASH_API_MSG_MAX];
    json_t *body = splash_api_parse_body(req, reply);
    if (!body) {
        anthropic_shape(reply);
        return;
    }
    struct prep r;
    memset(&r, 0, sizeof r);
    struct splash_gen_params params;
    splash_gen_params_init(&params);
    struct msg *m = NULL;
    json_t *mt = json_object_get(body, "max_tokens");
    if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
        bad_request(reply, "max_tokens: a positive integer is required");
        goto out;
    }
    json_t *stream = json_object_get(body, "stream");
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        bad_request(reply, "stream must be a boolean");
        goto out;
    }
    json_t *stops = json_object_get(body, "stop_sequences");
    if (splash_api_check_stops(stops, "stop_sequences", msg, sizeof msg)) {
        bad_request(reply, msg);
        goto out;
    }
    json_t *meta = json_object_get(body, "metadata");
    if (meta && !json_is_null(meta) && !json_is_object(meta)) {
        bad_request(reply, "metadata must be an object");
        goto out;
    }
    if (splash_affinity_take(req, body, SPLASH_AFFINITY_ANTHROPIC, reply))
        goto out;
    struct splash_err err;
    if (splash_gen_read_messages(body, &params, &err)) {
        bad_request(reply, err.msg);
        goto out;
    }
    if (prepare(app, body, json_integer_value(mt), &r, reply))
        goto out;
    if (r.p.prompt.thinks)
        splash_api_think_params(app, &params, r.budget, (int64_t)r.p.ids.n);
    if (splash_api_grammar_submit(app, body, splash_api_spec_messages, &r.p.prompt, &params, msg,
                                  sizeof msg)) {
        bad_request(reply, msg);
        goto out;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        splash_reply_error_anthropic(reply, 500, "api_error", "out of memory");
        goto out;
    }
    m->app = app;
    splash_api_new_id(app, "msg_", m->id, sizeof m->id);
    int streaming = json_is_true(stream);
    if (splash_api_run_init(&m->run, app, &r.p, r.tools, stops, streaming ? on_delta : NULL, m)) {
        splash_reply_error_anthropic(reply, 500, "api_error", "out of memory");
        goto out;
    }
    int64_t full = splash_gen_context_overflow(app, r.p.ids.n);
    if (full) {
        /* Anthropic's words exactly: Claude Code matches them to compact the conversation.
         * The maximum is a token short of the context, which the output needs. */
        snprintf(msg, sizeof msg, "prompt is too long: %zu tokens > %lld maximum", r.p.ids.n,
                 (long long)full - 1);
        bad_request(reply, msg);
        goto out;
    }
    char reasoning[96];
    splash_api_reasoning_line(r.effort, &r.p, reasoning, sizeof reasoning);
    if (splash_api_run_start(&m->run, &r.p, &params, reasoning, reply))
        goto out;
    if (streaming) {
        /* sent once the engine has started the request (send_start) */
        m->start = json_pack("{s:s, s:s, s:s, s:s, s:[], s:n, s:n}", "id", m->id, "type",
                             "message", "role", "assistant", "model",
                             splash_app_model_reported(app), "content", "stop_reason",
                             "stop_sequence");
        reply->produce = produce;
        reply->done = done;
        reply->stream_ctx = m;
        m = NULL;
        goto out;
    }
    while (splash_api_run_pump(&m->run, -1))
        ;
    if (m->run.gen.error_code[0]) {
        snprintf(msg, sizeof msg, "%s: %s", m->run.gen.error_code, m->run.gen.error_message);
        int status = splash_gen_error_status(&m->run.gen);
        splash_reply_error_anthropic(reply, status,
                                     status == 503 ? "overloaded_error"
                                     : status == 400 ? "invalid_request_error"
                                                     : "api_error",
                                     msg);
        if (status == 503)
            reply->retry_after = 1;
    } else {
        reply->json = message_json(m);
    }
out:
    if (m)
        msg_free(m);
    splash_gen_params_free(&params);
    prep_free(&r);
    json_decref(body);
    anthropic_shape(reply);
}

int splash_api_messages_prompt(struct splash_app *app, const json_t *body,
                               struct splash_api_prompt *out, struct splash_http_reply *reply)
{
    struct prep r;
    json_t *mt = json_object_get(body, "max_tokens");
    int rc = prepare(app, body, json_is_integer(mt) ? json_integer_value(mt) : 0, &r, reply);
    if (!rc) {
        *out = r.p;
        memset(&r.p, 0, sizeof r.p);
    }
    prep_free(&r);
    return rc;
}

void splash_api_messages_count_tokens(void *appv, const struct splash_http_request *req,
                                      struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    json_t *body = splash_api_parse_body(req, reply);
    if (!body) {
        anthropic_shape(reply);
        return;
    }
    struct prep r;
    if (!prepare(app, body, 0, &r, reply))
        reply->json = json_pack("{s:I}", "input_tokens", (json_int_t)r.p.ids.n);
    prep_free(&r);
    json_decref(body);
    anthropic_shape(reply);
}
