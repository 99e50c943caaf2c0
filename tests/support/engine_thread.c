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

void test_engine_start(struct test_engine *t, const char *file, int64_t max_context)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    static char path[512];
    memset(t, 0, sizeof *t);
    t->fd = sv[0];
    t->o = (struct splash_engine_opts){.fd = sv[1],
                                       .model_path = test_testdata_path(path, sizeof path, file),
                                       .n_threads = 1,
                                       .max_context = max_context,
                                       .max_lanes = 2,
                                       .prefill_chunk = 64,
                                       .decode_share = 0.5};
    assert_int_equal(pthread_create(&t->thread, NULL, engine_run, t), 0);
    struct splash_frame f;
    struct splash_err err;
    assert_int_equal(splash_frame_read(t->fd, &f, &err), SPLASH_OK);
    if (f.type != SPLASH_FRAME_READY)
        fail_msg("engine: %s", json_string_value(json_object_get(f.body, "message")));
    t->ready = f.body;
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

void test_engine_collect(struct test_engine *t, uint64_t id, struct test_outcome *out)
{
    memset(out, 0, sizeof *out);
    for (;;) {
        struct splash_frame f;
        struct splash_err err;
        if (splash_frame_read(t->fd, &f, &err) != SPLASH_OK)
            fail_msg("engine: %s", err.msg);
        int ended = 0;
        if (f.id == id && f.type == SPLASH_FRAME_TOKENS) {
            json_t *tk = json_object_get(f.body, "t");
            for (size_t i = 0; i < json_array_size(tk) && out->n < 64; i++)
                out->tokens[out->n++] = (int32_t)json_integer_value(json_array_get(tk, i));
        } else if (f.id == id && f.type == SPLASH_FRAME_DONE) {
            out->done = ended = 1;
        } else if (f.id == id && f.type == SPLASH_FRAME_ERROR) {
            snprintf(out->code, sizeof out->code, "%s",
                     json_string_value(json_object_get(f.body, "code")));
            snprintf(out->message, sizeof out->message, "%s",
                     json_string_value(json_object_get(f.body, "message")));
            ended = 1;
        }
        splash_frame_free(&f);
        if (ended)
            return;
    }
}
