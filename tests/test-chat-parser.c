/* Chat formats and the streaming output parser. The model outputs are the assistant turns of
 * the reference renderings in ../shared/testdata/templates/expected (Qwen3.5's for QWEN's
 * calls, GLM-4.7-Flash's for FLINT's), and the expected calls are the fixtures' own tool_calls.
 * Every output is parsed whole, byte by byte and in uneven pieces, with the same result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/chat/chat_format.h"
#include "server/chat/chat_parser.h"
#include "tests/support/testdata.h"

static char *read_rel(const char *rel, size_t *len)
{
    char path[1024];
    test_testdata_path(path, sizeof path, rel);
    return test_read_file(path, len);
}

static json_t *load_fixture(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "templates/fixtures/%s.json", name);
    size_t len;
    char *text = read_rel(rel, &len);
    assert_non_null(text);
    json_t *j = json_loadb(text, len, 0, NULL);
    free(text);
    assert_non_null(j);
    return j;
}

/* The first assistant turn of a reference rendering that makes a call, from just after
 * `after` up to the first stop text. */
static char *recorded_output(const char *rendering, const char *after, const char *const *stops)
{
    size_t len;
    char rel[256];
    snprintf(rel, sizeof rel, "templates/expected/%s.txt", rendering);
    char *text = read_rel(rel, &len);
    assert_non_null(text);
    char *result = NULL;
    for (char *p = text; (p = strstr(p, after)); p++) {
        char *start = p + strlen(after);
        char *end = text + len;
        for (size_t i = 0; stops[i]; i++) {
            char *s = strstr(start, stops[i]);
            if (s && s < end)
                end = s;
        }
        char *call = strstr(start, "<tool_call>");
        if (call && call < end) {
            result = strndup(start, (size_t)(end - start));
            break;
        }
    }
    free(text);
    return result;
}

/* Parses out in pieces of `piece` bytes (0: all at once). */
static void parse(const struct splash_chat_format *f, bool in_reasoning, const json_t *tools,
                  const char *out, size_t piece, struct splash_chat_result *r)
{
    struct splash_chat_parser_opts o = {.format = f, .starts_in_reasoning = in_reasoning,
                                        .tools = tools};
    struct splash_chat_parser *p = splash_chat_parser_create(&o);
    assert_non_null(p);
    memset(r, 0, sizeof *r);
    size_t n = strlen(out);
    if (!piece)
        piece = n ? n : 1;
    for (size_t i = 0; i < n; i += piece)
        splash_chat_parser_feed(p, out + i, n - i < piece ? n - i : piece,
                                splash_chat_result_add, r);
    splash_chat_parser_finish(p, splash_chat_result_add, r);
    splash_chat_parser_destroy(p);
}

static bool str_eq(const char *a, size_t an, const char *b)
{
    return an == strlen(b) && (an == 0 || memcmp(a, b, an) == 0);
}

static void same_result(const struct splash_chat_result *a, const struct splash_chat_result *b)
{
    assert_int_equal(a->reasoning_len, b->reasoning_len);
    assert_int_equal(a->content_len, b->content_len);
    if (a->reasoning_len)
        assert_memory_equal(a->reasoning, b->reasoning, a->reasoning_len);
    if (a->content_len)
        assert_memory_equal(a->content, b->content, a->content_len);
    assert_int_equal(a->n_calls, b->n_calls);
    for (size_t i = 0; i < a->n_calls; i++) {
        assert_string_equal(a->calls[i].name, b->calls[i].name);
        assert_int_equal(a->calls[i].args_len, b->calls[i].args_len);
        assert_memory_equal(a->calls[i].args, b->calls[i].args, a->calls[i].args_len);
    }
}

