/* The affinity key's order of hints, its echo rules and its type errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "server/affinity.h"

static char key[256], msg[128];

static int pick(const char *body_text, enum splash_affinity_api api,
                const struct splash_affinity_hints *h)
{
    json_t *body = json_loads(body_text, 0, NULL);
    assert_non_null(body);
    int rc = splash_affinity_pick(body, api, h, key, sizeof key, msg, sizeof msg);
    json_decref(body);
    return rc;
}

static void test_order_openai(void **state)
{
    struct splash_affinity_hints h = {"hdr-1", "agent-1", "10.0.0.7"};
    const char *both = "{\"prompt_cache_key\":\"pck-1\",\"user\":\"u-1\"}";
    assert_int_equal(pick(both, SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "hdr-1");
    h.header = NULL;
    assert_int_equal(pick(both, SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "pck-1");
    assert_int_equal(pick("{\"user\":\"u-1\"}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "agent-1");
    h.agent_session = NULL;
    assert_int_equal(pick("{\"user\":\"u-1\",\"prompt_cache_key\":\"\"}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "u-1");
    assert_int_equal(pick("{\"user\":null}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "addr:10.0.0.7");
    h.client_addr = NULL;
    assert_int_equal(pick("{}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, "addr:unknown");
}

static void test_anthropic_reads_metadata_only(void **state)
{
    struct splash_affinity_hints h = {NULL, NULL, "::1"};
    assert_int_equal(pick("{\"metadata\":{\"user_id\":\"user_abc_session_42\"},\"user\":\"x\","
                          "\"prompt_cache_key\":\"y\"}",
                          SPLASH_AFFINITY_ANTHROPIC, &h),
                     0);
    assert_string_equal(key, "user_abc_session_42");
    assert_int_equal(pick("{\"user\":\"x\"}", SPLASH_AFFINITY_ANTHROPIC, &h), 0);
    assert_string_equal(key, "addr:::1");
}

static void test_unechoable_keys_hash(void **state)
{
    struct splash_affinity_hints h = {0};
    /* a CR LF could end the header and start another one */
    assert_int_equal(pick("{\"user\":\"a\\r\\nSet-Cookie: x=1\"}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_int_equal(strncmp(key, "sha256:", 7), 0);
    assert_int_equal(strlen(key), 7 + 32);
    assert_null(strpbrk(key, "\r\n "));
    char first[64];
    strcpy(first, key);
    assert_int_equal(pick("{\"user\":\"a\\r\\nSet-Cookie: x=1\"}", SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_string_equal(key, first);
    /* DEL, a space and a non-ASCII letter are not echoed either */
    const char *odd[] = {"{\"user\":\"a\\u007fb\"}", "{\"user\":\"a b\"}", "{\"user\":\"caf\\u00e9\"}"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pick(odd[i], SPLASH_AFFINITY_OPENAI, &h), 0);
        assert_int_equal(strncmp(key, "sha256:", 7), 0);
    }
    /* 129 characters: longer than echoed as given */
    char body[300];
    snprintf(body, sizeof body, "{\"user\":\"%0129d\"}", 7);
    assert_int_equal(pick(body, SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_int_equal(strncmp(key, "sha256:", 7), 0);
    snprintf(body, sizeof body, "{\"user\":\"%0128d\"}", 7);
    assert_int_equal(pick(body, SPLASH_AFFINITY_OPENAI, &h), 0);
    assert_int_equal(strlen(key), 128);
}

static void test_wrong_types_name_the_field(void **state)
{
    struct splash_affinity_hints h = {"hdr", NULL, NULL};
    assert_int_equal(pick("{\"prompt_cache_key\":5}", SPLASH_AFFINITY_OPENAI, &h), -1);
    assert_string_equal(msg, "prompt_cache_key must be a string");
    assert_int_equal(pick("{\"user\":{}}", SPLASH_AFFINITY_OPENAI, &h), -1);
    assert_string_equal(msg, "user must be a string");
    assert_int_equal(pick("{\"metadata\":{\"user_id\":[1]}}", SPLASH_AFFINITY_ANTHROPIC, &h), -1);
    assert_string_equal(msg, "metadata.user_id must be a string");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_openai),
        cmocka_unit_test(test_anthropic_reads_metadata_only),
        cmocka_unit_test(test_unechoable_keys_hash),
        cmocka_unit_test(test_wrong_types_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
