/* Efforts, template variables, tools and prompt rendering for the API adapters. */
#include "server/api_prompt.h"

#include <stdio.h>
#include <string.h>

#include "server/chat/template_probe.h"
#include "server/schema_shape.h"

int splash_api_effort(const json_t *v, const char *field, int *effort, char *msg, size_t msg_size)
{
    if (!v || json_is_null(v))
        return 0;
    enum splash_effort e;
    if (!json_is_string(v) || !splash_effort_parse(json_string_value(v), &e)) {
        snprintf(msg, msg_size, "%s must be none, minimal, low, medium, high, xhigh or max", field);
        return -1;
    }
    *effort = (int)e;
    return 0;
}

int splash_api_check_kwargs(const json_t *kwargs, char *msg, size_t msg_size)
{
    if (kwargs && !json_is_null(kwargs) && !json_is_object(kwargs)) {
        snprintf(msg, msg_size, "chat_template_kwargs must be an object");
        return -1;
    }
    return 0;
}

int splash_api_check_tools(const json_t *tools, const char *field, char *msg, size_t msg_size)
{
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools)) {
        snprintf(msg, msg_size, "%s must be an array", field);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || (type && strcmp(type, "function"))) {
            snprintf(msg, msg_size, "%s[%zu] must be a function tool ({type: function, function})",
                     field, i);
            return -1;
        }
        json_t *fn = json_object_get(t, "function");
        if (!json_is_string(json_object_get(fn, "name"))) {
            snprintf(msg, msg_size, "%s[%zu].function.name must be a string", field, i);
            return -1;
        }
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_null(params) && !json_is_object(params)) {
            snprintf(msg, msg_size, "%s[%zu].function.parameters must be an object", field, i);
            return -1;
        }
        char path[128];
        snprintf(path, sizeof path, "%s[%zu].function.parameters", field, i);
        if (params && json_is_object(params) &&
            splash_schema_shape_check(params, path, msg, msg_size))
            return -1;
    }
    return 0;
}

int64_t splash_api_bytes_over_context(struct splash_app *app, size_t len, int64_t *n_ctx)
{
    /* no token is longer than max_token_bytes, so a text longer than the context's tokens
     * of those cannot fit: refused before tokenizing it (a 50 MB prompt took 27 s) */
    json_t *info = app->engine ? splash_engine_client_info(app->engine) : NULL;
    *n_ctx = info ? (int64_t)json_integer_value(json_object_get(info, "n_ctx")) : 0;
    if (*n_ctx > 0 && app->max_token_bytes && len / app->max_token_bytes > (size_t)*n_ctx)
        return (int64_t)(len / app->max_token_bytes);
    return 0;
}

int splash_api_encode_bounded(struct splash_app *app, const char *text, size_t len,
                              struct splash_token_buf *ids, char *msg, size_t msg_size)
{
    int64_t n_ctx;
    if (splash_api_bytes_over_context(app, len, &n_ctx)) {
        snprintf(msg, msg_size,
                 "the prompt's %zu bytes are more than %lld tokens, this model's context, can "
                 "hold (no token is longer than %zu bytes)",
                 len, (long long)n_ctx, app->max_token_bytes);
        return 1;
    }
    struct splash_err err;
    if (splash_tokenizer_encode(app->tok, text, len, SPLASH_TOKENIZE_PARSE_SPECIAL, ids, &err) !=
        SPLASH_OK) {
        snprintf(msg, msg_size, "%s", err.msg);
        return -1;
    }
    return 0;
}

int splash_api_prompt_make(struct splash_app *app, const json_t *messages, const json_t *tools,
                           int effort, const json_t *kwargs, struct splash_api_prompt *out,
                           char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    struct splash_err err;
    if (splash_chat_render(app, messages, tools, effort, kwargs, &out->prompt, &err, msg,
                           msg_size))
        return 400;
    char why[400];
    int64_t n_ctx;
    int64_t over = splash_api_bytes_over_context(app, out->prompt.len, &n_ctx);
    int bad = splash_api_encode_bounded(app, out->prompt.text, out->prompt.len, &out->ids, why,
                                        sizeof why);
    if (bad) {
        snprintf(msg, msg_size, "messages: %s", why);
        splash_api_prompt_free(out);
        if (bad > 0) {
            out->over_context_tokens = over;
            out->n_ctx = n_ctx;
        }
        return 400;
    }
    return 0;
}

void splash_api_prompt_free(struct splash_api_prompt *p)
{
    splash_prompt_free(&p->prompt);
    splash_token_buf_free(&p->ids);
}

void splash_api_reasoning_line(int effort, const struct splash_api_prompt *p, char *buf,
                               size_t size)
{
    int used = p->prompt.effort;
    snprintf(buf, size, "effort %s%s%s · thinking %s",
             effort >= 0 ? splash_effort_name((enum splash_effort)effort) : "absent",
             effort < 0 ? " → " : "",
             effort >= 0 ? ""
             : used >= 0 && used < SPLASH_EFFORT_COUNT
                 ? splash_effort_name((enum splash_effort)used)
                 : "template",
             p->prompt.thinks ? "on" : "off");
}
