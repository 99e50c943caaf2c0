/* Helpers every API handler uses. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "server/api.h"
#include "server/console.h"
#include "server/think_budget.h"

json_t *splash_api_parse_body(const struct splash_http_request *req, struct splash_http_reply *reply)
{
    json_error_t jerr;
    /* jansson rejects invalid UTF-8 and NUL bytes in strings by default */
    json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) {
        char msg[300];
        snprintf(msg, sizeof msg, "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
                 jerr.line, jerr.column);
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_json", msg);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_json",
                           "the body must be a JSON object");
        return NULL;
    }
    return body;
}

int splash_api_check_model(struct splash_app *app, const json_t *body,
                           struct splash_http_reply *reply)
{
    json_t *model = json_object_get(body, "model");
    if (!model || json_is_null(model)) {
        /* the one model served is the default (README "Commands"); said once per run */
        pthread_mutex_lock(&app->lock);
        int first = !app->noted_default_model;
        app->noted_default_model = 1;
        pthread_mutex_unlock(&app->lock);
        if (first)
            splash_console_line(SPLASH_CONSOLE_OUT,
                                "Note · a request without model is served by %s, the model this "
                                "server serves (said once)",
                                app->model_name);
        return 1;
    }
    if (!json_is_string(model)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_model",
                           "model must be a string");
        return 0;
    }
    if (splash_app_model_known(app, json_string_value(model)))
        return 1;
    char msg[400];
    snprintf(msg, sizeof msg, "model %.200s is not served here; this server serves %s",
             json_string_value(model), app->model_name);
    splash_reply_error(reply, 404, "invalid_request_error", "model_not_found", msg);
    return 0;
}

void splash_api_new_id(struct splash_app *app, const char *prefix, char *out, size_t size)
{
    pthread_mutex_lock(&app->lock);
    uint64_t seq = ++app->request_seq;
    pthread_mutex_unlock(&app->lock);
    /* unique per process start: the start time's bits then a counter */
    uint64_t start = (uint64_t)(app->started_at * 1000.0);
    snprintf(out, size, "%s%012llx%012llx", prefix, (unsigned long long)(start & 0xffffffffffffull),
             (unsigned long long)seq);
}

void splash_api_think_params(struct splash_app *app, struct splash_gen_params *params,
                             int64_t budget, int64_t prompt_tokens)
{
    json_t *info = splash_engine_client_info(app->engine);
    int64_t n_ctx = info ? json_integer_value(json_object_get(info, "n_ctx")) : 0;
    int64_t room = n_ctx - prompt_tokens;
    int64_t max_tokens = params->max_tokens > 0 ? params->max_tokens : room;
    struct splash_think_params *t = &params->think;
    t->on = 1;
    t->budget = splash_think_budget_effective(budget, max_tokens, room);
    t->close = app->think_close_id;
    t->call_open = app->call_open_id >= 0 ? app->call_open_id : -1;
    t->n_end = 0;
    for (int i = 0; i < app->n_think_end && i < SPLASH_GEN_MAX_THINK_END; i++)
        t->end[t->n_end++] = app->think_end[i];
}

void splash_api_error_param(struct splash_http_reply *reply, const json_t *body)
{
    json_t *err = json_object_get(reply->json, "error");
    if (reply->status < 400 || !json_is_object(err) || !json_is_null(json_object_get(err, "param")))
        return;
    const char *m = json_string_value(json_object_get(err, "message"));
    if (!m)
        return;
    /* the messages name the field first: "temperature must be ...", "messages[0].role ...",
     * "tool_choice: ..." */
    size_t n = 0, top = 0;
    while (isalnum((unsigned char)m[n]) || m[n] == '_' || m[n] == '.' || m[n] == '[' ||
           m[n] == ']') {
        if (!top && (m[n] == '.' || m[n] == '['))
            top = n;
        n++;
    }
    while (n && m[n - 1] == '.')
        n--;
    if (!top)
        top = n;
    if (!n || n >= 200 || (m[n] && m[n] != ' ' && m[n] != ':'))
        return;
    char field[200];
    snprintf(field, sizeof field, "%.*s", (int)top, m);
    /* only a field the request has, or the model it named */
    if (!json_object_get(body, field) && !(reply->status == 404 && !strcmp(field, "model")))
        return;
    json_object_set_new(err, "param", json_stringn(m, n));
}
