/* POST /apply-template: a request's prompt as the server would render it, with its token ids,
 * and no generation (server.md "Default reasoning effort": the same default applies). The body
 * is a Chat Completions request; with "api": "messages" or "responses", one of those APIs'. */
#include <stdio.h>
#include <string.h>

#include "server/api.h"
#include "server/api_prompt.h"
#include "server/chat/template_probe.h"

/* A Chat Completions request's prompt, as POST /v1/chat/completions renders it. */
static int chat_prompt(struct splash_app *app, const json_t *body, struct splash_api_prompt *p,
                       struct splash_http_reply *reply)
{
    char msg[SPLASH_API_MSG_MAX];
    if (!splash_api_check_model(app, body, reply))
        return -1;
    json_t *tools = json_object_get(body, "tools");
    if (splash_api_check_tools(tools, "tools", msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_tools", msg);
        return -1;
    }
    json_t *choice = json_object_get(body, "tool_choice");
    if (json_is_string(choice) && !strcmp(json_string_value(choice), "none"))
        tools = NULL;
    int effort = -1;
    json_t *kwargs = json_object_get(body, "chat_template_kwargs");
    if (splash_api_effort(json_object_get(body, "reasoning_effort"), "reasoning_effort", &effort,
                          msg, sizeof msg) ||
        splash_api_check_kwargs(kwargs, msg, sizeof msg)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter", msg);
        return -1;
    }
    json_t *messages;
    struct splash_err err;
    if (splash_chat_normalize(app, json_object_get(body, "messages"), &messages, &err)) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_messages", err.msg);
        return -1;
    }
    int status = splash_api_prompt_make(app, messages, tools, effort,
                                        json_is_object(kwargs) ? kwargs : NULL, p, msg, sizeof msg);
    json_decref(messages);
    if (status) {
        splash_reply_error(reply, status, "invalid_request_error", "template_error", msg);
        return -1;
    }
    return 0;
}

void splash_api_apply_template(void *appv, const struct splash_http_request *req,
                               struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    json_t *body = splash_api_parse_body(req, reply);
    if (!body)
        return;
    struct splash_api_prompt p = {0};
    json_t *api = json_object_get(body, "api");
    const char *which = api ? json_string_value(api) : "chat";
    int rc;
    if (!which) {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter",
                           "api must be chat, messages or responses");
        rc = -1;
    } else if (!strcmp(which, "chat")) {
        rc = chat_prompt(app, body, &p, reply);
    } else if (!strcmp(which, "messages")) {
        rc = splash_api_messages_prompt(app, body, &p, reply);
    } else if (!strcmp(which, "responses")) {
        rc = splash_api_responses_prompt(app, body, &p, reply);
    } else {
        splash_reply_error(reply, 400, "invalid_request_error", "invalid_parameter",
                           "api must be chat, messages or responses");
        rc = -1;
    }
    if (!rc) {
        json_t *ids = json_array();
        for (size_t i = 0; i < p.ids.n; i++)
            json_array_append_new(ids, json_integer(p.ids.ids[i]));
        reply->json =
            json_pack("{s:s%, s:o, s:I, s:b}", "prompt", p.prompt.text, p.prompt.len, "tokens", ids,
                      "count", (json_int_t)p.ids.n, "thinks", p.prompt.thinks);
        if (p.prompt.effort >= 0)
            json_object_set_new(
                reply->json, "reasoning_effort",
                json_string(splash_effort_name((enum splash_effort)p.prompt.effort)));
    }
    splash_api_prompt_free(&p);
    json_decref(body);
}
