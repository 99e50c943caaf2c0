/* An engine run in a thread of the test, spoken to over a socketpair as the front
 * speaks to its engine process. */
#ifndef SPLASH_TEST_ENGINE_THREAD_H
#define SPLASH_TEST_ENGINE_THREAD_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "server/engine/engine.h"

struct test_engine {
    int fd; /* the front's end */
    pthread_t thread;
    struct splash_engine_opts o;
    json_t *ready; /* the READY frame's body */
};

/* Starts the engine with opts o on a testdata model (path relative to the testdata
 * directory, or an absolute one; o's fd and model_path are filled here); fails the test when it does not
 * answer READY. */
void test_engine_start_opts(struct test_engine *t, const char *file,
                            const struct splash_engine_opts *o);
/* The same with one thread, two lanes and the default caches. */
void test_engine_start(struct test_engine *t, const char *file, int64_t max_context);
void test_engine_stop(struct test_engine *t);

enum { TEST_ENGINE_KEEP = 96 };

/* What one request streamed until it ended. */
struct test_result {
    int32_t tokens[TEST_ENGINE_KEEP];
    double lp[TEST_ENGINE_KEEP]; /* the tokens' logprobs (0 unless asked for) */
    int n, total;                /* tokens kept (the first TEST_ENGINE_KEEP), tokens streamed */
    int done;                    /* DONE arrived; else ERROR did */
    /* from DONE */
    int64_t cached, completion;
    int64_t proposed, accepted, cycles; /* speculation */
    char code[48];               /* the ERROR frame's code */
    char message[256];           /* the ERROR frame's message */
};

/* Reads frames until requests first..first+n-1 have all ended (DONE or ERROR), skipping
 * other requests' frames. */
void test_engine_collect_all(struct test_engine *t, uint64_t first, int n,
                             struct test_result *res);
/* Fails the test unless got streamed want's tokens and logprobs bit for bit; what names
 * got in the message, other names want ("cold", "plain decoding"). */
void test_result_assert_same(const char *what, const struct test_result *got,
                             const struct test_result *want, const char *other);

/* One request. */
void test_engine_collect(struct test_engine *t, uint64_t id, struct test_result *out);

#endif
