/* Option units: sizes, token counts, durations (server.md "Server options"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/units.h"

static void test_units_sizes(void **state)
{
    uint64_t b;
    assert_int_equal(splash_parse_size("28G", &b), 0);
    assert_true(b == 28ull << 30);
    assert_int_equal(splash_parse_size("28GB", &b), 0);
    assert_true(b == 28ull << 30);
    assert_int_equal(splash_parse_size("28GiB", &b), 0);
    assert_true(b == 28ull << 30);
    assert_int_equal(splash_parse_size("28g", &b), 0);
    assert_true(b == 28ull << 30);
    assert_int_equal(splash_parse_size("2.5G", &b), 0);
    assert_true(b == 2560ull << 20);
    assert_int_equal(splash_parse_size("1200M", &b), 0);
    assert_true(b == 1200ull << 20);
    assert_int_equal(splash_parse_size("4096", &b), 0);
    assert_true(b == 4096);
    assert_int_equal(splash_parse_size("0.3K", &b), 0);
    assert_true(b == 307); /* 307.2 rounded down */
    assert_int_equal(splash_parse_size("1.5", &b), -1);
    assert_int_equal(splash_parse_size("-1G", &b), -1);
    assert_int_equal(splash_parse_size("12T", &b), -1);
    assert_int_equal(splash_parse_size("G", &b), -1);
    assert_int_equal(splash_parse_size("1GX", &b), -1);
    assert_int_equal(splash_parse_size("", &b), -1);
    assert_int_equal(splash_parse_size("0x10", &b), -1);
}

static void test_units_tokens(void **state)
{
    uint64_t t;
    assert_int_equal(splash_parse_tokens("100K", &t), 0);
    assert_true(t == 102400);
    assert_int_equal(splash_parse_tokens("1M", &t), 0);
    assert_true(t == 1000000);
    assert_int_equal(splash_parse_tokens("32768", &t), 0);
    assert_true(t == 32768);
    assert_int_equal(splash_parse_tokens("1.5K", &t), 0);
    assert_true(t == 1536);
    assert_int_equal(splash_parse_tokens("1G", &t), -1);
    assert_int_equal(splash_parse_tokens("10.5", &t), -1);
}

static void test_units_durations(void **state)
{
    double s;
    assert_int_equal(splash_parse_duration("90s", &s), 0);
    assert_true(s == 90);
    assert_int_equal(splash_parse_duration("30m", &s), 0);
    assert_true(s == 1800);
    assert_int_equal(splash_parse_duration("1.5h", &s), 0);
    assert_true(s == 5400);
    assert_int_equal(splash_parse_duration("45", &s), 0);
    assert_true(s == 45);
    assert_int_equal(splash_parse_duration("10d", &s), -1);
    assert_int_equal(splash_parse_duration("m", &s), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_sizes),
        cmocka_unit_test(test_units_tokens),
        cmocka_unit_test(test_units_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
