/* The SUBMIT frame's body: struct splash_submit written whole and read back whole.
 * The reader takes no default: a field left out or of the wrong type refuses the frame
 * naming it, so the engine generates with exactly what the front read. */
#include "server/engine/protocol.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static json_t *id_array(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static const char *calls_name(enum splash_grammar_call_syntax c)
{
    return c == SPLASH_GRAMMAR_CALLS_GLM_ARGS  ? "glm_args"
           : c == SPLASH_GRAMMAR_CALLS_HARMONY ? "harmony"
                                               : "qwen_xml";
}

json_t *splash_submit_to_json(const struct splash_submit *s)
{
    const struct splash_gen_params *p = &s->params;
    const struct splash_sampling_params *sp = &p->sampling;
    json_t *sampling = json_pack(
        "{s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:o}", "temperature", (double)sp->temperature,
        "top_k", (int)sp->top_k, "top_p", (double)sp->top_p, "min_p", (double)sp->min_p,
        "presence_penalty", (double)sp->presence_penalty, "frequency_penalty",
        (double)sp->frequency_penalty, "repetition_penalty", (double)sp->repetition_penalty, "seed",
        p->has_seed ? json_integer((json_int_t)sp->seed) : json_null());
    json_t *bias = json_array();
    for (size_t i = 0; bias && i < p->n_logit_bias; i++)
        json_array_append_new(bias, json_pack("[i, f]", (int)p->logit_bias[i].token,
                                              (double)p->logit_bias[i].bias));
    json_t *think = json_null();
    if (p->think.on)
        think = json_pack("{s:I, s:i, s:i, s:o}", "budget", (json_int_t)p->think.budget, "close",
                          (int)p->think.close, "call_open", (int)p->think.call_open, "end",
                          id_array(p->think.end, (size_t)p->think.n_end));
    return json_pack("{s:o, s:o, s:i, s:i, s:o, s:o, s:b, s:i, s:o, s:o, s:s}", "prompt",
                     id_array(s->prompt, s->n_prompt), "stop_ids",
                     id_array(s->stop_ids, (size_t)s->n_stop), "reuse_token", (int)s->reuse_token,
                     "max_tokens", (int)p->max_tokens, "sampling", sampling, "logit_bias", bias,
                     "logprobs", p->logprobs, "top_logprobs", p->top_logprobs, "think", think,
                     "grammar", p->grammar ? json_string(p->grammar) : json_null(),
                     "grammar_calls", calls_name(p->grammar_calls));
}

/* ---- reading ------------------------------------------------------------------- */

static enum splash_status field(const json_t *o, const char *scope, const char *key, json_t **v,
                                struct splash_err *err)
{
    *v = json_object_get(o, key);
    if (!*v)
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: %s%s is missing", scope, key);
    return SPLASH_OK;
}

static enum splash_status int_in(const json_t *o, const char *scope, const char *key, int64_t lo,
                                 int64_t hi, int64_t *out, struct splash_err *err)
{
    json_t *v;
    enum splash_status st = field(o, scope, key, &v, err);
    if (st)
        return st;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "SUBMIT: %s%s must be an integer from %lld to %lld", scope, key,
                              (long long)lo, (long long)hi);
    *out = (int64_t)json_integer_value(v);
    return SPLASH_OK;
}

static enum splash_status num_in(const json_t *o, const char *scope, const char *key, double lo,
                                 double hi, float *out, struct splash_err *err)
{
    json_t *v;
    enum splash_status st = field(o, scope, key, &v, err);
    if (st)
        return st;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo ||
        json_number_value(v) > hi)
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: %s%s must be a number from %g to %g",
                              scope, key, lo, hi);
    *out = (float)json_number_value(v);
    return SPLASH_OK;
}

/* An array of at most `most` token ids (>= 0) into ids; *n gets the count. */
static enum splash_status ids_in(const json_t *o, const char *scope, const char *key, int32_t *ids,
                                 size_t most, size_t *n, struct splash_err *err)
{
    json_t *v;
    enum splash_status st = field(o, scope, key, &v, err);
    if (st)
        return st;
    if (!json_is_array(v) || json_array_size(v) > most)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "SUBMIT: %s%s must be an array of at most %zu token ids", scope, key,
                              most);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: %s%s[%zu] is not a token id",
                                  scope, key, i);
        ids[i] = (int32_t)json_integer_value(t);
    }
    *n = json_array_size(v);
    return SPLASH_OK;
}

