/* Engine supervision (server.md "Engine restarts and sleep"): immediate restart,
 * then 5 s doubling to 60 s after failures within 60 s of a start; stop after a
 * failure every restart would meet again or the sixth quick failure in a row. */
#include "server/engine_client.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/protocol.h"
#include "server/console.h"

#define MAX_QUICK_FAILURES 6
#define QUICK_WINDOW_S 60.0
#define WATCHDOG_S 30.0
#define QUARANTINE_S 3600.0
#define MAX_QUARANTINE 64

/* The watchdog period: WATCHDOG_S, or for tests only SPLASH_TEST_WATCHDOG_S
 * (seconds, > 0) so a hung-engine test does not wait 30 s. */
static double watchdog_s(void)
{
    const char *v = getenv("SPLASH_TEST_WATCHDOG_S");
    double s = v && *v ? strtod(v, NULL) : 0;
    return s > 0 ? s : WATCHDOG_S;
}

struct splash_pending {
    struct splash_engine_client *client;
    uint64_t id;
    unsigned char digest[32];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct splash_event *events;
    size_t head, count, cap;
    int finished;     /* DONE or ERROR queued */
    int started;      /* the engine gave it a lane (STARTED or tokens seen) */
    int released;     /* the HTTP side let go */
    struct splash_pending *next;
};

struct splash_engine_client {
    struct splash_engine_spawn spawn;
    pthread_mutex_t lock;
    pthread_cond_t state_changed;
    enum splash_engine_state state;
    char why[512];
    int fd;
    pid_t pid;
    double started_at, ready_in, next_ready_at;
    int restarts, quick_failures, backoff_s;
    int exit_status;
    int stopping;
    uint64_t next_id;
    struct splash_pending *pending;
    json_t *info;
    json_t *experts; /* the streamed experts' store as the engine last reported it, or NULL */
    int64_t first_context; /* the first engine's context, which restarts ask for */
    pthread_t supervisor;
    pthread_mutex_t write_lock;
    double last_status_reply, last_status_sent;
    int own_kill; /* this engine was killed by the watchdog, not by a fault */
    /* requests this engine failed itself (ERROR engine_failed): gone from the
     * pending list once their client lets go, still present at the failure */
    unsigned char suspects[MAX_QUARANTINE][32];
    int n_suspects;
    /* request digests started at the previous failure, and those quarantined */
    unsigned char prev_failure[MAX_QUARANTINE][32];
    int n_prev_failure;
    unsigned char quarantined[MAX_QUARANTINE][32];
    double quarantined_until[MAX_QUARANTINE];
    int n_quarantined;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- pending request queues ----------------------------------------------- */

static void pending_push(struct splash_pending *p, enum splash_event_kind kind, json_t *body)
{
    pthread_mutex_lock(&p->lock);
    if (p->finished || p->released) {
        pthread_mutex_unlock(&p->lock);
        json_decref(body);
        return;
    }
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        struct splash_event *n = malloc(cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&p->lock);
            json_decref(body);
            return;
        }
        for (size_t i = 0; i < p->count; i++)
            n[i] = p->events[(p->head + i) % p->cap];
        free(p->events);
        p->events = n;
        p->head = 0;
        p->cap = cap;
    }
    p->events[(p->head + p->count) % p->cap] = (struct splash_event){.kind = kind, .body = body};
    p->count++;
    if (kind != SPLASH_EV_TOKENS)
        p->finished = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void pending_unlink(struct splash_engine_client *c, struct splash_pending *p)
{
    for (struct splash_pending **q = &c->pending; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            return;
        }
}

static void pending_free(struct splash_pending *p)
{
    for (size_t i = 0; i < p->count; i++)
        json_decref(p->events[(p->head + i) % p->cap].body);
    free(p->events);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}

