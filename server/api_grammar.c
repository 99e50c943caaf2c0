/* Output constraints from requests to the engine (grammar-constrained decoding). */
#include <stdio.h>
#include <string.h>

#include "server/text/grammar/grammar.h"
#include "server/api.h"
#include "server/chat/chat_format.h"
#include "server/chat_prompt.h"

#define SPEC_READER(name, reader)                                                                  \
    int name(const json_t *body, json_t **spec, char *msg, size_t msg_size)                       \
    {                                                                                              \
        struct splash_err err;                                                                     \
        if (reader(body, spec, &err) != SPLASH_OK) {                                               \
            snprintf(msg, msg_size, "%s", err.msg);                                                \
            return -1;                                                                             \
        }                                                                                          \
        return 0;                                                                                  \
    }

SPEC_READER(splash_api_spec_chat, splash_grammar_spec_from_chat)
SPEC_READER(splash_api_spec_messages, splash_grammar_spec_from_messages)
SPEC_READER(splash_api_spec_responses, splash_grammar_spec_from_responses)

int splash_api_grammar_submit(struct splash_app *app, const json_t *body,
                              int (*spec_of)(const json_t *body, json_t **spec, char *msg,
                                             size_t msg_size),
                              const struct splash_prompt *prompt, json_t *submit, char *msg,
                              size_t msg_size)
{
    json_t *spec = NULL;
    if (spec_of(body, &spec, msg, msg_size))
        return -1;
    if (!spec)
        return 0; /* the output is free */
    /* the think block comes first and unconstrained (models.md "Chat formats") */
    const char *reasoning = app->format->model_opens_think ? "optional"
                            : prompt->thinks                ? "open"
                                                            : "none";
    json_object_set_new(spec, "reasoning", json_string(reasoning));
    /* compile once here so an unsupported schema is a 400 before anything runs */
    struct splash_grammar *g;
    struct splash_err err;
    if (splash_grammar_compile_spec(spec, app->grammar_format, &g, &err) != SPLASH_OK) {
        snprintf(msg, msg_size, "%s", err.msg);
        json_decref(spec);
        return -1;
    }
    splash_grammar_destroy(g);
    json_object_set_new(submit, "grammar", spec);
    json_object_set_new(submit, "grammar_calls",
                        json_string(app->format->calls == SPLASH_CALLS_GLM_ARGS ? "glm_args"
                                                                                 : "qwen_xml"));
    return 0;
}
