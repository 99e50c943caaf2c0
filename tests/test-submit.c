/* The typed request: what each API's body gives, the SUBMIT frame carrying it whole, and
 * the engine refusing a frame that leaves a field out instead of choosing its own value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/engine/protocol.h"
#include "server/gen_read.h"
#include "tests/support/engine_thread.h"

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    if (!v)
        fail_msg("bad test JSON: %s", jerr.text);
    return v;
}

typedef enum splash_status (*reader_fn)(const json_t *, struct splash_gen_params *,
                                        struct splash_err *);

/* Reads text with fn; fails the test on a refusal. */
static void read_ok(reader_fn fn, const char *text, struct splash_gen_params *p)
{
    json_t *body = parse(text);
    struct splash_err err;
    if (fn(body, p, &err))
        fail_msg("%s refused: %s", text, err.msg);
    json_decref(body);
}

static void refused(reader_fn fn, const char *text, const char *names)
{
    json_t *body = parse(text);
    struct splash_gen_params p;
    struct splash_err err;
    assert_int_equal(fn(body, &p, &err), SPLASH_ERR_INVALID);
    if (!strstr(err.msg, names))
        fail_msg("%s: \"%s\" does not name %s", text, err.msg, names);
    json_decref(body);
}

/* Every API left to its defaults samples at temperature 1 with no filter (the engine
 * once took 0 for a temperature the frame left out). */
static void test_api_defaults(void **state)
{
    (void)state;
    reader_fn readers[] = {splash_gen_read_openai, splash_gen_read_responses,
                           splash_gen_read_messages};
    for (size_t i = 0; i < 3; i++) {
        struct splash_gen_params p;
        read_ok(readers[i], "{}", &p);
        assert_true(p.sampling.temperature == 1.0f);
        assert_true(p.sampling.top_p == 1.0f);
        assert_true(p.sampling.repetition_penalty == 1.0f);
        assert_int_equal(p.sampling.top_k, 0);
        assert_true(p.sampling.min_p == 0);
        assert_int_equal(p.has_seed, 0);
        assert_int_equal(p.max_tokens, 0);
        assert_int_equal(p.logprobs, 0);
        assert_int_equal(p.think.on, 0);
        assert_null(p.grammar);
        splash_gen_params_free(&p);
    }
}

static void test_api_fields(void **state)
{
    (void)state;
    struct splash_gen_params p;
    read_ok(splash_gen_read_openai,
            "{\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 40, \"min_p\": 0.05, "
            "\"presence_penalty\": 0.5, \"frequency_penalty\": -0.5, \"repetition_penalty\": 1.1, "
            "\"seed\": 12345, \"max_completion_tokens\": 77, \"max_tokens\": 5, "
            "\"logprobs\": true, \"top_logprobs\": 3, \"logit_bias\": {\"17\": -100, \"4\": 2.5}, "
            "\"n\": 1, \"stream\": false}",
            &p);
    assert_true(p.sampling.temperature == 0.5f && p.sampling.top_p == 0.9f);
    assert_int_equal(p.sampling.top_k, 40);
    assert_true(p.sampling.min_p == 0.05f && p.sampling.presence_penalty == 0.5f);
    assert_true(p.sampling.frequency_penalty == -0.5f && p.sampling.repetition_penalty == 1.1f);
    assert_true(p.has_seed && p.sampling.seed == 12345);
    assert_int_equal(p.max_tokens, 77); /* max_completion_tokens wins */
    assert_true(p.logprobs && p.top_logprobs == 3);
    assert_int_equal(p.n_logit_bias, 2);
    splash_gen_params_free(&p);

    /* legacy completions: logprobs counts the alternatives */
    read_ok(splash_gen_read_openai, "{\"logprobs\": 4}", &p);
    assert_true(p.logprobs && p.top_logprobs == 4);
    splash_gen_params_free(&p);

    read_ok(splash_gen_read_responses, "{\"temperature\": 0.2, \"max_output_tokens\": 9}", &p);
    assert_true(p.sampling.temperature == 0.2f);
    assert_int_equal(p.max_tokens, 9);
    splash_gen_params_free(&p);

    read_ok(splash_gen_read_messages, "{\"temperature\": 0, \"top_k\": 5, \"max_tokens\": 12}", &p);
    assert_true(p.sampling.temperature == 0);
    assert_int_equal(p.sampling.top_k, 5);
    assert_int_equal(p.max_tokens, 12);
    splash_gen_params_free(&p);

    refused(splash_gen_read_openai, "{\"temperature\": 2.5}", "temperature");
    refused(splash_gen_read_openai, "{\"n\": 2}", "n must be 1");
    refused(splash_gen_read_openai, "{\"logit_bias\": {\"x\": 1}}", "logit_bias");
    refused(splash_gen_read_openai, "{\"logit_bias\": {\"1\": 101}}", "logit_bias[\"1\"]");
    refused(splash_gen_read_openai, "{\"max_tokens\": 0}", "max_tokens");
    refused(splash_gen_read_openai, "{\"max_completion_tokens\": \"9\"}", "max_completion_tokens");
    refused(splash_gen_read_openai, "{\"top_logprobs\": 21}", "top_logprobs");
    refused(splash_gen_read_openai, "{\"seed\": 1.5}", "seed");
    refused(splash_gen_read_responses, "{\"max_output_tokens\": -1}", "max_output_tokens");
    /* Anthropic's temperature stops at 1 */
    refused(splash_gen_read_messages, "{\"temperature\": 1.5}", "temperature");
}