/* Parses whole, then in every piece size from 1 to 9 and 13, and checks all agree. */
static void parse_all_ways(const struct splash_chat_format *f, bool in_reasoning,
                           const json_t *tools, const char *out, struct splash_chat_result *r)
{
    parse(f, in_reasoning, tools, out, 0, r);
    static const size_t pieces[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    for (size_t k = 0; k < sizeof pieces / sizeof *pieces; k++) {
        struct splash_chat_result s;
        parse(f, in_reasoning, tools, out, pieces[k], &s);
        same_result(r, &s);
        splash_chat_result_free(&s);
    }
}

/* The parsed calls equal the fixture's assistant tool_calls, arguments as JSON values. */
static void expect_calls(const struct splash_chat_result *r, const json_t *fixture)
{
    size_t i;
    json_t *m;
    json_t *want_calls = NULL;
    json_array_foreach(json_object_get(fixture, "messages"), i, m)
        if (json_object_get(m, "tool_calls") && !want_calls)
            want_calls = json_object_get(m, "tool_calls");
    assert_non_null(want_calls);
    assert_int_equal(r->n_calls, json_array_size(want_calls));
    json_t *call;
    json_array_foreach(want_calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        assert_string_equal(r->calls[i].name, json_string_value(json_object_get(fn, "name")));
        json_error_t jerr;
        json_t *args = json_loadb(r->calls[i].args, r->calls[i].args_len, 0, &jerr);
        if (!args || !json_equal(args, json_object_get(fn, "arguments"))) {
            fprintf(stderr, "call %zu arguments: %.*s\n", i, (int)r->calls[i].args_len,
                    r->calls[i].args);
            fail();
        }
        json_decref(args);
    }
}

static const char *const qwen_stops[] = {"<|im_end|>", "<|endoftext|>", NULL};
static const char *const flint_stops[] = {"<|observation|>", "<|user|>", "<|end_of_text|>",
                                          NULL};

static void test_parser_qwen_recorded_calls(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"tool_call_object_args", "tool_call_with_content",
                                           "parallel_calls_multi_results", "unicode_content",
                                           "reasoning_after_last_query"};
    for (size_t k = 0; k < sizeof fixtures / sizeof *fixtures; k++) {
        json_t *fx = load_fixture(fixtures[k]);
        char rendering[128];
        snprintf(rendering, sizeof rendering, "Qwen3.5-4B__%s", fixtures[k]);
        /* where the generation prompt opened the think block, output starts inside it; a turn
         * before the last query is rendered without one */
        bool in_reasoning = true;
        char *out = recorded_output(rendering, "<|im_start|>assistant\n<think>\n", qwen_stops);
        if (!out) {
            in_reasoning = false;
            out = recorded_output(rendering, "<|im_start|>assistant\n", qwen_stops);
        }
        assert_non_null(out);
        struct splash_chat_result r;
        parse_all_ways(&splash_chat_format_qwen, in_reasoning, json_object_get(fx, "tools"), out,
                       &r);
        expect_calls(&r, fx);
        /* the reasoning and answer the fixture's assistant turn holds */
        json_t *msg = NULL, *m;
        size_t i;
        json_array_foreach(json_object_get(fx, "messages"), i, m)
            if (!msg && json_object_get(m, "tool_calls"))
                msg = m;
        const char *rc = json_string_value(json_object_get(msg, "reasoning_content"));
        const char *content = json_string_value(json_object_get(msg, "content"));
        assert_true(str_eq(r.reasoning, r.reasoning_len, rc ? rc : ""));
        assert_true(str_eq(r.content, r.content_len, content ? content : ""));
        splash_chat_result_free(&r);
        free(out);
        json_decref(fx);
    }
}

