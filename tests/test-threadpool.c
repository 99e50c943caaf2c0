/* The worker pool when a worker is off its core: a section whose pieces the caller ran
 * alone returns without waiting for that worker (on a busy machine, a time slice per
 * section), and the worker, back, takes part in later sections. The worker is held off
 * by a signal whose handler blocks on a pipe. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/threadpool.h"

static int hold[2]; /* the handler reads a byte from hold[0] */

static void held(int sig)
{
    (void)sig;
    char c;
    while (read(hold[0], &c, 1) < 0)
        ;
}

static void too_long(int sig)
{
    (void)sig;
    static const char msg[] = "a section waited for a worker that was off its core\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

/* The one thread of this process besides the caller (the pool's worker). */
static pid_t other_thread(void)
{
    pid_t self = (pid_t)syscall(SYS_gettid), found = 0;
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != self) {
            found = tid;
            n++;
        }
    }
    closedir(d);
    assert_int_equal(n, 1);
    return found;
}

struct count_ctx {
    _Atomic int64_t items;
    _Atomic int threads_seen;
};

static void count_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct count_ctx *c = ctx;
    c->items += end - begin;
    c->threads_seen |= 1 << thread;
}

/* count_range, each item a millisecond: a section long enough for a woken worker */
static void slow_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    for (int64_t i = begin; i < end; i++)
        usleep(1000);
    count_range(ctx, begin, end, thread);
}

static void test_section_without_held_worker(void **state)
{
    (void)state;
    struct splash_pool *pool = splash_pool_create(2);
    assert_non_null(pool);
    assert_int_equal(pipe(hold), 0);
    struct sigaction sa = {.sa_handler = held};
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
    pid_t worker = other_thread();
    assert_int_equal(syscall(SYS_tgkill, getpid(), worker, SIGUSR1), 0);
    usleep(50 * 1000); /* the worker is in the handler */
    signal(SIGALRM, too_long);
    alarm(10);
    struct count_ctx c = {0};
    for (int rep = 0; rep < 100; rep++)
        splash_pool_parallel_for(pool, 1000, 1, count_range, &c);
    alarm(0);
    assert_int_equal(c.items, 100 * 1000);
    assert_int_equal(c.threads_seen, 1);
    /* the worker back: later sections run whole, and one long enough for it to wake in
     * (on a busy machine, to be given a core) has it take part */
    assert_int_equal(write(hold[1], "x", 1), 1);
    int both = 0;
    for (int rep = 0; rep < 200 && !both; rep++) {
        struct count_ctx d = {0};
        splash_pool_parallel_for(pool, 40, 1, slow_range, &d);
        assert_int_equal(d.items, 40);
        both = d.threads_seen == 3;
    }
    assert_true(both);
    splash_pool_destroy(pool);
    close(hold[0]);
    close(hold[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section_without_held_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
