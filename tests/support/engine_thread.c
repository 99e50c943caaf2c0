/* An engine thread for tests (tests/support/engine_thread.h). */
#include "tests/support/engine_thread.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/engine/protocol.h"
#include "tests/support/testdata.h"

static void *engine_run(void *p)
{
    struct test_engine *t = p;
    splash_engine_main(&t->o);
    return NULL;
}

void test_engine_start_opts(struct test_engine *t, const char *file,
                            const struct splash_engine_opts *o)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    static char path[512];
    memset(t, 0, sizeof *t);
    t->fd = sv[0];
    t->o = *o;
    t->o.fd = sv[1];
    /* an absolute path: a model the test wrote */
    if (file[0] == '/')
        snprintf(path, sizeof path, "%s", file);
    else
        test_testdata_path(path, sizeof path, file);
    t->o.model_path = path;
    assert_int_equal(pthread_create(&t->thread, NULL, engine_run, t), 0);
    struct splash_frame f;
    struct splash_err err;
    assert_int_equal(splash_frame_read(t->fd, &f, &err), SPLASH_OK);
    if (f.type != SPLASH_FRAME_READY)
        fail_msg("engine: %s", json_string_value(json_object_get(f.body, "message")));
    t->ready = f.body;
}

void test_engine_start(struct test_engine *t, const char *file, int64_t max_context)
{
    const struct splash_engine_opts o = {.n_threads = 1,
                                         .max_context = max_context,
                                         .max_lanes = 2,
                                         .prefill_chunk = 64,
                                         .decode_share = 0.5};
    test_engine_start_opts(t, file, &o);
}

void test_engine_stop(struct test_engine *t)
{
    struct splash_err err;
    splash_frame_write(t->fd, SPLASH_FRAME_SHUTDOWN, 0, NULL, &err);
    pthread_join(t->thread, NULL);
    close(t->fd);
    close(t->o.fd);
    json_decref(t->ready);
}

void test_engine_collect_all(struct test_engine *t, uint64_t first, int n,
                             struct test_result *res)
{
    memset(res, 0, (size_t)n * sizeof *res);
    for (int left = n; left > 0;) {
        struct splash_frame f;
        struct splash_err err;
        if (splash_frame_read(t->fd, &f, &err) != SPLASH_OK)
            fail_msg("engine: %s", err.msg);
        if (f.id < first || f.id >= first + (uint64_t)n) {
            splash_frame_free(&f);
            continue;
        }
        struct test_result *r = &res[f.id - first];
        if (f.type == SPLASH_FRAME_TOKENS) {
            json_t *tk = json_object_get(f.body, "t"), *lp = json_object_get(f.body, "lp");
            for (size_t i = 0; i < json_array_size(tk); i++, r->total++) {
                if (r->n == TEST_ENGINE_KEEP)
                    continue;
                r->tokens[r->n] = (int32_t)json_integer_value(json_array_get(tk, i));
                r->lp[r->n++] = json_number_value(json_array_get(lp, i));
            }
        } else if (f.type == SPLASH_FRAME_DONE) {
            json_t *s = json_object_get(f.body, "speculation");
            r->proposed = json_integer_value(json_object_get(s, "proposed"));
            r->accepted = json_integer_value(json_object_get(s, "accepted"));
            r->cycles = json_integer_value(json_object_get(s, "cycles"));
            r->completion = json_integer_value(json_object_get(f.body, "completion_tokens"));
            r->cached = json_integer_value(json_object_get(f.body, "cached_tokens"));
            r->done = 1;
            left--;
        } else if (f.type == SPLASH_FRAME_ERROR) {
            snprintf(r->code, sizeof r->code, "%s",
                     json_string_value(json_object_get(f.body, "code")));
            snprintf(r->message, sizeof r->message, "%s",
                     json_string_value(json_object_get(f.body, "message")));
            left--;
        }
        splash_frame_free(&f);
    }
}

void test_engine_collect(struct test_engine *t, uint64_t id, struct test_result *out)
{
    test_engine_collect_all(t, id, 1, out);
}

void test_result_assert_same(const char *what, const struct test_result *got,
                             const struct test_result *want, const char *other)
{
    if (got->n != want->n)
        fail_msg("%s: %d tokens, %s %d", what, got->n, other, want->n);
    for (int i = 0; i < got->n; i++)
        if (got->tokens[i] != want->tokens[i] || memcmp(&got->lp[i], &want->lp[i], sizeof(double)))
            fail_msg("%s: token %d is %d (logprob %.9g), %s %d (%.9g)", what, i, got->tokens[i],
                     got->lp[i], other, want->tokens[i], want->lp[i]);
}
