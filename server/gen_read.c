/* Reading the typed request from each API's body (gen_read.h). */
#include "server/gen_read.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A number from lo to hi into *out; absent or null leaves *out. */
static enum splash_status number_in(const json_t *body, const char *key, double lo, double hi,
                                    float *out, struct splash_err *err)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return SPLASH_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo ||
        json_number_value(v) > hi)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s must be a number from %g to %g", key, lo,
                              hi);
    *out = (float)json_number_value(v);
    return SPLASH_OK;
}

/* A positive integer into *out (capped at INT32_MAX: the context bounds it anyway). */
static enum splash_status positive_in(const json_t *body, const char *key, int32_t *out,
                                      struct splash_err *err)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return SPLASH_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s must be a positive integer", key);
    *out = json_integer_value(v) > INT32_MAX ? INT32_MAX : (int32_t)json_integer_value(v);
    return SPLASH_OK;
}

static enum splash_status top_k_in(const json_t *body, struct splash_gen_params *p,
                                   struct splash_err *err)
{
    json_t *v = json_object_get(body, "top_k");
    if (!v || json_is_null(v))
        return SPLASH_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return splash_err_set(err, SPLASH_ERR_INVALID, "top_k must be a non-negative integer");
    p->sampling.top_k = json_integer_value(v) > INT32_MAX ? INT32_MAX : (int32_t)json_integer_value(v);
    return SPLASH_OK;
}

/* OpenAI's logit_bias: token ids (decimal keys) to a bias from -100 to 100 added to their
 * logits; the engine refuses ids past its vocabulary. */
static enum splash_status logit_bias_in(const json_t *body, struct splash_gen_params *p,
                                        struct splash_err *err)
{
    json_t *v = json_object_get(body, "logit_bias");
    if (!v || json_is_null(v))
        return SPLASH_OK;
    if (!json_is_object(v))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "logit_bias must be an object of token ids to numbers from -100 to 100");
    size_t n = json_object_size(v);
    if (n > SPLASH_GEN_MAX_LOGIT_BIAS)
        return splash_err_set(err, SPLASH_ERR_INVALID, "logit_bias: %zu tokens; at most %d", n,
                              SPLASH_GEN_MAX_LOGIT_BIAS);
    if (!n)
        return SPLASH_OK;
    struct splash_logit_bias *list = malloc(n * sizeof *list);
    if (!list)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "logit_bias: out of memory");
    size_t i = 0;
    const char *key;
    json_t *b;
    json_object_foreach(v, key, b) {
        char *end;
        long long id = strtoll(key, &end, 10);
        enum splash_status st = SPLASH_OK;
        if (!*key || *end || id < 0 || id > INT32_MAX)
            st = splash_err_set(err, SPLASH_ERR_INVALID, "logit_bias: key \"%.40s\" is not a token id",
                                key);
        else if (!json_is_number(b) || json_number_value(b) < -100 || json_number_value(b) > 100)
            st = splash_err_set(err, SPLASH_ERR_INVALID,
                                "logit_bias[\"%.40s\"] must be a number from -100 to 100", key);
        if (st) {
            free(list);
            return st;
        }
        list[i++] = (struct splash_logit_bias){(int32_t)id, (float)json_number_value(b)};
    }
    free(p->logit_bias);
    p->logit_bias = list;
    p->n_logit_bias = i;
    return SPLASH_OK;
}

static enum splash_status logprobs_in(const json_t *body, struct splash_gen_params *p,
                                      struct splash_err *err)
{
    json_t *v;
    if ((v = json_object_get(body, "logprobs")) && !json_is_null(v)) {
        if (json_is_boolean(v)) {
            p->logprobs = json_is_true(v);
        } else if (json_is_integer(v) && json_integer_value(v) >= 0 &&
                   json_integer_value(v) <= SPLASH_GEN_MAX_TOP_LOGPROBS) {
            /* legacy completions: logprobs is the number of alternatives */
            p->logprobs = 1;
            p->top_logprobs = (int)json_integer_value(v);
        } else {
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "logprobs must be a boolean (or 0-20 for completions)");
        }
    }
    if ((v = json_object_get(body, "top_logprobs")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > SPLASH_GEN_MAX_TOP_LOGPROBS)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "top_logprobs must be an integer from 0 to 20");
        p->top_logprobs = (int)json_integer_value(v);
    }
    return SPLASH_OK;
}

