/* Request preparation: leading system and developer messages, replayed assistant turns, and
 * the variables efforts and chat_template_kwargs give a template. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/chat/chat_request.h"

static void expect_json(json_t *got, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *s = json_dumps(got, JSON_COMPACT);
        fprintf(stderr, "got  %s\nwant %s\n", s, want_text);
        free(s);
        fail();
    }
    json_decref(want);
}

static void test_request_merges_leading_system_and_developer(void **state)
{
    (void)state;
    json_t *m = json_loads(
        "[{\"role\":\"system\",\"content\":\"A\"},{\"role\":\"developer\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"B\"},{\"type\":\"text\",\"text\":\"C\"}]},"
        "{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"system\",\"content\":\"later\"}]",
        0, NULL);
    json_t *got = splash_chat_merge_leading_system(m);
    expect_json(got, "[{\"role\":\"system\",\"content\":\"A\\n\\nBC\"},"
                     "{\"role\":\"user\",\"content\":\"u\"},"
                     "{\"role\":\"system\",\"content\":\"later\"}]");
    json_decref(got);
    json_decref(m);
    m = json_loads("[{\"role\":\"user\",\"content\":\"u\"}]", 0, NULL);
    got = splash_chat_merge_leading_system(m);
    expect_json(got, "[{\"role\":\"user\",\"content\":\"u\"}]");
    json_decref(got);
    json_decref(m);
}

static void test_request_replays_text_before_calls(void **state)
{
    (void)state;
    json_t *items = json_loads(
        "[{\"type\":\"text\",\"text\":\"Checking. \"},{\"type\":\"tool_call\",\"id\":\"c1\","
        "\"name\":\"f\",\"arguments\":{\"x\":1}},{\"type\":\"text\",\"text\":\"Done.\"}]", 0,
        NULL);
    json_t *msg = splash_chat_replay_assistant(items, "thought");
    expect_json(msg, "{\"role\":\"assistant\",\"content\":\"Checking. Done.\","
                     "\"reasoning_content\":\"thought\",\"tool_calls\":[{\"type\":\"function\","
                     "\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]}");
    json_decref(msg);
    json_decref(items);
}

static json_t *vars_for(int effort, const char *kwargs, const struct splash_effort_report *r,
                        enum splash_status want_status, const char *want_err)
{
    json_t *messages = json_loads("[]", 0, NULL);
    json_t *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    struct splash_chat_vars_opts o = {.messages = messages, .add_generation_prompt = true,
                                      .effort = effort, .kwargs = kw, .report = r};
    json_t *vars = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_chat_template_vars(&o, &vars, &err), want_status);
    if (want_err)
        assert_string_equal(err.msg, want_err);
    json_decref(kw);
    json_decref(messages);
    if (!vars)
        return NULL;
    /* keep only the reasoning variables and kwargs under test */
    json_object_del(vars, "messages");
    json_object_del(vars, "tools");
    json_object_del(vars, "documents");
    json_object_del(vars, "add_generation_prompt");
    return vars;
}

static void test_request_efforts_and_kwargs(void **state)
{
    (void)state;
    struct splash_effort_report r = {.default_effort = SPLASH_EFFORT_XHIGH};
    for (int e = 0; e < SPLASH_EFFORT_COUNT; e++)
        r.render_as[e] = (enum splash_effort)e;
    r.render_as[SPLASH_EFFORT_HIGH] = SPLASH_EFFORT_XHIGH;
    r.render_as[SPLASH_EFFORT_MINIMAL] = SPLASH_EFFORT_LOW;
    json_t *v = vars_for(-1, NULL, &r, SPLASH_OK, NULL);
    expect_json(v, "{}");
    json_decref(v);
    v = vars_for(SPLASH_EFFORT_NONE, NULL, &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":false,\"reasoning_effort\":\"none\"}");
    json_decref(v);
    /* a rejected effort renders its alias */
    v = vars_for(SPLASH_EFFORT_HIGH, NULL, &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":true,\"reasoning_effort\":\"xhigh\"}");
    json_decref(v);
    /* enable_thinking false outranks the effort and reaches the template as none */
    v = vars_for(SPLASH_EFFORT_LOW, "{\"enable_thinking\":false,\"x\":1}", &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":false,\"reasoning_effort\":\"none\",\"x\":1}");
    json_decref(v);
    /* true turns thinking on, at the template's default effort where the effort is none */
    v = vars_for(SPLASH_EFFORT_NONE, "{\"enable_thinking\":true}", &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":true,\"reasoning_effort\":\"xhigh\"}");
    json_decref(v);
    v = vars_for(SPLASH_EFFORT_MEDIUM, "{\"enable_thinking\":null}", &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":true,\"reasoning_effort\":\"medium\"}");
    json_decref(v);
    /* a template that rejects none renders by enable_thinking alone */
    r.none_by_switch_only = true;
    v = vars_for(SPLASH_EFFORT_NONE, NULL, &r, SPLASH_OK, NULL);
    expect_json(v, "{\"enable_thinking\":false}");
    json_decref(v);
    assert_null(vars_for(-1, "{\"tools\":[]}", &r, SPLASH_ERR_INVALID,
                         "chat_template_kwargs cannot set tools"));
    assert_null(vars_for(-1, "{\"add_generation_prompt\":false}", &r, SPLASH_ERR_INVALID,
                         "chat_template_kwargs cannot set add_generation_prompt"));
    assert_null(vars_for(-1, "{\"enable_thinking\":\"yes\"}", &r, SPLASH_ERR_INVALID,
                         "chat_template_kwargs.enable_thinking must be a boolean"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_merges_leading_system_and_developer),
        cmocka_unit_test(test_request_replays_text_before_calls),
        cmocka_unit_test(test_request_efforts_and_kwargs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
