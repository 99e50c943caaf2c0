/* Console writer thread (server.md "Console"). */
#include "server/console.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct line {
    enum splash_console_stream stream;
    char *text;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t more, drained;
    struct line queue[SPLASH_CONSOLE_QUEUE];
    size_t head, count;
    uint64_t dropped_total, dropped_pending;
    int running, stop;
    pthread_t thread;
} con = {.lock = PTHREAD_MUTEX_INITIALIZER,
         .more = PTHREAD_COND_INITIALIZER,
         .drained = PTHREAD_COND_INITIALIZER};

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&con.lock);
    for (;;) {
        while (!con.count && !con.dropped_pending && !con.stop)
            pthread_cond_wait(&con.more, &con.lock);
        if (!con.count && !con.dropped_pending && con.stop)
            break;
        struct line l = {0};
        uint64_t dropped = con.dropped_pending;
        con.dropped_pending = 0;
        if (con.count) {
            l = con.queue[con.head];
            con.head = (con.head + 1) % SPLASH_CONSOLE_QUEUE;
            con.count--;
        }
        pthread_mutex_unlock(&con.lock);
        /* written outside the lock: a stalled reader holds up this thread alone */
        if (dropped) {
            fprintf(stderr, "Warning · %llu console lines dropped while the output was blocked\n",
                    (unsigned long long)dropped);
            fflush(stderr);
        }
        if (l.text) {
            FILE *out = l.stream == SPLASH_CONSOLE_ERR ? stderr : stdout;
            fputs(l.text, out);
            fputc('\n', out);
            fflush(out);
            free(l.text);
        }
        pthread_mutex_lock(&con.lock);
        if (!con.count)
            pthread_cond_broadcast(&con.drained);
    }
    pthread_cond_broadcast(&con.drained);
    pthread_mutex_unlock(&con.lock);
    return NULL;
}

void splash_console_start(void)
{
    pthread_mutex_lock(&con.lock);
    if (!con.running) {
        con.stop = 0;
        if (pthread_create(&con.thread, NULL, writer, NULL) == 0)
            con.running = 1;
    }
    pthread_mutex_unlock(&con.lock);
}

void splash_console_line(enum splash_console_stream stream, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&con.lock);
    if (!con.running) {
        pthread_mutex_unlock(&con.lock);
        FILE *out = stream == SPLASH_CONSOLE_ERR ? stderr : stdout;
        fprintf(out, "%s\n", buf);
        fflush(out);
        return;
    }
    if (con.count == SPLASH_CONSOLE_QUEUE) {
        con.dropped_total++;
        con.dropped_pending++;
    } else {
        char *copy = strdup(buf);
        if (copy) {
            size_t tail = (con.head + con.count) % SPLASH_CONSOLE_QUEUE;
            con.queue[tail].stream = stream;
            con.queue[tail].text = copy;
            con.count++;
        }
    }
    pthread_cond_signal(&con.more);
    pthread_mutex_unlock(&con.lock);
}

uint64_t splash_console_dropped(void)
{
    pthread_mutex_lock(&con.lock);
    uint64_t n = con.dropped_total;
    pthread_mutex_unlock(&con.lock);
    return n;
}

void splash_console_stop(int timeout_ms)
{
    pthread_mutex_lock(&con.lock);
    if (!con.running) {
        pthread_mutex_unlock(&con.lock);
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    while (con.count && pthread_cond_timedwait(&con.drained, &con.lock, &deadline) == 0)
        ;
    int drained = con.count == 0;
    con.stop = 1;
    pthread_cond_signal(&con.more);
    con.running = 0;
    pthread_mutex_unlock(&con.lock);
    if (drained)
        pthread_join(con.thread, NULL);
    else
        pthread_detach(con.thread); /* its output is stalled: leave it behind */
}
