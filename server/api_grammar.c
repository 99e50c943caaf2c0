/* Output constraints from requests to the engine (grammar-constrained decoding). */
#include <stdio.h>
#include <stdlib.h>
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

/* Bounds on an output constraint: building a grammar and its token masks costs
 * time in its size (a 300,000-value enum took a minute of CPU on a real
 * vocabulary), so larger ones are refused before anything is built. */
#define MAX_ENUM_VALUES 16384
#define MAX_SPEC_BYTES (1u << 20)

static size_t count_enum_values(const json_t *j, int depth)
{
    size_t n = 0;
    if (depth > 128)
        return 0; /* the compiler refuses such depth itself */
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            if (!strcmp(k, "enum") && json_is_array(v))
                n += json_array_size(v);
            n += count_enum_values(v, depth + 1);
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) n += count_enum_values(v, depth + 1);
    }
    return n;
}

static int spec_too_large(const json_t *spec, char *msg, size_t msg_size)
{
    size_t values = count_enum_values(spec, 0);
    if (values > MAX_ENUM_VALUES) {
        snprintf(msg, msg_size,
                 "the output constraint (response_format or the forced tools) lists %zu enum values; "
                 "at most %d (a larger grammar takes too long to build)",
                 values, MAX_ENUM_VALUES);
        return 1;
    }
    size_t bytes = json_dumpb(spec, NULL, 0, JSON_COMPACT);
    if (bytes > MAX_SPEC_BYTES) {
        snprintf(msg, msg_size,
                 "the output constraint (response_format or the forced tools) is %zu bytes of "
                 "schema; at most %u (a larger grammar takes too long to build)",
                 bytes, MAX_SPEC_BYTES);
        return 1;
    }
    return 0;
}

SPEC_READER(splash_api_spec_chat, splash_grammar_spec_from_chat)
SPEC_READER(splash_api_spec_messages, splash_grammar_spec_from_messages)
SPEC_READER(splash_api_spec_responses, splash_grammar_spec_from_responses)

int splash_api_grammar_submit(struct splash_app *app, const json_t *body,
                              int (*spec_of)(const json_t *body, json_t **spec, char *msg,
                                             size_t msg_size),
                              const struct splash_prompt *prompt,
                              struct splash_gen_params *params, char *msg, size_t msg_size)
{
    json_t *spec = NULL;
    if (spec_of(body, &spec, msg, msg_size))
        return -1;
    if (!spec)
        return 0; /* the output is free */
    /* the think block (harmony: the analysis message) comes first and unconstrained
     * (models.md "Chat formats") */
    const char *reasoning = app->format->model_opens_think ? "optional"
                            : prompt->thinks                ? "open"
                                                            : "none";
    json_object_set_new(spec, "reasoning", json_string(reasoning));
    if (spec_too_large(spec, msg, msg_size)) {
        json_decref(spec);
        return -1;
    }
    /* compile once here so an unsupported schema is a 400 before anything runs */
    struct splash_grammar *g;
    struct splash_err err;
    if (splash_grammar_compile_spec(spec, app->grammar_format, &g, &err) != SPLASH_OK) {
        snprintf(msg, msg_size, "%s", err.msg);
        json_decref(spec);
        return -1;
    }
    splash_grammar_destroy(g);
    char *text = json_dumps(spec, JSON_COMPACT);
    json_decref(spec);
    if (!text) {
        snprintf(msg, msg_size, "the output constraint: out of memory");
        return -1;
    }
    free(params->grammar);
    params->grammar = text;
    params->grammar_calls = ((const struct splash_grammar_format *)app->grammar_format)->calls;
    return 0;
}