int splash_pending_next(struct splash_pending *p, struct splash_event *ev, int timeout_ms)
{
    pthread_mutex_lock(&p->lock);
    if (!p->count && timeout_ms != 0) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        if (timeout_ms > 0) {
            deadline.tv_sec += timeout_ms / 1000;
            deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
            if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
            }
        }
        while (!p->count) {
            if (timeout_ms < 0)
                pthread_cond_wait(&p->cond, &p->lock);
            else if (pthread_cond_timedwait(&p->cond, &p->lock, &deadline) == ETIMEDOUT)
                break;
        }
    }
    if (!p->count) {
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    *ev = p->events[p->head];
    p->head = (p->head + 1) % p->cap;
    p->count--;
    pthread_mutex_unlock(&p->lock);
    return 1;
}

/* A frame the engine leaves unread for 30 s fails it (server.md "Engine restarts"):
 * the writer never waits longer, so no request thread blocks on a stalled engine. */
static void send_frame(struct splash_engine_client *c, uint32_t type, uint64_t id, json_t *body)
{
    struct splash_err err;
    pthread_mutex_lock(&c->write_lock);
    int fd = c->fd;
    enum splash_status st = SPLASH_OK;
    if (fd >= 0)
        st = splash_frame_write_timeout(fd, type, id, body, (int)(watchdog_s() * 1000), &err);
    pthread_mutex_unlock(&c->write_lock);
    if (st != SPLASH_OK && strstr(err.msg, "unread")) {
        pthread_mutex_lock(&c->lock);
        snprintf(c->why, sizeof c->why, "the engine left a frame unread for %g s", watchdog_s());
        c->own_kill = 1;
        pid_t pid = c->pid;
        pthread_mutex_unlock(&c->lock);
        if (pid > 0)
            kill(pid, SIGKILL);
    }
}

void splash_pending_cancel(struct splash_pending *p)
{
    pthread_mutex_lock(&p->lock);
    int finished = p->finished;
    pthread_mutex_unlock(&p->lock);
    if (!finished)
        send_frame(p->client, SPLASH_FRAME_CANCEL, p->id, NULL);
}

void splash_pending_release(struct splash_pending *p)
{
    struct splash_engine_client *c = p->client;
    splash_pending_cancel(p);
    pthread_mutex_lock(&c->lock);
    pending_unlink(c, p);
    pthread_mutex_unlock(&c->lock);
    pending_free(p);
}

/* ---- quarantine ------------------------------------------------------------ */

static int is_quarantined(struct splash_engine_client *c, const unsigned char *digest)
{
    double t = now_s();
    for (int i = 0; i < c->n_quarantined; i++)
        if (c->quarantined_until[i] > t && !memcmp(c->quarantined[i], digest, 32))
            return 1;
    return 0;
}

static void add_digest(unsigned char (*set)[32], int *n, const unsigned char *digest)
{
    for (int i = 0; i < *n; i++)
        if (!memcmp(set[i], digest, 32))
            return;
    if (*n < MAX_QUARANTINE)
        memcpy(set[(*n)++], digest, 32);
}

/* server.md "Engine restarts": a request the engine had started at each of two
 * failures in a row that a request may cause (an execution failure, broken
 * output, a fault signal; not a kill) is quarantined for an hour. A failure no
 * request can cause breaks the row. */
static void note_failure_requests(struct splash_engine_client *c, int request_may_cause)
{
    if (!request_may_cause) {
        c->n_prev_failure = 0;
        return;
    }
    unsigned char now_set[MAX_QUARANTINE][32];
    int n = 0;
    for (int i = 0; i < c->n_suspects; i++)
        add_digest(now_set, &n, c->suspects[i]);
    for (struct splash_pending *p = c->pending; p; p = p->next)
        if (p->started)
            add_digest(now_set, &n, p->digest);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < c->n_prev_failure; i++) {
            if (memcmp(c->prev_failure[i], now_set[k], 32))
                continue;
            int slot = c->n_quarantined < MAX_QUARANTINE ? c->n_quarantined++ : 0;
            memcpy(c->quarantined[slot], now_set[k], 32);
            c->quarantined_until[slot] = now_s() + QUARANTINE_S;
        }
    memcpy(c->prev_failure, now_set, sizeof(now_set[0]) * (size_t)n);
    c->n_prev_failure = n;
}