/* A submit with every field away from its default. */
static void full_submit(struct splash_submit *s, int32_t *prompt)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 5; i++)
        prompt[i] = 20 + i;
    s->prompt = prompt;
    s->n_prompt = 5;
    s->stop_ids[0] = 3;
    s->stop_ids[1] = 4;
    s->n_stop = 2;
    s->reuse_token = 9;
    struct splash_gen_params *p = &s->params;
    splash_gen_params_init(p);
    p->max_tokens = 33;
    p->sampling = (struct splash_sampling_params){.temperature = 0.75f, .top_k = 7, .top_p = 0.5f,
                                                  .min_p = 0.25f, .presence_penalty = 0.5f,
                                                  .frequency_penalty = -1.0f,
                                                  .repetition_penalty = 1.5f, .seed = 99};
    p->has_seed = 1;
    p->logit_bias = malloc(2 * sizeof *p->logit_bias);
    p->logit_bias[0] = (struct splash_logit_bias){11, -100.0f};
    p->logit_bias[1] = (struct splash_logit_bias){12, 0.5f};
    p->n_logit_bias = 2;
    p->logprobs = 1;
    p->top_logprobs = 5;
    p->think = (struct splash_think_params){.on = 1, .budget = 128, .close = 6, .call_open = 8,
                                            .end = {6, 7}, .n_end = 2};
    p->grammar = strdup("{\"type\":\"json\"}");
    p->grammar_calls = SPLASH_GRAMMAR_CALLS_GLM_ARGS;
}

static void test_frame_round_trip(void **state)
{
    (void)state;
    int32_t prompt[5];
    struct splash_submit in, out;
    full_submit(&in, prompt);
    json_t *body = splash_submit_to_json(&in);
    struct splash_err err;
    if (splash_submit_from_json(body, &out, &err))
        fail_msg("read back: %s", err.msg);
    json_decref(body);
    assert_int_equal(out.n_prompt, 5);
    assert_memory_equal(out.prompt, prompt, sizeof prompt);
    assert_int_equal(out.n_stop, 2);
    assert_memory_equal(out.stop_ids, in.stop_ids, 2 * sizeof *in.stop_ids);
    assert_int_equal(out.reuse_token, 9);
    const struct splash_gen_params *a = &in.params, *b = &out.params;
    assert_int_equal(b->max_tokens, 33);
    assert_memory_equal(&b->sampling, &a->sampling, sizeof a->sampling);
    assert_int_equal(b->has_seed, 1);
    assert_int_equal(b->n_logit_bias, 2);
    assert_memory_equal(b->logit_bias, a->logit_bias, 2 * sizeof *a->logit_bias);
    assert_true(b->logprobs && b->top_logprobs == 5);
    assert_memory_equal(&b->think, &a->think, sizeof a->think);
    assert_string_equal(b->grammar, a->grammar);
    assert_int_equal(b->grammar_calls, SPLASH_GRAMMAR_CALLS_GLM_ARGS);
    splash_submit_free(&out);

    /* no seed, no thinking, no grammar travel as such */
    splash_gen_params_free(&in.params);
    body = splash_submit_to_json(&in);
    assert_int_equal(splash_submit_from_json(body, &out, &err), SPLASH_OK);
    json_decref(body);
    assert_int_equal(out.params.has_seed, 0);
    assert_int_equal(out.params.think.on, 0);
    assert_null(out.params.grammar);
    assert_true(out.params.sampling.temperature == 1.0f);
    splash_submit_free(&out);
}