static void test_parser_flint_recorded_calls(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"tool_call_object_args", "tool_call_with_content",
                                           "reasoning_after_last_query", "tool_call_null_content",
                                           "unicode_content"};
    for (size_t k = 0; k < sizeof fixtures / sizeof *fixtures; k++) {
        json_t *fx = load_fixture(fixtures[k]);
        char rendering[128];
        snprintf(rendering, sizeof rendering, "GLM-4.7-Flash__%s", fixtures[k]);
        char *out = recorded_output(rendering, "<|assistant|>", flint_stops);
        assert_non_null(out);
        struct splash_chat_result r;
        parse_all_ways(&splash_chat_format_flint, false, json_object_get(fx, "tools"), out, &r);
        expect_calls(&r, fx);
        json_t *msg = NULL, *m;
        size_t i;
        json_array_foreach(json_object_get(fx, "messages"), i, m)
            if (!msg && json_object_get(m, "tool_calls"))
                msg = m;
        const char *rc = json_string_value(json_object_get(msg, "reasoning_content"));
        const char *content = json_string_value(json_object_get(msg, "content"));
        /* a history turn renders "</think>" (dropped from an answer) and, for a null content,
         * the template's "None" */
        assert_true(str_eq(r.reasoning, r.reasoning_len, rc ? rc : ""));
        assert_true(str_eq(r.content, r.content_len,
                           content ? content : json_is_null(json_object_get(msg, "content"))
                                                   ? "None" : ""));
        splash_chat_result_free(&r);
        free(out);
        json_decref(fx);
    }
}

/* The first call turn of a gpt-oss reference rendering, as the model writes it after the
 * generation prompt <|start|>assistant: the header, the arguments and <|call|>. */
static char *harmony_recorded_call(const char *rendering)
{
    size_t len;
    char rel[256];
    snprintf(rel, sizeof rel, "templates/expected/%s.txt", rendering);
    char *text = read_rel(rel, &len);
    assert_non_null(text);
    const char *open = "<|start|>assistant";
    char *p = strstr(text, "<|start|>assistant to=functions.");
    char *end = p ? strstr(p, "<|call|>") : NULL;
    char *out = p && end ? strndup(p + strlen(open), (size_t)(end + 8 - p - strlen(open)))
                         : NULL;
    free(text);
    return out;
}

static void test_parser_harmony(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"tool_call_object_args", "reasoning_after_last_query",
                                           "tool_call_with_content"};
    for (size_t k = 0; k < sizeof fixtures / sizeof *fixtures; k++) {
        json_t *fx = load_fixture(fixtures[k]);
        char rendering[128];
        snprintf(rendering, sizeof rendering, "openai-gpt-oss-120b__%s", fixtures[k]);
        char *out = harmony_recorded_call(rendering);
        assert_non_null(out);
        struct splash_chat_result r;
        parse_all_ways(&splash_chat_format_harmony, false, json_object_get(fx, "tools"), out, &r);
        expect_calls(&r, fx);
        assert_int_equal(r.content_len, 0);
        splash_chat_result_free(&r);
        free(out);
        json_decref(fx);
    }
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                               "\"parameters\":{\"type\":\"object\"}}}]",
                               0, NULL);
    struct splash_chat_result r;
    /* analysis is reasoning, final the answer; <|return|> ends it */
    parse_all_ways(&splash_chat_format_harmony, false, NULL,
                   "<|channel|>analysis<|message|>Think < hard.<|end|><|start|>assistant"
                   "<|channel|>final<|message|>The answer <is> 4.<|return|>",
                   &r);
    assert_true(str_eq(r.reasoning, r.reasoning_len, "Think < hard."));
    assert_true(str_eq(r.content, r.content_len, "The answer <is> 4."));
    assert_int_equal(r.n_calls, 0);
    splash_chat_result_free(&r);
    /* reasoning, a preamble on commentary, then a call with the recipient after the channel */
    parse_all_ways(&splash_chat_format_harmony, false, tools,
                   "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
                   "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant"
                   "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                   "{\"location\": \"Oslo\"}<|call|>",
                   &r);
    assert_true(str_eq(r.reasoning, r.reasoning_len, "Need weather."));
    assert_true(str_eq(r.content, r.content_len, "Checking."));
    assert_int_equal(r.n_calls, 1);
    assert_string_equal(r.calls[0].name, "get_weather");
    assert_true(str_eq(r.calls[0].args, r.calls[0].args_len, "{\"location\": \"Oslo\"}"));
    splash_chat_result_free(&r);
    /* a call to a tool the request lacks is text; output with no header is all answer */
    parse_all_ways(&splash_chat_format_harmony, false, tools,
                   "<|channel|>commentary to=functions.nope<|message|>{}<|call|>", &r);
    assert_int_equal(r.n_calls, 0);
    assert_true(str_eq(r.content, r.content_len, "{}"));
    splash_chat_result_free(&r);
    /* arguments that are no JSON object: the body is text (the fuzzer found it streamed) */
    parse_all_ways(&splash_chat_format_harmony, false, tools,
                   "<|channel|>commentary to=functions.get_weather json<|message|>{\"a\": 1}x"
                   "<|call|>", &r);
    assert_int_equal(r.n_calls, 0);
    assert_true(str_eq(r.content, r.content_len, "{\"a\": 1}x"));
    splash_chat_result_free(&r);
    parse_all_ways(&splash_chat_format_harmony, false, tools, "plain words, no header", &r);
    assert_true(str_eq(r.content, r.content_len, "plain words, no header"));
    splash_chat_result_free(&r);
    json_decref(tools);
}