/* Signals a request's input can raise in the engine; a kill (SIGKILL, SIGTERM)
 * comes from outside. */
static int fault_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
           sig == SIGTRAP || sig == SIGSYS;
}

/* ---- spawning ----------------------------------------------------------------- */

struct stderr_arg {
    int fd;
};

/* Forwards the engine's stderr to the console, one line at a time. */
static void *stderr_reader(void *arg)
{
    int fd = ((struct stderr_arg *)arg)->fd;
    free(arg);
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return NULL;
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        splash_console_line(SPLASH_CONSOLE_ERR, "%s", line);
    }
    fclose(f);
    return NULL;
}

static int spawn_engine(struct splash_engine_client *c, char *why, size_t why_size)
{
    int sv[2], errpipe[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, why_size, "socketpair: %s", strerror(errno));
        return -1;
    }
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        snprintf(why, why_size, "pipe: %s", strerror(errno));
        return -1;
    }
    char threads[16], kv[8], state[8], ctx[24], share[32], mem[24], experts[24];
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)c->spawn.max_memory);
    if (!c->spawn.expert_memory || c->spawn.expert_memory == UINT64_MAX)
        snprintf(experts, sizeof experts, "%s", c->spawn.expert_memory ? "off" : "auto");
    else
        snprintf(experts, sizeof experts, "%llu", (unsigned long long)c->spawn.expert_memory);
    snprintf(threads, sizeof threads, "%d", c->spawn.threads);
    snprintf(kv, sizeof kv, "%s", c->spawn.kv_format ? "bf16" : "int8");
    snprintf(state, sizeof state, "%s", c->spawn.state_format ? "bf16" : "fp32");
    /* a restart asks for the first engine's context, and serves what its budget holds of it */
    int restart = c->first_context > 0;
    snprintf(ctx, sizeof ctx, "%lld",
             (long long)(restart ? c->first_context : c->spawn.max_context));
    snprintf(share, sizeof share, "%g", c->spawn.decode_share);
    char disk[24], disk_writes[24];
    if (c->spawn.cache_disk < 0)
        snprintf(disk, sizeof disk, "auto");
    else
        snprintf(disk, sizeof disk, "%lld", (long long)c->spawn.cache_disk);
    snprintf(disk_writes, sizeof disk_writes, "%llu",
             (unsigned long long)c->spawn.cache_disk_writes);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_size, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        dup2(sv[1], 3);
        dup2(errpipe[1], 2);
        char *argv[] = {"splash", "engine", "--fd", "3", "--model-dir", (char *)c->spawn.model_path,
                        "--threads", threads, "--kv-format", kv, "--state-format", state,
                        "--max-context", ctx, "--decode-share", share, "--max-memory", mem,
                        "--expert-memory", experts,
                        "--fit-context", restart ? "1" : "0", "--speculative",
                        (char *)(c->spawn.speculative ? c->spawn.speculative : "auto"),
                        "--verify-rows", c->spawn.verify_rows_all ? "all" : "auto",
                        "--draft-model",
                        (char *)(c->spawn.draft_model ? c->spawn.draft_model : "none"),
                        "--max-cache-disk", disk,
                        "--max-cache-disk-writes", disk_writes, "--persistent-cache",
                        c->spawn.persistent_cache ? "1" : "0",
                        c->spawn.cache_dir ? "--cache-dir" : NULL, (char *)c->spawn.cache_dir,
                        NULL};
        execv(c->spawn.exe, argv);
        fprintf(stderr, "Error: cannot start the engine %s: %s\n", c->spawn.exe, strerror(errno));
        _exit(126);
    }
    close(sv[1]);
    close(errpipe[1]);
    struct stderr_arg *sa = malloc(sizeof *sa);
    pthread_t t;
    if (sa) {
        sa->fd = errpipe[0];
        if (pthread_create(&t, NULL, stderr_reader, sa) == 0)
            pthread_detach(t);
        else
            close(errpipe[0]);
    }
    /* non-blocking: a stalled engine never blocks a writer past the watchdog */
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    pthread_mutex_lock(&c->write_lock);
    c->fd = sv[0];
    pthread_mutex_unlock(&c->write_lock);
    pthread_mutex_lock(&c->lock);
    c->pid = pid;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