/* The reader takes no default: each field left out is refused by name. */
static void test_frame_fields_required(void **state)
{
    (void)state;
    static const char *const keys[] = {"prompt", "stop_ids", "reuse_token", "max_tokens",
                                       "sampling", "logit_bias", "logprobs", "top_logprobs",
                                       "think", "grammar", "grammar_calls"};
    static const char *const sampling[] = {"temperature", "top_k", "top_p", "min_p",
                                           "presence_penalty", "frequency_penalty",
                                           "repetition_penalty", "seed"};
    int32_t prompt[5];
    struct splash_submit in, out;
    full_submit(&in, prompt);
    struct splash_err err;
    char name[64];
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *body = splash_submit_to_json(&in);
        json_object_del(body, keys[i]);
        assert_int_equal(splash_submit_from_json(body, &out, &err), SPLASH_ERR_INVALID);
        snprintf(name, sizeof name, "SUBMIT: %s ", keys[i]);
        if (!strstr(err.msg, name) && strcmp(keys[i], "prompt"))
            fail_msg("without %s: %s", keys[i], err.msg);
        json_decref(body);
    }
    for (size_t i = 0; i < sizeof sampling / sizeof *sampling; i++) {
        json_t *body = splash_submit_to_json(&in);
        json_object_del(json_object_get(body, "sampling"), sampling[i]);
        assert_int_equal(splash_submit_from_json(body, &out, &err), SPLASH_ERR_INVALID);
        snprintf(name, sizeof name, "sampling.%s is missing", sampling[i]);
        if (!strstr(err.msg, name))
            fail_msg("without sampling.%s: %s", sampling[i], err.msg);
        json_decref(body);
    }
    /* values out of range or of the wrong type */
    json_t *body = splash_submit_to_json(&in);
    json_object_set_new(json_object_get(body, "sampling"), "temperature", json_string("hot"));
    assert_int_equal(splash_submit_from_json(body, &out, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "sampling.temperature"));
    json_object_set_new(body, "top_logprobs", json_integer(21));
    json_object_set_new(json_object_get(body, "sampling"), "temperature", json_real(1));
    assert_int_equal(splash_submit_from_json(body, &out, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "top_logprobs"));
    json_decref(body);
    splash_gen_params_free(&in.params);
}

/* A frame without sampling.temperature once sampled greedily (the engine's own default
 * of 0, where the front's is 1): the engine now refuses it, naming the field. */
static void test_engine_refuses_missing_temperature(void **state)
{
    (void)state;
    struct test_engine t;
    test_engine_start(&t, "models/qwen35-tiny-Q8_0.gguf", 512);
    int32_t prompt[4] = {20, 21, 22, 23};
    struct splash_submit s = {.prompt = prompt, .n_prompt = 4, .reuse_token = -1};
    splash_gen_params_init(&s.params);
    s.params.max_tokens = 4;
    json_t *b = splash_submit_to_json(&s);
    json_object_del(json_object_get(b, "sampling"), "temperature");
    struct splash_err err;
    assert_int_equal(splash_frame_write(t.fd, SPLASH_FRAME_SUBMIT, 1, b, &err), SPLASH_OK);
    json_decref(b);
    struct test_result o;
    test_engine_collect(&t, 1, &o);
    if (o.done)
        fail_msg("the engine served a request that gave no temperature (%d tokens)", o.n);
    assert_string_equal(o.code, "invalid_request");
    assert_non_null(strstr(o.message, "sampling.temperature"));

    /* the whole frame is served, and a seed gives the same tokens again */
    s.params.has_seed = 1;
    s.params.sampling.seed = 5;
    struct test_result first, again;
    assert_int_equal(splash_frame_write_submit(t.fd, 2, &s, &err), SPLASH_OK);
    test_engine_collect(&t, 2, &first);
    assert_true(first.done);
    assert_int_equal(first.n, 4);
    assert_int_equal(splash_frame_write_submit(t.fd, 3, &s, &err), SPLASH_OK);
    test_engine_collect(&t, 3, &again);
    assert_true(again.done);
    assert_memory_equal(first.tokens, again.tokens, 4 * sizeof *first.tokens);
    test_engine_stop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_defaults),
        cmocka_unit_test(test_api_fields),
        cmocka_unit_test(test_frame_round_trip),
        cmocka_unit_test(test_frame_fields_required),
        cmocka_unit_test(test_engine_refuses_missing_temperature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