static enum splash_status read_sampling(const json_t *body, struct splash_gen_params *p,
                                        struct splash_err *err)
{
    json_t *s, *seed;
    enum splash_status st;
    struct splash_sampling_params *sp = &p->sampling;
    int64_t top_k;
    if ((st = field(body, "", "sampling", &s, err)))
        return st;
    if (!json_is_object(s))
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: sampling must be an object");
    if ((st = num_in(s, "sampling.", "temperature", 0, 2, &sp->temperature, err)) ||
        (st = int_in(s, "sampling.", "top_k", 0, INT32_MAX, &top_k, err)) ||
        (st = num_in(s, "sampling.", "top_p", 0, 1, &sp->top_p, err)) ||
        (st = num_in(s, "sampling.", "min_p", 0, 1, &sp->min_p, err)) ||
        (st = num_in(s, "sampling.", "presence_penalty", -2, 2, &sp->presence_penalty, err)) ||
        (st = num_in(s, "sampling.", "frequency_penalty", -2, 2, &sp->frequency_penalty, err)) ||
        (st = num_in(s, "sampling.", "repetition_penalty", 0.01, 10, &sp->repetition_penalty,
                     err)) ||
        (st = field(s, "sampling.", "seed", &seed, err)))
        return st;
    sp->top_k = (int32_t)top_k;
    if (json_is_integer(seed)) {
        p->has_seed = 1;
        sp->seed = (uint64_t)json_integer_value(seed);
    } else if (!json_is_null(seed)) {
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: sampling.seed must be an integer or null");
    }
    return SPLASH_OK;
}

static enum splash_status read_bias(const json_t *body, struct splash_gen_params *p,
                                    struct splash_err *err)
{
    json_t *v;
    enum splash_status st = field(body, "", "logit_bias", &v, err);
    if (st)
        return st;
    if (!json_is_array(v) || json_array_size(v) > SPLASH_GEN_MAX_LOGIT_BIAS)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "SUBMIT: logit_bias must be an array of at most %d [token, bias] pairs",
                              SPLASH_GEN_MAX_LOGIT_BIAS);
    size_t n = json_array_size(v);
    if (!n)
        return SPLASH_OK;
    if (!(p->logit_bias = malloc(n * sizeof *p->logit_bias)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "SUBMIT: out of memory for logit_bias");
    for (size_t i = 0; i < n; i++) {
        json_t *pair = json_array_get(v, i), *t = json_array_get(pair, 0), *b = json_array_get(pair, 1);
        if (json_array_size(pair) != 2 || !json_is_integer(t) || json_integer_value(t) < 0 ||
            json_integer_value(t) > INT32_MAX || !json_is_number(b) ||
            !(fabs(json_number_value(b)) <= 100))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "SUBMIT: logit_bias[%zu] must be [token id, bias from -100 to 100]", i);
        p->logit_bias[i] = (struct splash_logit_bias){(int32_t)json_integer_value(t),
                                                      (float)json_number_value(b)};
    }
    p->n_logit_bias = n;
    return SPLASH_OK;
}

static enum splash_status read_think(const json_t *body, struct splash_think_params *t,
                                     struct splash_err *err)
{
    json_t *v;
    enum splash_status st = field(body, "", "think", &v, err);
    if (st || json_is_null(v))
        return st;
    if (!json_is_object(v))
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: think must be an object or null");
    int64_t close, call_open;
    size_t n_end;
    if ((st = int_in(v, "think.", "budget", -1, INT64_MAX, &t->budget, err)) ||
        (st = int_in(v, "think.", "close", 0, INT32_MAX, &close, err)) ||
        (st = int_in(v, "think.", "call_open", -1, INT32_MAX, &call_open, err)) ||
        (st = ids_in(v, "think.", "end", t->end, SPLASH_GEN_MAX_THINK_END, &n_end, err)))
        return st;
    t->on = 1;
    t->close = (int32_t)close;
    t->call_open = (int32_t)call_open;
    t->n_end = (int)n_end;
    return SPLASH_OK;
}

