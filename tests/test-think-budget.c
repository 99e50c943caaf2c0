/* Thinking budget arithmetic: server.md's two worked examples and the edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/text/tokenizer/tokenizer.h"
#include "server/think_budget.h"
#include "tests/support/testdata.h"

static void test_budget_worked_examples(void **state)
{
    /* 24,576 under a limit of 32,768 with 20,000 tokens of context left ends at 15,000 */
    assert_int_equal(splash_think_budget_effective(24576, 32768, 20000), 15000);
    /* 8,192 under a limit of 2,147,483,647 with 122,072 left ends at 7,676 */
    assert_int_equal(splash_think_budget_effective(8192, 2147483647, 122072), 7676);
    /* room enough: the budget as given; no budget: none */
    assert_int_equal(splash_think_budget_effective(1000, 4000, 100000), 1000);
    assert_int_equal(splash_think_budget_effective(-1, 4000, 10), -1);
    assert_int_equal(splash_think_budget_effective(0, 4000, 10), 0);
}

static void test_budget_param(void **state)
{
    int64_t b;
    char msg[128];
    json_t *body = json_pack("{s:i}", "thinking_token_budget", 300);
    assert_int_equal(splash_think_budget_param(body, 50, &b, msg, sizeof msg), 0);
    assert_int_equal(b, 300);
    json_object_set_new(body, "thinking_token_budget", json_null());
    assert_int_equal(splash_think_budget_param(body, 50, &b, msg, sizeof msg), 0);
    assert_int_equal(b, 50);
    json_object_set_new(body, "thinking_token_budget", json_integer(-1));
    assert_int_equal(splash_think_budget_param(body, 50, &b, msg, sizeof msg), 0);
    assert_int_equal(b, -1);
    json_object_set_new(body, "thinking_token_budget", json_string("lots"));
    assert_int_equal(splash_think_budget_param(body, 50, &b, msg, sizeof msg), -1);
    json_decref(body);
}

static void test_end_text_tokens(void **state)
{
    char path[512], msg[256];
    struct splash_tokenizer *tok;
    struct splash_err err;
    assert_int_equal(splash_tokenizer_load(test_testdata_path(path, sizeof path,
                                                              "models/qwen35-tiny-Q8_0.gguf"),
                                           &tok, &err),
                     SPLASH_OK);
    int32_t ids[64];
    int n = splash_think_end_tokens(tok, "\n</think>", "</think>", ids, 64, msg, sizeof msg);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 2040); /* </think> in the small vocabulary */
    assert_int_equal(splash_think_end_tokens(tok, "no close", "</think>", ids, 64, msg, sizeof msg), -1);
    assert_string_equal(msg, "--thinking-end-text: must end with </think>");
    assert_int_equal(splash_think_end_tokens(tok, "<|im_end|></think>", "</think>", ids, 64, msg,
                                             sizeof msg),
                     -1);
    splash_tokenizer_destroy(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_worked_examples),
        cmocka_unit_test(test_budget_param),
        cmocka_unit_test(test_end_text_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
