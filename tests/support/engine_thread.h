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

/* Starts the engine on a testdata model (path relative to the testdata directory);
 * fails the test when it does not answer READY. */
void test_engine_start(struct test_engine *t, const char *file, int64_t max_context);
void test_engine_stop(struct test_engine *t);

/* What one request streamed until it ended. */
struct test_outcome {
    int32_t tokens[64];
    int n;             /* tokens kept (the first 64) */
    int done;          /* DONE arrived; else ERROR did */
    char code[48];     /* the ERROR frame's code */
    char message[256]; /* the ERROR frame's message */
};

/* Reads frames until request id ends (DONE or ERROR). */
void test_engine_collect(struct test_engine *t, uint64_t id, struct test_outcome *out);

#endif
