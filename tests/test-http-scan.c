/* The head gate's scan of a connection's byte stream (server/http_scan.h): where each
 * request head and body ends, and which heads are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "server/http_scan.h"

/* Feeds the stream as a gate would, `step` bytes arriving at a time; returns the
 * bytes cleared and leaves the scan in *s. */
static size_t feed(struct splash_http_scan *s, const char *text, size_t len, size_t step)
{
    memset(s, 0, sizeof *s);
    size_t cleared = 0, have = 0;
    while (have < len) {
        have = have + step < len ? have + step : len;
        for (size_t n; (n = splash_http_scan(s, text + cleared, have - cleared));)
            cleared += n;
        if (s->why)
            break;
    }
    return cleared;
}

static void test_heads_and_bodies_by_framing(void **state)
{
    const char *stream = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n"
                         "GET / HTTP/1.1" /* body bytes, never read as a head */
                         "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n\r\n"
                         "5;x=y\r\nhello\r\n3\nabc\n0\r\nX-T: 1\r\n\r\n"
                         "GET /c HTTP/1.1\nHost: h\n\n";
    for (size_t step = 1; step <= strlen(stream); step += step < 8 ? 1 : 17) {
        struct splash_http_scan s;
        assert_int_equal(feed(&s, stream, strlen(stream), step), strlen(stream));
        assert_null(s.why);
        assert_int_equal(s.heads, 3);
        assert_int_equal(s.state, SPLASH_SCAN_HEAD);
    }
}

static void expect_refused(const char *stream, int status, const char *why_part, size_t cleared)
{
    for (size_t step = 1; step <= strlen(stream); step += 5) {
        struct splash_http_scan s;
        assert_int_equal(feed(&s, stream, strlen(stream), step), cleared);
        assert_non_null(s.why);
        assert_int_equal(s.status, status);
        assert_non_null(strstr(s.why, why_part));
    }
}

static void test_refused_heads(void **state)
{
    const char ok[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t n = strlen(ok);
    char nul[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nAuthorization: k\0j\r\n\r\n";
    for (size_t step = 1; step < sizeof nul; step += 3) {
        struct splash_http_scan s;
        assert_int_equal(feed(&s, nul, sizeof nul - 1, step), n);
        assert_string_equal(s.why, "a NUL byte in the request head");
    }
    expect_refused("GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400,
                   "obs-fold", n);
    expect_refused("GET / HTTP/1.1\r\nX: 1\rContent-Length: 5\r\n\r\nhello", 400, "CR not followed", 0);
    /* the first problem by position, however the bytes arrive (the fuzzer's whole-vs-split) */
    char both[] = "GET / HTTP/1.1\r\nX: 1\rtrue\0\0\r\n\r\n";
    for (size_t step = 1; step < sizeof both; step++) {
        struct splash_http_scan s;
        feed(&s, both, sizeof both - 1, step);
        assert_string_equal(s.why, "a CR not followed by LF in the request head");
    }
    expect_refused("GET /\r\nHost: h\r\n\r\n", 400, "request line", 0);
    expect_refused("G@T / HTTP/1.1\r\n\r\n", 400, "not a token", 0);
    expect_refused("GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello", 400, "before the colon", 0);
    expect_refused("GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "NAME: VALUE", 0);
    expect_refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400,
                   "more than one Content-Length", 0);
    expect_refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                   "both", 0);
    expect_refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, "other than", 0);
    expect_refused("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", 400, "malformed Content-Length", 0);
    /* chunk framing: the head passes, the bad chunk line is refused */
    const char head[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    char bad[256];
    snprintf(bad, sizeof bad, "%s2\r\n{}XX\r\n0\r\n\r\n", head);
    expect_refused(bad, 400, "does not end with CRLF", strlen(head) + 3 + 2);
    snprintf(bad, sizeof bad, "%s 2\r\n{}\r\n", head);
    expect_refused(bad, 400, "malformed chunk size", strlen(head));
    snprintf(bad, sizeof bad, "%s1234567890abcdef0\r\n", head);
    expect_refused(bad, 400, "malformed chunk size", strlen(head));
}

static void test_head_too_large(void **state)
{
    static char big[SPLASH_HTTP_HEAD_MAX + 64];
    strcpy(big, "GET / HTTP/1.1\r\nX-Big: ");
    memset(big + strlen(big), 'a', sizeof big - strlen(big) - 1);
    struct splash_http_scan s = {0};
    assert_int_equal(splash_http_scan(&s, big, SPLASH_HTTP_HEAD_MAX - 1), 0);
    assert_null(s.why); /* still coming */
    assert_int_equal(splash_http_scan(&s, big, SPLASH_HTTP_HEAD_MAX), 0);
    assert_int_equal(s.status, 431);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heads_and_bodies_by_framing),
        cmocka_unit_test(test_refused_heads),
        cmocka_unit_test(test_head_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