static void set_state(struct splash_engine_client *c, enum splash_engine_state s)
{
    c->state = s;
    pthread_cond_broadcast(&c->state_changed);
}

/* Routes one engine frame to its request. */
static void route(struct splash_engine_client *c, struct splash_frame *f)
{
    if (f->type == SPLASH_FRAME_READY) {
        pthread_mutex_lock(&c->lock);
        if (c->info)
            json_decref(c->info);
        c->info = json_incref(f->body);
        json_decref(c->experts); /* a new engine's store: its READY frame has it */
        c->experts = NULL;
        if (!c->first_context)
            c->first_context = (int64_t)json_integer_value(json_object_get(f->body, "n_ctx"));
        c->ready_in = now_s() - c->started_at;
        set_state(c, SPLASH_ENGINE_READY);
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (f->type == SPLASH_FRAME_STATUS) {
        pthread_mutex_lock(&c->lock);
        c->last_status_reply = now_s();
        c->last_status_sent = 0;
        /* the engine reports its expert store when it gives a chunk back or takes one */
        json_t *se = json_object_get(f->body, "streamed_experts");
        if (json_is_object(se)) {
            json_decref(c->experts);
            c->experts = json_deep_copy(se);
        }
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (f->type == SPLASH_FRAME_ERROR && f->id == 0) {
        pthread_mutex_lock(&c->lock);
        snprintf(c->why, sizeof c->why, "%s", json_string_value(json_object_get(f->body, "message"))
                                                  ? json_string_value(json_object_get(f->body, "message"))
                                                  : "engine error");
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (f->type == SPLASH_FRAME_STARTED || f->type == SPLASH_FRAME_TOKENS ||
        f->type == SPLASH_FRAME_ERROR) {
        pthread_mutex_lock(&c->lock);
        for (struct splash_pending *p = c->pending; p; p = p->next) {
            if (p->id != f->id)
                continue;
            p->started |= f->type != SPLASH_FRAME_ERROR;
            const char *code = json_string_value(json_object_get(f->body, "code"));
            if (f->type == SPLASH_FRAME_ERROR && code && !strcmp(code, "engine_failed"))
                add_digest(c->suspects, &c->n_suspects, p->digest);
        }
        pthread_mutex_unlock(&c->lock);
    }
    /* STARTED reaches the request as tokens without any ({cached}: its Started line) */
    enum splash_event_kind kind = f->type == SPLASH_FRAME_TOKENS || f->type == SPLASH_FRAME_STARTED
                                      ? SPLASH_EV_TOKENS
                                  : f->type == SPLASH_FRAME_DONE ? SPLASH_EV_DONE
                                  : f->type == SPLASH_FRAME_ERROR ? SPLASH_EV_ERROR
                                                                  : 0;
    if (!kind)
        return;
    pthread_mutex_lock(&c->lock);
    struct splash_pending *p = c->pending;
    while (p && p->id != f->id)
        p = p->next;
    if (p)
        pending_push(p, kind, json_incref(f->body));
    pthread_mutex_unlock(&c->lock);
}

/* Reads frames until the engine goes away (0) or sends a broken frame (-1, why
 * in c->why). While requests are pending a status request goes out every 5 s;
 * one left unanswered for 30 s fails the engine. */
static int read_loop(struct splash_engine_client *c)
{
    for (;;) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int rc = poll(&pfd, 1, 1000);
        if (rc < 0 && errno == EINTR)
            continue;
        double t = now_s();
        int send_status = 0, hung = 0;
        pthread_mutex_lock(&c->lock);
        int busy = c->pending != NULL && c->state == SPLASH_ENGINE_READY;
        if (!busy) {
            c->last_status_sent = 0;
        } else if (c->last_status_sent > 0) {
            hung = !c->stopping && t - c->last_status_sent > watchdog_s();
        } else if (t - c->last_status_reply > 5) {
            c->last_status_sent = t;
            send_status = 1;
        }
        if (hung) {
            snprintf(c->why, sizeof c->why, "the engine stopped answering status requests for %g s",
                     watchdog_s());
            c->own_kill = 1;
        }
        pthread_mutex_unlock(&c->lock);
        if (send_status)
            send_frame(c, SPLASH_FRAME_STATUS_REQ, 0, NULL);
        if (hung) {
            kill(c->pid, SIGKILL);
            hung = 0;
        }
        if (rc == 0)
            continue;
        struct splash_frame f;
        struct splash_err err;
        enum splash_status st = splash_frame_read(c->fd, &f, &err);
        if (st != SPLASH_OK) {
            /* an end mid-frame is the engine dying; a frame that does not parse is broken output */
            if (st != SPLASH_ERR_INVALID)
                return 0;
            pthread_mutex_lock(&c->lock);
            snprintf(c->why, sizeof c->why, "the engine sent a broken frame: %s", err.msg);
            pthread_mutex_unlock(&c->lock);
            return -1;
        }
        route(c, &f);
        splash_frame_free(&f);
    }
}

static void fail_pending(struct splash_engine_client *c, const char *code, const char *message)
{
    for (struct splash_pending *p = c->pending; p; p = p->next)
        pending_push(p, SPLASH_EV_ERROR, json_pack("{s:s, s:s}", "code", code, "message", message));
}

/* The supervisor's end once the server stops: no engine runs any more. */
static void *supervisor_stopped(struct splash_engine_client *c)
{
    fail_pending(c, "shutting_down", "the server is stopping");
    set_state(c, SPLASH_ENGINE_STOPPED);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static void *supervise(void *arg)
{
    struct splash_engine_client *c = arg;
    for (;;) {
        char why[256] = "";
        pthread_mutex_lock(&c->lock);
        /* a stop during the restart wait starts no engine */
        if (c->stopping)
            return supervisor_stopped(c);
        c->started_at = now_s();
        c->last_status_reply = 0;
        c->last_status_sent = 0;
        c->own_kill = 0;
        c->n_suspects = 0;
        pthread_mutex_unlock(&c->lock);
        int spawned = spawn_engine(c, why, sizeof why) == 0;
        int broken = 0;
        if (spawned) {
            /* a stop that came while it spawned saw no pid to signal: signal it here */
            pthread_mutex_lock(&c->lock);
            if (c->stopping)
                kill(c->pid, SIGTERM);
            pthread_mutex_unlock(&c->lock);
            broken = read_loop(c) < 0;
            if (broken)
                kill(c->pid, SIGKILL); /* its output cannot be trusted any further */
        }
        int status = 0;
        if (spawned) {
            waitpid(c->pid, &status, 0);
            pthread_mutex_lock(&c->lock);
            c->pid = 0; /* reaped: its number may be reused, never signal it again */
            pthread_mutex_unlock(&c->lock);
        }
        pthread_mutex_lock(&c->write_lock);
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        pthread_mutex_unlock(&c->write_lock);
        pthread_mutex_lock(&c->lock);
        if (c->stopping)
            return supervisor_stopped(c);
        double lived = now_s() - c->started_at;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        if (!broken && !c->own_kill && (!c->why[0] || c->state == SPLASH_ENGINE_READY)) {
            if (!spawned)
                snprintf(c->why, sizeof c->why, "%s", why);
            else if (sig)
                snprintf(c->why, sizeof c->why, "the engine was killed by signal %d", sig);
            else
                snprintf(c->why, sizeof c->why, "the engine exited with status %d", code);
        }
        splash_console_line(SPLASH_CONSOLE_ERR, "Error · engine failed: %s", c->why);
        /* a kill by signal from outside, the watchdog's or a stop is no request's doing;
         * status 3 is the engine's own execution failure */
        note_failure_requests(c, !c->own_kill && (broken || fault_signal(sig) || code == 3));
        /* a failed start (model refused, exec failed) meets the same cause again */
        int permanent = !spawned || (!sig && (code == 1 || code == 126 || code == 2) &&
                                     c->state != SPLASH_ENGINE_READY);
        c->quick_failures = lived < QUICK_WINDOW_S ? c->quick_failures + 1 : 0;
        if (permanent || c->quick_failures >= MAX_QUICK_FAILURES) {
            fail_pending(c, "engine_failed", c->why);
            splash_console_line(SPLASH_CONSOLE_ERR, "Engine stopped · %s", c->why);
            c->exit_status = 69;
            set_state(c, SPLASH_ENGINE_FAILED);
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        int wait_s = 0;
        if (c->quick_failures >= 2) {
            c->backoff_s = c->backoff_s ? (c->backoff_s * 2 > 60 ? 60 : c->backoff_s * 2) : 5;
            wait_s = c->backoff_s;
        } else {
            c->backoff_s = 0;
        }
        c->restarts++;
        c->next_ready_at = now_s() + wait_s + (c->ready_in > 0 ? c->ready_in : 5);
        fail_pending(c, "engine_recovering", c->why);
        set_state(c, SPLASH_ENGINE_RECOVERING);
        pthread_mutex_unlock(&c->lock);
        if (wait_s)
            splash_console_line(SPLASH_CONSOLE_ERR, "Engine restarting in %d s", wait_s);
        for (int i = 0; i < wait_s * 10; i++) {
            pthread_mutex_lock(&c->lock);
            int stop = c->stopping;
            pthread_mutex_unlock(&c->lock);
            if (stop)
                break;
            usleep(100000);
        }
    }
}

struct splash_engine_client *splash_engine_client_start(const struct splash_engine_spawn *spawn)
{
    struct splash_engine_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->spawn = *spawn;
    c->fd = -1;
    c->next_id = 1;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->write_lock, NULL);
    pthread_cond_init(&c->state_changed, NULL);
    c->state = SPLASH_ENGINE_STARTING;
    if (pthread_create(&c->supervisor, NULL, supervise, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

enum splash_engine_state splash_engine_client_wait_ready(struct splash_engine_client *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->state == SPLASH_ENGINE_STARTING ||
           (c->state == SPLASH_ENGINE_RECOVERING && c->info == NULL))
        pthread_cond_wait(&c->state_changed, &c->lock);
    enum splash_engine_state s = c->state;
    pthread_mutex_unlock(&c->lock);
    return s;
}

void splash_engine_client_stop(struct splash_engine_client *c, int now, int (*interrupted)(void))
{
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pid_t pid = c->pid;
    enum splash_engine_state s = c->state;
    pthread_mutex_unlock(&c->lock);
    if (s != SPLASH_ENGINE_FAILED && s != SPLASH_ENGINE_STOPPED && pid > 0) {
        send_frame(c, SPLASH_FRAME_SHUTDOWN, 0, NULL);
        kill(pid, now ? SIGKILL : SIGTERM);
        for (int i = 0; !now && i < 150; i++) {
            if (waitpid(pid, NULL, WNOHANG) != 0)
                break;
            if (interrupted && interrupted()) {
                splash_console_line(SPLASH_CONSOLE_OUT, "Stopping · the engine at once");
                break;
            }
            usleep(100000);
        }
        kill(pid, SIGKILL);
    }
    pthread_join(c->supervisor, NULL);
}

enum splash_engine_state splash_engine_client_state(struct splash_engine_client *c, char *why,
                                                    size_t why_size, int *retry_after)
{
    pthread_mutex_lock(&c->lock);
    enum splash_engine_state s = c->state;
    if (why)
        snprintf(why, why_size, "%s", c->why);
    if (retry_after) {
        double left = c->next_ready_at - now_s();
        *retry_after = left < 1 ? 1 : (int)(left + 0.999);
    }
    pthread_mutex_unlock(&c->lock);
    return s;
}

void splash_engine_client_note_experts(struct splash_engine_client *c, json_t *experts)
{
    pthread_mutex_lock(&c->lock);
    json_decref(c->experts);
    c->experts = json_deep_copy(experts);
    pthread_mutex_unlock(&c->lock);
}

json_t *splash_engine_client_experts(struct splash_engine_client *c)
{
    pthread_mutex_lock(&c->lock);
    json_t *se = c->experts ? json_deep_copy(c->experts) : NULL;
    pthread_mutex_unlock(&c->lock);
    return se;
}

json_t *splash_engine_client_info(struct splash_engine_client *c)
{
    pthread_mutex_lock(&c->lock);
    json_t *info = c->info;
    pthread_mutex_unlock(&c->lock);
    return info;
}

int splash_engine_client_restarts(struct splash_engine_client *c)
{
    pthread_mutex_lock(&c->lock);
    int n = c->restarts;
    pthread_mutex_unlock(&c->lock);
    return n;
}

int splash_engine_client_exit_status(struct splash_engine_client *c)
{
    pthread_mutex_lock(&c->lock);
    int s = c->exit_status;
    pthread_mutex_unlock(&c->lock);
    return s;
}

struct splash_pending *splash_engine_submit(struct splash_engine_client *c,
                                            const struct splash_submit *submit, const char **code,
                                            char *message, size_t msg_size, int *retry_after)
{
    json_t *body = splash_submit_to_json(submit);
    if (!body) {
        *code = "capacity_exhausted";
        snprintf(message, msg_size, "out of memory");
        return NULL;
    }
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    unsigned char digest[32];
    SHA256((const unsigned char *)(text ? text : ""), text ? strlen(text) : 0, digest);
    free(text);
    pthread_mutex_lock(&c->lock);
    if (c->state == SPLASH_ENGINE_FAILED || c->state == SPLASH_ENGINE_STOPPED) {
        *code = "engine_failed";
        snprintf(message, msg_size, "%s", c->why[0] ? c->why : "the engine stopped");
        pthread_mutex_unlock(&c->lock);
        json_decref(body);
        return NULL;
    }
    if (c->state != SPLASH_ENGINE_READY) {
        *code = "engine_recovering";
        snprintf(message, msg_size, "the engine is restarting after a failure: %s",
                 c->why[0] ? c->why : "starting");
        double left = c->next_ready_at - now_s();
        *retry_after = left < 1 ? 1 : (int)(left + 0.999);
        pthread_mutex_unlock(&c->lock);
        json_decref(body);
        return NULL;
    }
    if (is_quarantined(c, digest)) {
        *code = "request_quarantined";
        snprintf(message, msg_size,
                 "this request was running at two engine failures in a row and is refused for an "
                 "hour (or until the server restarts)");
        pthread_mutex_unlock(&c->lock);
        json_decref(body);
        return NULL;
    }
    struct splash_pending *p = calloc(1, sizeof *p);
    if (!p) {
        pthread_mutex_unlock(&c->lock);
        *code = "capacity_exhausted";
        snprintf(message, msg_size, "out of memory");
        json_decref(body);
        return NULL;
    }
    p->client = c;
    p->id = c->next_id++;
    memcpy(p->digest, digest, 32);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->next = c->pending;
    c->pending = p;
    pthread_mutex_unlock(&c->lock);
    send_frame(c, SPLASH_FRAME_SUBMIT, p->id, body);
    json_decref(body);
    return p;
}

void splash_engine_client_release(struct splash_engine_client *c)
{
    send_frame(c, SPLASH_FRAME_RELEASE, 0, NULL);
}

uint64_t splash_pending_id(const struct splash_pending *p)
{
    return p->id;
}
