/* Health, readiness, status, metrics, the model list and memory release. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api.h"
#include "server/chat/chat_format.h"
#include "server/chat/template_probe.h"
#include "server/console.h"

static const char *state_name(enum splash_engine_state s)
{
    switch (s) {
    case SPLASH_ENGINE_STARTING: return "starting";
    case SPLASH_ENGINE_READY: return "ready";
    case SPLASH_ENGINE_RECOVERING: return "recovering";
    case SPLASH_ENGINE_FAILED: return "failed";
    default: return "stopped";
    }
}

void splash_api_info_health(void *appv, const struct splash_http_request *req,
                            struct splash_http_reply *reply)
{
    reply->json = json_pack("{s:s}", "status", "ok");
}

void splash_api_info_ready(void *appv, const struct splash_http_request *req,
                           struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    int retry = 0;
    char why[256];
    enum splash_engine_state s = splash_engine_client_state(app->engine, why, sizeof why, &retry);
    if (s == SPLASH_ENGINE_READY) {
        reply->json = json_pack("{s:s}", "status", "ready");
        return;
    }
    splash_reply_error(reply, 503, "server_error",
                       s == SPLASH_ENGINE_FAILED ? "engine_failed" : "engine_recovering",
                       why[0] ? why : "the engine is starting");
    reply->retry_after = s == SPLASH_ENGINE_FAILED ? 0 : retry;
    if (!reply->retry_after)
        reply->retry_after = 1; /* every 503 carries Retry-After */
}

/* server.md "Memory": the budget and the bounds on the context. This build has no SSD
 * cache, so the bounds are the model's window and what memory holds of one request. */
static json_t *memory_plan_json(const json_t *info)
{
    const json_t *plan = json_object_get(info, "plan");
    if (!plan)
        return json_null();
    json_int_t ctx = json_integer_value(json_object_get(info, "n_ctx"));
    json_int_t window = json_integer_value(json_object_get(info, "n_ctx_train"));
    json_int_t resident = json_integer_value(json_object_get(plan, "kv_capacity_tokens"));
    double yarn = json_number_value(json_object_get(plan, "yarn_factor"));
    json_int_t model = yarn > 1.0 ? ctx : window; /* past the window YaRN stretches it to ctx */
    return json_pack("{s:{s:O, s:O, s:{s:I, s:I, s:s}}}", "budget", "usable_bytes",
                     json_object_get(plan, "usable_bytes"), "bound", json_object_get(plan, "bound"),
                     "context_bounds", "model", model, "resident", resident, "bound",
                     ctx < model ? "memory" : "model");
}

static int64_t model_context(struct splash_app *app)
{
    json_t *info = splash_engine_client_info(app->engine);
    return info ? json_integer_value(json_object_get(info, "n_ctx")) : 0;
}

/* server.md "API model aliases": each alias's root is the loaded model, or with
 * --announce-served-name every other entry's root is the first alias. */
static json_t *model_object(struct splash_app *app, const char *id)
{
    int64_t ctx = splash_app_context(app);
    json_t *aliases = json_array();
    for (int i = 0; i < app->opts->n_served_names; i++)
        json_array_append_new(aliases, json_string(app->opts->served_names[i]));
    const char *root = splash_app_model_reported(app);
    if (!app->opts->announce_served_name)
        root = app->model_name;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:I, s:o, s:b}", "id", id, "object",
                          "model", "created", (json_int_t)app->started_at, "owned_by", "splash",
                          "root", root, "max_model_len", (json_int_t)ctx, "context_length",
                          (json_int_t)ctx, "aliases", aliases, "demo", app->demo);
    json_object_set_new(o, "input_modalities", json_pack("[s]", "text"));
    json_object_set_new(o, "vision", json_false());
    if (app->reasoning)
        json_object_set(o, "reasoning", app->reasoning);
    return o;
}

void splash_api_models(void *appv, const struct splash_http_request *req,
                       struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    json_t *data = json_array();
    /* the announced alias first, then the model, then the other aliases, each once */
    const char *first = splash_app_model_reported(app);
    json_array_append_new(data, model_object(app, first));
    if (strcmp(first, app->model_name))
        json_array_append_new(data, model_object(app, app->model_name));
    for (int i = 0; i < app->opts->n_served_names; i++) {
        const char *name = app->opts->served_names[i];
        int seen = !strcmp(name, first) || !strcmp(name, app->model_name);
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(name, app->opts->served_names[j]);
        if (!seen)
            json_array_append_new(data, model_object(app, name));
    }
    reply->json = json_pack("{s:s, s:o}", "object", "list", "data", data);
}

void splash_api_model(void *appv, const struct splash_http_request *req,
                      struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    const char *id = req->path + strlen("/v1/models/");
    if (!splash_app_model_known(app, id)) {
        char msg[300];
        snprintf(msg, sizeof msg, "model %.200s is not served here", id);
        splash_reply_error(reply, 404, "invalid_request_error", "model_not_found", msg);
        return;
    }
    reply->json = model_object(app, id);
}