static enum splash_status read_openai(const json_t *body, struct splash_gen_params *p,
                                      struct splash_err *err)
{
    struct splash_sampling_params *s = &p->sampling;
    enum splash_status st;
    json_t *v;
    if ((st = number_in(body, "temperature", 0, 2, &s->temperature, err)) ||
        (st = number_in(body, "top_p", 0, 1, &s->top_p, err)) ||
        (st = number_in(body, "min_p", 0, 1, &s->min_p, err)) ||
        (st = number_in(body, "presence_penalty", -2, 2, &s->presence_penalty, err)) ||
        (st = number_in(body, "frequency_penalty", -2, 2, &s->frequency_penalty, err)) ||
        (st = number_in(body, "repetition_penalty", 0.01, 10, &s->repetition_penalty, err)) ||
        (st = logit_bias_in(body, p, err)) || (st = top_k_in(body, p, err)))
        return st;
    if ((v = json_object_get(body, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v))
            return splash_err_set(err, SPLASH_ERR_INVALID, "seed must be an integer");
        p->has_seed = 1;
        s->seed = (uint64_t)json_integer_value(v);
    }
    /* one choice per request: n > 1 is refused rather than silently answered once */
    if ((v = json_object_get(body, "n")) && !json_is_null(v) &&
        (!json_is_integer(v) || json_integer_value(v) != 1))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "n must be 1: this server generates one choice per request");
    if ((v = json_object_get(body, "stream")) && !json_is_null(v) && !json_is_boolean(v))
        return splash_err_set(err, SPLASH_ERR_INVALID, "stream must be a boolean");
    if ((v = json_object_get(body, "stream_options")) && !json_is_null(v) && !json_is_object(v))
        return splash_err_set(err, SPLASH_ERR_INVALID, "stream_options must be an object");
    v = json_object_get(body, "max_completion_tokens");
    if ((st = positive_in(body, v && !json_is_null(v) ? "max_completion_tokens" : "max_tokens",
                          &p->max_tokens, err)))
        return st;
    return logprobs_in(body, p, err);
}

/* Each reader starts from the defaults and leaves them on failure. */
#define READER(name, body_fn)                                                                     \
    enum splash_status name(const json_t *body, struct splash_gen_params *p,                      \
                            struct splash_err *err)                                               \
    {                                                                                             \
        splash_gen_params_init(p);                                                                \
        enum splash_status st = body_fn(body, p, err);                                            \
        if (st)                                                                                   \
            splash_gen_params_free(p);                                                            \
        return st;                                                                                \
    }

/* Responses: temperature, top_p and max_output_tokens. */
static enum splash_status read_responses(const json_t *body, struct splash_gen_params *p,
                                         struct splash_err *err)
{
    enum splash_status st;
    if ((st = number_in(body, "temperature", 0, 2, &p->sampling.temperature, err)) ||
        (st = number_in(body, "top_p", 0, 1, &p->sampling.top_p, err)))
        return st;
    return positive_in(body, "max_output_tokens", &p->max_tokens, err);
}

/* Messages: Anthropic's temperature is 0 to 1; top_p, top_k and max_tokens. */
static enum splash_status read_messages(const json_t *body, struct splash_gen_params *p,
                                        struct splash_err *err)
{
    enum splash_status st;
    if ((st = number_in(body, "temperature", 0, 1, &p->sampling.temperature, err)) ||
        (st = number_in(body, "top_p", 0, 1, &p->sampling.top_p, err)) ||
        (st = top_k_in(body, p, err)))
        return st;
    return positive_in(body, "max_tokens", &p->max_tokens, err);
}

READER(splash_gen_read_openai, read_openai)
READER(splash_gen_read_responses, read_responses)
READER(splash_gen_read_messages, read_messages)