static void test_parser_reasoning_and_answers(void **state)
{
    (void)state;
    struct splash_chat_result r;
    /* QWEN thinking: reasoning, then the answer; a later </think> is dropped, newlines kept */
    parse_all_ways(&splash_chat_format_qwen, true, NULL,
                   "Let me think.\n</think>\n\nThe answer is 4.\n</think>\nReally.", &r);
    assert_true(str_eq(r.reasoning, r.reasoning_len, "Let me think."));
    assert_true(str_eq(r.content, r.content_len, "The answer is 4.\n\nReally."));
    splash_chat_result_free(&r);
    /* FLINT: a think block only as the first token; otherwise all answer */
    parse_all_ways(&splash_chat_format_flint, false, NULL, "<think>plan</think>Hi <think>", &r);
    assert_true(str_eq(r.reasoning, r.reasoning_len, "plan"));
    assert_true(str_eq(r.content, r.content_len, "Hi <think>"));
    splash_chat_result_free(&r);
    parse_all_ways(&splash_chat_format_flint, false, NULL, "Hello</think> there", &r);
    assert_int_equal(r.reasoning_len, 0);
    assert_true(str_eq(r.content, r.content_len, "Hello there"));
    splash_chat_result_free(&r);
    /* FLINT reads a <tool_call> inside its think block as reasoning */
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", 0, NULL);
    parse_all_ways(&splash_chat_format_flint, false, tools,
                   "<think>maybe <tool_call>f</tool_call></think>done", &r);
    assert_true(str_eq(r.reasoning, r.reasoning_len, "maybe <tool_call>f</tool_call>"));
    assert_true(str_eq(r.content, r.content_len, "done"));
    assert_int_equal(r.n_calls, 0);
    splash_chat_result_free(&r);
    json_decref(tools);
}

static void test_parser_argument_types(void **state)
{
    (void)state;
    json_t *tools = json_loads(
        "[{\"type\":\"function\",\"function\":{\"name\":\"t\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},"
        "\"n\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},\"o\":{\"type\":\"object\"},"
        "\"a\":{\"type\":\"array\"},\"bad\":{\"type\":\"integer\"}}}}}]", 0, NULL);
    const char *out = "<tool_call>\n<function=t>\n<parameter=s>\n 42 \"quoted\"\\\n</parameter>\n"
                      "<parameter=i>\n-7\n</parameter>\n<parameter=n>\n2.5e3\n</parameter>\n"
                      "<parameter=b>\nfalse\n</parameter>\n<parameter=o>\n{\"k\": [1]}\n"
                      "</parameter>\n<parameter=a>\n[1, \"x\"]\n</parameter>\n"
                      "<parameter=bad>\nseven\n</parameter>\n</function>\n</tool_call>";
    struct splash_chat_result r;
    parse_all_ways(&splash_chat_format_qwen, false, tools, out, &r);
    assert_int_equal(r.n_calls, 1);
    json_t *args = json_loadb(r.calls[0].args, r.calls[0].args_len, 0, NULL);
    json_t *want = json_loads("{\"s\": \" 42 \\\"quoted\\\"\\\\\", \"i\": -7, \"n\": 2500.0, "
                              "\"b\": false, \"o\": {\"k\": [1]}, \"a\": [1, \"x\"], "
                              "\"bad\": \"seven\"}", 0, NULL);
    if (!json_equal(args, want))
        fprintf(stderr, "args: %.*s\n", (int)r.calls[0].args_len, r.calls[0].args);
    assert_true(json_equal(args, want));
    json_decref(args);
    json_decref(want);
    splash_chat_result_free(&r);
    json_decref(tools);
}

