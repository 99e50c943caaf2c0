/* Server state helpers and the route table. */
#include "server/app.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/api.h"

int splash_app_model_known(const struct splash_app *app, const char *name)
{
    if (!strcmp(name, app->model_name))
        return 1;
    for (int i = 0; i < app->opts->n_served_names; i++)
        if (!strcmp(name, app->opts->served_names[i]))
            return 1;
    return 0;
}

const char *splash_app_model_reported(const struct splash_app *app)
{
    if (app->opts->announce_served_name && app->opts->n_served_names)
        return app->opts->served_names[0];
    return app->model_name;
}

int64_t splash_app_context(struct splash_app *app)
{
    json_t *info = splash_engine_client_info(app->engine);
    return info ? json_integer_value(json_object_get(info, "n_ctx")) : 0;
}

int splash_app_admit(struct splash_app *app, struct splash_http_reply *reply)
{
    pthread_mutex_lock(&app->lock);
    if (app->admitted >= app->opts->queue_size) {
        app->rejected_503++;
        pthread_mutex_unlock(&app->lock);
        char msg[160];
        snprintf(msg, sizeof msg, "the server holds %d requests already (--queue-size); retry shortly",
                 app->opts->queue_size);
        splash_reply_error(reply, 503, "overloaded_error", "capacity_exhausted", msg);
        reply->retry_after = 1;
        return 0;
    }
    app->admitted++;
    app->requests_total++;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    app->last_activity = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    app->released = 0;
    pthread_mutex_unlock(&app->lock);
    return 1;
}

void splash_app_release(struct splash_app *app)
{
    pthread_mutex_lock(&app->lock);
    app->admitted--;
    pthread_mutex_unlock(&app->lock);
}

const struct splash_route splash_app_routes[] = {
    {"GET", "/", splash_api_webui, 1},
    {"GET", "/health", splash_api_info_health, 1},
    {"GET", "/ready", splash_api_info_ready, 1},
    {"GET", "/status", splash_api_info_status, 0},
    {"GET", "/metrics", splash_api_info_metrics, 0},
    {"GET", "/v1/models", splash_api_models, 0},
    {"GET", "/v1/models/*", splash_api_model, 0},
    {"POST", "/v1/chat/completions", splash_api_chat, 0},
    {"POST", "/v1/completions", splash_api_completions, 0},
    {"POST", "/v1/messages", splash_api_messages, 0},
    {"POST", "/v1/messages/count_tokens", splash_api_messages_count_tokens, 0},
    {"POST", "/v1/responses", splash_api_responses, 0},
    {"POST", "/apply-template", splash_api_apply_template, 0},
    {"POST", "/tokenize", splash_api_tokenize, 0},
    {"POST", "/detokenize", splash_api_detokenize, 0},
    {"POST", "/v1/memory/release", splash_api_memory_release, 0},
};
const size_t splash_app_n_routes = sizeof splash_app_routes / sizeof splash_app_routes[0];
