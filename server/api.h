/* API handlers and the helpers they share. */
#ifndef SPLASH_SERVER_API_H
#define SPLASH_SERVER_API_H

/* An API handler's error message: room for a chat template's whole refusal (its
 * raise_exception reason is up to 4000 bytes) and the words around it. */
#define SPLASH_API_MSG_MAX 4400

#include <jansson.h>

#include "server/app.h"
#include "server/engine/gen_params.h"
#include "server/http.h"

/* Parses the body as a JSON object; NULL with a 400 naming the problem. */
json_t *splash_api_parse_body(const struct splash_http_request *req, struct splash_http_reply *reply);
/* The body's "model" names the served model (or is absent); else a 404 reply and 0. */
int splash_api_check_model(struct splash_app *app, const json_t *body,
                           struct splash_http_reply *reply);
/* Sets an OpenAI-shaped error's param to the request field its message opens with
 * ("temperature must be ..." -> "temperature"), when the body has that field. */
void splash_api_error_param(struct splash_http_reply *reply, const json_t *body);
/* A fresh response id: prefix + 24 hex digits. */
void splash_api_new_id(struct splash_app *app, const char *prefix, char *out, size_t size);

/* Sets the thinking budget (server.md "Thinking token budget") of a request whose
 * prompt opened a think block; budget < 0 sets no cap. */
void splash_api_think_params(struct splash_app *app, struct splash_gen_params *params,
                             int64_t budget, int64_t prompt_tokens);

struct splash_prompt;

/* Sets a request's output constraint (response_format, tool_choice required or named)
 * in its parameters, wrapped for how the prompt reasons. spec_of is one of the
 * splash_grammar_spec_from_* readers. Returns 0, or -1 with msg (a 400). */
int splash_api_grammar_submit(struct splash_app *app, const json_t *body,
                              int (*spec_of)(const json_t *body, json_t **spec, char *msg,
                                             size_t msg_size),
                              const struct splash_prompt *prompt,
                              struct splash_gen_params *params, char *msg, size_t msg_size);
int splash_api_spec_chat(const json_t *body, json_t **spec, char *msg, size_t msg_size);
int splash_api_spec_messages(const json_t *body, json_t **spec, char *msg, size_t msg_size);
int splash_api_spec_responses(const json_t *body, json_t **spec, char *msg, size_t msg_size);

void splash_api_chat(void *app, const struct splash_http_request *req,
                     struct splash_http_reply *reply);
void splash_api_completions(void *app, const struct splash_http_request *req,
                            struct splash_http_reply *reply);
void splash_api_info_health(void *app, const struct splash_http_request *req,
                            struct splash_http_reply *reply);
void splash_api_info_ready(void *app, const struct splash_http_request *req,
                           struct splash_http_reply *reply);
void splash_api_info_status(void *app, const struct splash_http_request *req,
                            struct splash_http_reply *reply);
void splash_api_info_metrics(void *app, const struct splash_http_request *req,
                             struct splash_http_reply *reply);
void splash_api_models(void *app, const struct splash_http_request *req,
                       struct splash_http_reply *reply);
void splash_api_model(void *app, const struct splash_http_request *req,
                      struct splash_http_reply *reply);
void splash_api_tokenize(void *app, const struct splash_http_request *req,
                         struct splash_http_reply *reply);
void splash_api_detokenize(void *app, const struct splash_http_request *req,
                           struct splash_http_reply *reply);
void splash_api_memory_release(void *app, const struct splash_http_request *req,
                               struct splash_http_reply *reply);
void splash_api_messages(void *app, const struct splash_http_request *req,
                         struct splash_http_reply *reply);
void splash_api_messages_count_tokens(void *app, const struct splash_http_request *req,
                                      struct splash_http_reply *reply);
void splash_api_responses(void *app, const struct splash_http_request *req,
                          struct splash_http_reply *reply);
void splash_api_apply_template(void *app, const struct splash_http_request *req,
                               struct splash_http_reply *reply);
void splash_api_webui(void *app, const struct splash_http_request *req,
                      struct splash_http_reply *reply);

#endif