/* Output that breaks the call syntax stays text, every byte of it. */
static void test_parser_malformed_keeps_every_byte(void **state)
{
    (void)state;
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", 0, NULL);
    static const char *const qwen_bad[] = {
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "see <tool_call",
        "<tool_call>\n<function=a b<c>\n",
        "x <tool_call>\n<funct",
        "<tool_call><tool_call>",
        "</tool_call> < > <function=f>",
        "\xff\xfe<tool_call>\n\xe2\x82",
    };
    for (size_t i = 0; i < sizeof qwen_bad / sizeof *qwen_bad; i++) {
        struct splash_chat_result r;
        parse_all_ways(&splash_chat_format_qwen, false, tools, qwen_bad[i], &r);
        if (!str_eq(r.content, r.content_len, qwen_bad[i]) || r.n_calls || r.reasoning_len) {
            fprintf(stderr, "qwen malformed %zu: content [%.*s]\n", i, (int)r.content_len,
                    r.content);
            fail();
        }
        splash_chat_result_free(&r);
    }
    static const char *const flint_bad[] = {
        "<tool_call><arg_key>k</arg_key></tool_call>",
        "text <tool_call>has <b>markup</b>",
        "<tool_cal",
        "<think",
    };
    for (size_t i = 0; i < sizeof flint_bad / sizeof *flint_bad; i++) {
        struct splash_chat_result r;
        parse_all_ways(&splash_chat_format_flint, false, tools, flint_bad[i], &r);
        if (!str_eq(r.content, r.content_len, flint_bad[i]) || r.n_calls) {
            fprintf(stderr, "flint malformed %zu: content [%.*s]\n", i, (int)r.content_len,
                    r.content);
            fail();
        }
        splash_chat_result_free(&r);
    }
    /* without tools, call markup is plain text */
    struct splash_chat_result r;
    const char *call = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
    parse_all_ways(&splash_chat_format_qwen, false, NULL, call, &r);
    assert_true(str_eq(r.content, r.content_len, call));
    assert_int_equal(r.n_calls, 0);
    splash_chat_result_free(&r);
    /* a call the output leaves open still closes its arguments as valid JSON */
    parse_all_ways(&splash_chat_format_qwen, false, tools,
                   "<tool_call>\n<function=f>\n<parameter=x>\nabc", &r);
    assert_int_equal(r.n_calls, 1);
    json_t *args = json_loadb(r.calls[0].args, r.calls[0].args_len, 0, NULL);
    assert_non_null(args);
    assert_string_equal(json_string_value(json_object_get(args, "x")), "abc");
    json_decref(args);
    splash_chat_result_free(&r);
    json_decref(tools);
}

/* A toy tokenizer: whole special tokens from a list, every other byte a token. */
struct toy_vocab {
    const char *const *specials;
};

static int toy_tokenize(void *user, const char *text, size_t len, int32_t *ids, size_t max)
{
    const struct toy_vocab *v = user;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t matched = 0;
        int32_t id = 0;
        for (size_t k = 0; v->specials[k]; k++) {
            size_t sl = strlen(v->specials[k]);
            if (sl <= len - i && memcmp(text + i, v->specials[k], sl) == 0 && sl > matched) {
                matched = sl;
                id = 1000 + (int32_t)k;
            }
        }
        if (!matched) {
            matched = 1;
            id = (unsigned char)text[i];
        }
        if (n < max)
            ids[n] = id;
        n++;
        i += matched;
    }
    return (int)n;
}