void splash_api_info_status(void *appv, const struct splash_http_request *req,
                            struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    char why[256];
    int retry = 0;
    enum splash_engine_state s = splash_engine_client_state(app->engine, why, sizeof why, &retry);
    json_t *info = splash_engine_client_info(app->engine);
    pthread_mutex_lock(&app->lock);
    int admitted = app->admitted;
    uint64_t total = app->requests_total, gen = app->tokens_generated;
    json_t *cache = app->prefix_cache ? json_deep_copy(app->prefix_cache) : NULL;
    pthread_mutex_unlock(&app->lock);
    reply->json = json_pack(
        "{s:s, s:O?, s:{s:s, s:s?, s:i}, s:{s:I, s:b}, s:{s:i, s:i}, s:{s:I}, s:{s:I, s:I}}",
        "model", app->model_name, "plan", info, "engine", "state", state_name(s), "last_failure",
        why[0] ? why : NULL, "restarts", splash_engine_client_restarts(app->engine), "capabilities",
        "max_context_tokens", (json_int_t)splash_app_context(app), "vision", 0, "queue", "admitted",
        admitted, "size", app->opts->queue_size, "console", "dropped_lines",
        (json_int_t)splash_console_dropped(), "requests", "total", (json_int_t)total,
        "tokens_generated", (json_int_t)gen);
    json_object_set_new(reply->json, "maximum_context_tokens", json_integer(model_context(app)));
    json_object_set_new(reply->json, "chat_template",
                        json_pack("{s:s, s:s}", "later_system",
                                  splash_later_system_name((enum splash_later_system)app->later_system),
                                  "format", app->format ? app->format->name : ""));
    json_object_set_new(reply->json, "memory_plan", memory_plan_json(info));
    json_t *experts = splash_engine_client_experts(app->engine);
    /* the streamed experts' store as the engine last reported it, else as it started
     * (null: its experts load whole) */
    if (!experts && json_is_object(json_object_get(info, "streamed_experts")))
        experts = json_deep_copy(json_object_get(info, "streamed_experts"));
    json_object_set_new(reply->json, "streamed_experts", experts ? experts : json_null());
    /* the rows decode cycles verify and why (the engine's READY frame) */
    json_t *spec = json_object_get(info, "speculation");
    json_object_set_new(reply->json, "verify_rows",
                        json_is_object(spec) ? json_deep_copy(json_object_get(spec, "verify_rows"))
                                             : json_string("off"));
    json_object_set_new(reply->json, "speculation",
                        json_is_object(spec) ? json_deep_copy(spec) : json_pack("{s:s}", "mode", "off"));
    /* the prefix cache and its SSD tier (server.md "SSD cache"), as the last request left
     * them */
    json_t *disk = cache ? json_object_get(cache, "disk") : NULL;
    json_object_set_new(reply->json, "disk",
                        disk ? json_deep_copy(disk) : json_pack("{s:b}", "enabled", 0));
    json_object_set_new(reply->json, "prefix_cache",
                        cache ? cache : json_pack("{s:b, s:I, s:I}", "enabled",
                                                  info != NULL, "points", (json_int_t)0,
                                                  "cached_tokens", (json_int_t)0));
}

void splash_api_info_metrics(void *appv, const struct splash_http_request *req,
                             struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    pthread_mutex_lock(&app->lock);
    int admitted = app->admitted;
    uint64_t total = app->requests_total, gen = app->tokens_generated,
             prompt = app->prompt_tokens_total, rejected = app->rejected_503;
    uint64_t proposed = app->draft_proposed, accepted = app->draft_accepted,
             cycles = app->draft_cycles;
    pthread_mutex_unlock(&app->lock);
    char *text = NULL;
    int n = asprintf(&text,
                     "# HELP splash_requests_total Requests admitted.\n"
                     "# TYPE splash_requests_total counter\n"
                     "splash_requests_total %llu\n"
                     "# HELP splash_requests_rejected_total Requests refused with 503.\n"
                     "# TYPE splash_requests_rejected_total counter\n"
                     "splash_requests_rejected_total %llu\n"
                     "# HELP splash_requests_active Requests running or waiting.\n"
                     "# TYPE splash_requests_active gauge\n"
                     "splash_requests_active %d\n"
                     "# HELP splash_prompt_tokens_total Prompt tokens submitted.\n"
                     "# TYPE splash_prompt_tokens_total counter\n"
                     "splash_prompt_tokens_total %llu\n"
                     "# HELP splash_generated_tokens_total Tokens generated.\n"
                     "# TYPE splash_generated_tokens_total counter\n"
                     "splash_generated_tokens_total %llu\n"
                     "# HELP splash_engine_restarts_total Engine restarts.\n"
                     "# TYPE splash_engine_restarts_total counter\n"
                     "splash_engine_restarts_total %d\n"
                     "# HELP splash_console_dropped_lines_total Console lines dropped.\n"
                     "# TYPE splash_console_dropped_lines_total counter\n"
                     "splash_console_dropped_lines_total %llu\n"
                     "# HELP splash_draft_proposed_tokens_total Proposed tokens decode cycles verified.\n"
                     "# TYPE splash_draft_proposed_tokens_total counter\n"
                     "splash_draft_proposed_tokens_total %llu\n"
                     "# HELP splash_draft_accepted_tokens_total Proposed tokens the target accepted.\n"
                     "# TYPE splash_draft_accepted_tokens_total counter\n"
                     "splash_draft_accepted_tokens_total %llu\n"
                     "# HELP splash_draft_cycles_total Decode cycles that verified proposals.\n"
                     "# TYPE splash_draft_cycles_total counter\n"
                     "splash_draft_cycles_total %llu\n",
                     (unsigned long long)total, (unsigned long long)rejected, admitted,
                     (unsigned long long)prompt, (unsigned long long)gen,
                     splash_engine_client_restarts(app->engine),
                     (unsigned long long)splash_console_dropped(), (unsigned long long)proposed,
                     (unsigned long long)accepted, (unsigned long long)cycles);
    if (n < 0) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        return;
    }
    reply->text = text;
    reply->text_len = (size_t)n;
    reply->content_type = "text/plain; version=0.0.4";
}

void splash_api_memory_release(void *appv, const struct splash_http_request *req,
                               struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    splash_engine_client_release(app->engine);
    reply->json = json_pack("{s:s}", "status", "released");
}
