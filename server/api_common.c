/* Helpers every API handler uses. */
#include <stdio.h>
#include <string.h>

#include "server/api.h"

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
    if (!model || json_is_null(model))
        return 1;
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