static enum splash_status read_grammar(const json_t *body, struct splash_gen_params *p,
                                       struct splash_err *err)
{
    json_t *g, *calls;
    enum splash_status st;
    if ((st = field(body, "", "grammar", &g, err)) ||
        (st = field(body, "", "grammar_calls", &calls, err)))
        return st;
    const char *c = json_string_value(calls);
    if (!c || (strcmp(c, "qwen_xml") && strcmp(c, "glm_args") && strcmp(c, "harmony")))
        return splash_err_set(
            err, SPLASH_ERR_INVALID,
            "SUBMIT: grammar_calls must be \"qwen_xml\", \"glm_args\" or \"harmony\"");
    p->grammar_calls = !strcmp(c, "glm_args")  ? SPLASH_GRAMMAR_CALLS_GLM_ARGS
                       : !strcmp(c, "harmony") ? SPLASH_GRAMMAR_CALLS_HARMONY
                                               : SPLASH_GRAMMAR_CALLS_QWEN_XML;
    if (json_is_null(g))
        return SPLASH_OK;
    if (!json_is_string(g))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "SUBMIT: grammar must be the spec's JSON text or null");
    if (!(p->grammar = strdup(json_string_value(g))))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "SUBMIT: out of memory for the grammar");
    return SPLASH_OK;
}

static enum splash_status read_body(const json_t *body, struct splash_submit *s,
                                    struct splash_err *err)
{
    struct splash_gen_params *p = &s->params;
    json_t *prompt, *lp;
    int64_t reuse, max_tokens, top;
    size_t n_stop;
    enum splash_status st;
    if (!json_is_object(body))
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: the body must be an object");
    if ((st = field(body, "", "prompt", &prompt, err)))
        return st;
    if (!json_is_array(prompt) || !json_array_size(prompt))
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: the prompt is empty");
    s->n_prompt = json_array_size(prompt);
    if (!(s->prompt = malloc(s->n_prompt * sizeof *s->prompt)))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "SUBMIT: out of memory for the prompt");
    if ((st = ids_in(body, "", "prompt", s->prompt, s->n_prompt, &s->n_prompt, err)) ||
        (st = ids_in(body, "", "stop_ids", s->stop_ids, SPLASH_GEN_MAX_STOP_IDS, &n_stop, err)) ||
        (st = int_in(body, "", "reuse_token", -1, INT32_MAX, &reuse, err)) ||
        (st = int_in(body, "", "max_tokens", 0, INT32_MAX, &max_tokens, err)) ||
        (st = read_sampling(body, p, err)) || (st = read_bias(body, p, err)) ||
        (st = field(body, "", "logprobs", &lp, err)))
        return st;
    if (!json_is_boolean(lp))
        return splash_err_set(err, SPLASH_ERR_INVALID, "SUBMIT: logprobs must be a boolean");
    if ((st = int_in(body, "", "top_logprobs", 0, SPLASH_GEN_MAX_TOP_LOGPROBS, &top, err)) ||
        (st = read_think(body, &p->think, err)) || (st = read_grammar(body, p, err)))
        return st;
    s->n_stop = (int)n_stop;
    s->reuse_token = (int32_t)reuse;
    p->max_tokens = (int32_t)max_tokens;
    p->logprobs = json_is_true(lp);
    p->top_logprobs = (int)top;
    return SPLASH_OK;
}

enum splash_status splash_submit_from_json(const json_t *body, struct splash_submit *s,
                                           struct splash_err *err)
{
    memset(s, 0, sizeof *s);
    splash_gen_params_init(&s->params);
    enum splash_status st = read_body(body, s, err);
    if (st)
        splash_submit_free(s);
    return st;
}

void splash_submit_free(struct splash_submit *s)
{
    free(s->prompt);
    s->prompt = NULL;
    s->n_prompt = 0;
    splash_gen_params_free(&s->params);
}

enum splash_status splash_frame_write_submit(int fd, uint64_t id, const struct splash_submit *s,
                                             struct splash_err *err)
{
    json_t *body = splash_submit_to_json(s);
    if (!body)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "engine protocol: out of memory");
    enum splash_status st = splash_frame_write(fd, SPLASH_FRAME_SUBMIT, id, body, err);
    json_decref(body);
    return st;
}