static void test_format_token_check(void **state)
{
    (void)state;
    static const char *const qwen_specials[] = {
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
        "</tool_call>", NULL};
    struct toy_vocab qv = {qwen_specials};
    struct splash_chat_format_ids ids;
    struct splash_err err = {{0}};
    assert_int_equal(splash_chat_format_check(&splash_chat_format_qwen, toy_tokenize, &qv, &ids,
                                              &err), SPLASH_OK);
    assert_int_equal(ids.cache_reuse_after, 1002);
    assert_int_equal(ids.stops[0], 1000);
    /* Flint's argument tags must each be a token */
    assert_int_equal(splash_chat_format_check(&splash_chat_format_flint, toy_tokenize, &qv, &ids,
                                              &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "chat format flint: <arg_key> encodes as 9 tokens, the format "
                                 "needs it as one");
    assert_ptr_equal(splash_chat_format_find("flint"), &splash_chat_format_flint);
    /* Qwen3.5's generation prompts: thinking opens a block, enable_thinking false closes it */
    const char *on = "<|im_start|>assistant\n<think>\n";
    const char *off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert_true(splash_chat_prompt_opens_think(&splash_chat_format_qwen, on, strlen(on)));
    assert_false(splash_chat_prompt_opens_think(&splash_chat_format_qwen, off, strlen(off)));
    assert_false(splash_chat_prompt_opens_think(&splash_chat_format_flint, on, strlen(on)));
    assert_null(splash_chat_format_find("llama"));
}

/* Cases the chat-parser fuzzer found where the split into tokens changed the result: a
 * blank after a call before text that only starts like a call tag, and a key that ends
 * just inside the key limit while its closing tag is still arriving. */
static void test_parser_split_edges_found_by_fuzzing(void **state)
{
    (void)state;
    struct splash_chat_result r;
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", 0, NULL);
    parse_all_ways(&splash_chat_format_flint, false, tools, "answer<tool_call>f</tool_call> <tx", &r);
    assert_int_equal(r.n_calls, 1);
    assert_true(str_eq(r.content, r.content_len, "answer <tx"));
    splash_chat_result_free(&r);
    char out[512];
    char key[251];
    memset(key, 'k', 250);
    key[250] = 0;
    snprintf(out, sizeof out, "<tool_call>f<arg_key>%s</arg_key><arg_value>v</arg_value></tool_call>",
             key);
    parse_all_ways(&splash_chat_format_flint, false, tools, out, &r);
    assert_int_equal(r.n_calls, 1);
    json_t *args = json_loadb(r.calls[0].args, r.calls[0].args_len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(args, key)), "v");
    json_decref(args);
    splash_chat_result_free(&r);
    /* a call name after a long run of blanks */
    memset(out, '\t', 300);
    memcpy(out, "<tool_call>", 11);
    snprintf(out + 300, sizeof out - 300, "f</tool_call>done");
    parse_all_ways(&splash_chat_format_flint, false, tools, out, &r);
    assert_int_equal(r.n_calls, 1);
    assert_string_equal(r.calls[0].name, "f");
    assert_true(str_eq(r.content, r.content_len, "done"));
    splash_chat_result_free(&r);
    json_decref(tools);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_qwen_recorded_calls),
        cmocka_unit_test(test_parser_flint_recorded_calls),
        cmocka_unit_test(test_parser_harmony),
        cmocka_unit_test(test_parser_reasoning_and_answers),
        cmocka_unit_test(test_parser_argument_types),
        cmocka_unit_test(test_parser_malformed_keeps_every_byte),
        cmocka_unit_test(test_parser_split_edges_found_by_fuzzing),
        cmocka_unit_test(test_format_token_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
