/* Serving benchmark on the Qwen3.5-0.8B-shaped random model (the one bench-model
 * builds and caches under build/bench-models/), 2 threads.
 *
 * 1. HTTP: starts `splash serve` on a free loopback port and, at 1, 4 and 16
 *    concurrent streams, sends streaming /v1/completions requests (a fixed
 *    prompt of token ids, max_tokens, temperature 0) with libcurl's multi
 *    interface: per stream the time to first token and the gaps between tokens
 *    as seen in the SSE chunks, the request's latency, and the tokens generated
 *    (the usage chunk); aggregate tokens/s over the wall time of the level.
 * 2. Engine: the same levels against the engine loop `splash serve` runs, in
 *    this process over its frame protocol, which reports every token as it is
 *    sampled. The random model's vocabulary is mostly reserved fillers that
 *    render no text, so its SSE streams carry no per-token chunks (and a fast
 *    model's chunks may carry several tokens): the HTTP table prints TTFT and
 *    ITL only where most tokens came as chunks of their own, and the per-token
 *    timings come from here.
 * 3. Step: the batched decode step itself, the family's forward over 1, 2, 4, 8
 *    and 16 lanes of one token each (logits per lane, as the engine asks); the
 *    target is a 16-lane step costing at most 3 times a 1-lane step.
 *
 * usage: bench-serve [-p N] [-n N] [-t N] [-s http,engine,step] [-m GGUF]
 *        (prompt tokens 128, generated tokens 64, 2 threads, every section, the
 *        cached 0.8B-shaped model) */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/engine.h"
#include "server/engine/protocol.h"
#include "server/engine/step_bench.h"
#include "core/model_load.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

#define N_THREADS 2 /* default of -t, and the model build's */
#define SHAPE "qwen35-0.8b"
#define SERVED_NAME "bench/qwen35-0.8b"
#define MAX_CONTEXT "4096" /* the plan needs no more; keeps the KV reservation small */
#define MAX_STREAMS 16
#define READY_SECONDS 120.0 /* server or engine start */
#define LEVEL_SECONDS 240.0 /* one concurrency level (about 30 s on a quiet machine) */
#define STOP_SECONDS 20.0   /* SIGTERM to exit */
#define STEP_PREFILL 16
#define STEP_REPS 15
#define STEP_TARGET 3.0

static const int levels[] = {1, 4, 16};
#define N_LEVELS ((int)(sizeof levels / sizeof levels[0]))

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_load(const char *when)
{
    char line[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = 0;
    printf("load average %s: %s\n", when, line[0] ? line : "unknown");
    fflush(stdout);
}

/* ---- per-stream records and their statistics --------------------------------- */

struct stream {
    double t_start; /* request sent */
    double t_first; /* first token seen, 0 before */
    double t_last;  /* latest token seen */
    double t_end;   /* response complete */
    double *gaps;   /* seconds between successive tokens seen */
    int n_gaps, cap_gaps;
    int n_seen;     /* tokens (engine) or text chunks (HTTP) seen as they came */
    int64_t tokens; /* tokens generated, as the usage or DONE reports them */
    int done, failed;
    char error[256];
    /* HTTP */
    CURL *easy;
    char *body;
    char *buf; /* SSE bytes not yet split into events */
    size_t len, cap;
};

static void stream_seen(struct stream *s, double t)
{
    if (!s->t_first) {
        s->t_first = t;
    } else {
        if (s->n_gaps == s->cap_gaps) {
            int cap = s->cap_gaps ? 2 * s->cap_gaps : 128;
            double *grown = realloc(s->gaps, (size_t)cap * sizeof *grown);
            if (!grown)
                return;
            s->gaps = grown;
            s->cap_gaps = cap;
        }
        s->gaps[s->n_gaps++] = t - s->t_last;
    }
    s->t_last = t;
    s->n_seen++;
}

static void stream_fail(struct stream *s, const char *msg)
{
    if (!s->failed)
        snprintf(s->error, sizeof s->error, "%s", msg);
    s->failed = 1;
    s->done = 1;
}

static void streams_free(struct stream *s, int n)
{
    for (int i = 0; i < n; i++) {
        free(s[i].gaps);
        free(s[i].body);
        free(s[i].buf);
    }
    memset(s, 0, (size_t)n * sizeof *s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q in [0, 1] of sorted values, interpolated between the nearest ranks. */
static double percentile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0;
    double pos = q * (double)(n - 1);
    int lo = (int)pos;
    if (lo >= n - 1)
        return sorted[n - 1];
    return sorted[lo] + (pos - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

struct level_result {
    int streams, failed;
    int64_t tokens;
    int n_seen;
    double wall;
    double ttft[2], itl[2], latency[2]; /* p50, p95 in seconds */
    int have_timing;                    /* most tokens were seen as they came */
};

static void summarize(struct stream *s, int n, struct level_result *r)
{
    memset(r, 0, sizeof *r);
    r->streams = n;
    double ttft[MAX_STREAMS], lat[MAX_STREAMS];
    int n_ttft = 0, n_gaps = 0;
    double t0 = 1e30, t1 = 0;
    for (int i = 0; i < n; i++) {
        r->failed += s[i].failed;
        r->tokens += s[i].tokens;
        r->n_seen += s[i].n_seen;
        n_gaps += s[i].n_gaps;
        if (s[i].t_first)
            ttft[n_ttft++] = s[i].t_first - s[i].t_start;
        lat[i] = s[i].t_end - s[i].t_start;
        if (s[i].t_start < t0)
            t0 = s[i].t_start;
        if (s[i].t_end > t1)
            t1 = s[i].t_end;
    }
    r->wall = t1 > t0 ? t1 - t0 : 0;
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    r->latency[0] = percentile(lat, n, 0.50);
    r->latency[1] = percentile(lat, n, 0.95);
    /* an HTTP stream shows a token only where its text is printable: its gaps
     * time tokens only when most tokens came as chunks of their own */
    r->have_timing = n_ttft == n && 2 * (int64_t)r->n_seen >= r->tokens;
    if (!r->have_timing)
        return;
    qsort(ttft, (size_t)n_ttft, sizeof *ttft, cmp_double);
    r->ttft[0] = percentile(ttft, n_ttft, 0.50);
    r->ttft[1] = percentile(ttft, n_ttft, 0.95);
    double *gaps = malloc((size_t)(n_gaps ? n_gaps : 1) * sizeof *gaps);
    if (!gaps)
        return;
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s[i].n_gaps; j++)
            gaps[k++] = s[i].gaps[j];
    qsort(gaps, (size_t)k, sizeof *gaps, cmp_double);
    r->itl[0] = percentile(gaps, k, 0.50);
    r->itl[1] = percentile(gaps, k, 0.95);
    free(gaps);
}

static void print_header(void)
{
    printf("  streams  tokens   TTFT p50 / p95 (s)   ITL p50 / p95 (ms)   latency p50 / p95 (s)"
           "   tokens/s\n");
}

static void print_row(const struct level_result *r)
{
    char ttft[32] = "      -", itl[32] = "      -";
    if (r->have_timing) {
        snprintf(ttft, sizeof ttft, "%7.2f / %6.2f", r->ttft[0], r->ttft[1]);
        snprintf(itl, sizeof itl, "%7.1f / %6.1f", 1e3 * r->itl[0], 1e3 * r->itl[1]);
    }
    printf("  %7d  %6lld   %-18s   %-18s   %8.2f / %6.2f     %8.2f", r->streams,
           (long long)r->tokens, ttft, itl, r->latency[0], r->latency[1],
           r->wall > 0 ? (double)r->tokens / r->wall : 0.0);
    if (r->failed)
        printf("   (%d failed)", r->failed);
    printf("\n");
    fflush(stdout);
}

/* Prompt token ids: a fixed pseudo-random sequence of ids below 256, different per
 * stream and level so no two requests share a prefix. */
static json_t *prompt_ids(int level, int stream, int n_prompt)
{
    uint64_t s =
        0x2545F4914F6CDD1Dull ^ ((uint64_t)(level * 64 + stream + 1) * 0x9E3779B97F4A7C15ull);
    json_t *ids = json_array();
    for (int k = 0; k < n_prompt; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        json_array_append_new(ids, json_integer((json_int_t)(s % 256)));
    }
    return ids;
}

/* ---- HTTP: splash serve and libcurl --------------------------------------------- */

struct server {
    pid_t pid;
    int out_fd; /* the server's stdout */
    int port;
    pthread_t drain;
    int draining;
    atomic_int stop_drain;
    char log[4096]; /* its output up to "Serving ·", for a failure message */
    size_t log_len;
};

/* A port the kernel reports free on the loopback address. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Keeps reading the server's stdout after start so its writes never block. */
static void *drain_main(void *arg)
{
    struct server *sv = arg;
    char buf[4096];
    while (!sv->stop_drain) {
        struct pollfd p = {.fd = sv->out_fd, .events = POLLIN};
        int rc = poll(&p, 1, 200);
        if (rc < 0 && errno != EINTR)
            break;
        if (rc > 0 && read(sv->out_fd, buf, sizeof buf) <= 0)
            break;
    }
    return NULL;
}

static void server_stop(struct server *sv)
{
    if (sv->pid > 0) {
        kill(sv->pid, SIGTERM);
        double deadline = now() + STOP_SECONDS;
        int status = 0;
        pid_t got = 0;
        while ((got = waitpid(sv->pid, &status, WNOHANG)) == 0 && now() < deadline)
            usleep(50000);
        if (got == 0) {
            fprintf(stderr, "bench-serve: splash serve ignored SIGTERM for %.0f s: killed\n",
                    STOP_SECONDS);
            kill(sv->pid, SIGKILL);
            waitpid(sv->pid, &status, 0);
        } else if (got > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "bench-serve: splash serve stopped with status %d\n",
                    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        sv->pid = 0;
    }
    if (sv->draining) {
        sv->stop_drain = 1;
        pthread_join(sv->drain, NULL);
        sv->draining = 0;
    }
    if (sv->out_fd >= 0)
        close(sv->out_fd);
    sv->out_fd = -1;
}

/* Starts the server and waits for its "Serving ·" line. */
static int server_start(struct server *sv, const char *exe, const char *model, int n_threads)
{
    memset(sv, 0, sizeof *sv);
    sv->out_fd = -1;
    sv->port = free_port();
    int fds[2];
    if (sv->port <= 0 || pipe2(fds, O_CLOEXEC) != 0) {
        fprintf(stderr, "bench-serve: no loopback port or pipe: %s\n", strerror(errno));
        return -1;
    }
    char port[16], threads[16];
    snprintf(port, sizeof port, "%d", sv->port);
    snprintf(threads, sizeof threads, "%d", n_threads);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bench-serve: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        /* the server must not outlive the bench */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fds[1], STDOUT_FILENO);
        char *argv[] = {(char *)"splash",         (char *)"serve",
                        (char *)"--model",        (char *)SERVED_NAME,
                        (char *)"--model-dir",    (char *)model,
                        (char *)"--host",         (char *)"127.0.0.1",
                        (char *)"--port",         port,
                        (char *)"--threads",      threads,
                        (char *)"--max-context",  (char *)MAX_CONTEXT,
                        (char *)"--idle-release", (char *)"off",
                        (char *)"--no-webui",     NULL};
        execv(exe, argv);
        _exit(127);
    }
    close(fds[1]);
    sv->pid = pid;
    sv->out_fd = fds[0];
    double deadline = now() + READY_SECONDS;
    while (now() < deadline) {
        struct pollfd p = {.fd = sv->out_fd, .events = POLLIN};
        int rc = poll(&p, 1, 200);
        if (rc < 0 && errno != EINTR)
            break;
        if (rc <= 0)
            continue;
        size_t half = sizeof sv->log / 2;
        if (sv->log_len + 1 == sizeof sv->log) { /* full: keep the later half */
            memmove(sv->log, sv->log + sv->log_len - half, half);
            sv->log_len = half;
        }
        size_t room = sizeof sv->log - 1 - sv->log_len;
        ssize_t n = read(sv->out_fd, sv->log + sv->log_len, room);
        if (n <= 0)
            break; /* the server exited */
        sv->log_len += (size_t)n;
        sv->log[sv->log_len] = 0;
        if (strstr(sv->log, "Serving \xc2\xb7")) {
            if (pthread_create(&sv->drain, NULL, drain_main, sv) == 0)
                sv->draining = 1;
            return 0;
        }
    }
    fprintf(stderr,
            "bench-serve: splash serve did not print \"Serving\" within %.0f s; its "
            "output:\n%s\n",
            READY_SECONDS, sv->log);
    server_stop(sv);
    return -1;
}

/* One SSE event: "data: {...}" lines. */
static void sse_event(struct stream *s, const char *ev, size_t len, double t)
{
    const char *end = ev + len;
    for (const char *line = ev; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        if (stop - line > 6 && !strncmp(line, "data: ", 6)) {
            const char *payload = line + 6;
            size_t n = (size_t)(stop - payload);
            if (n == 6 && !strncmp(payload, "[DONE]", 6)) {
                s->done = 1;
            } else {
                json_t *j = json_loadb(payload, n, 0, NULL);
                json_t *err = json_object_get(j, "error");
                json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
                json_t *text = json_object_get(choice, "text");
                json_t *usage = json_object_get(j, "usage");
                if (err)
                    stream_fail(s, json_string_value(json_object_get(err, "message"))
                                       ? json_string_value(json_object_get(err, "message"))
                                       : "the stream carried an error");
                else if (json_is_string(text) && json_string_length(text) > 0)
                    stream_seen(s, t);
                if (usage)
                    s->tokens = json_integer_value(json_object_get(usage, "completion_tokens"));
                json_decref(j);
            }
        }
        line = stop + 1;
    }
}

static size_t on_http_data(char *data, size_t size, size_t nmemb, void *user)
{
    struct stream *s = user;
    size_t n = size * nmemb;
    double t = now();
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *grown = realloc(s->buf, cap);
        if (!grown)
            return 0;
        s->buf = grown;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = 0;
    size_t off = 0;
    for (;;) {
        char *sep = strstr(s->buf + off, "\n\n");
        if (!sep)
            break;
        sse_event(s, s->buf + off, (size_t)(sep - (s->buf + off)), t);
        off = (size_t)(sep - s->buf) + 2;
    }
    memmove(s->buf, s->buf + off, s->len - off + 1);
    s->len -= off;
    return n;
}

/* n concurrent streaming requests; 0 when every one completed. */
static int http_level(int port, int level, int n, int n_prompt, int n_gen, struct stream *s)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    CURLM *multi = curl_multi_init();
    int rc = -1;
    if (!multi || !hdrs)
        goto out_free;
    for (int i = 0; i < n; i++) {
        json_t *body =
            json_pack("{s:s, s:o, s:i, s:f, s:b, s:{s:b}}", "model", SERVED_NAME, "prompt",
                      prompt_ids(level, i, n_prompt), "max_tokens", n_gen, "temperature", 0.0,
                      "stream", 1, "stream_options", "include_usage", 1);
        s[i].body = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        s[i].easy = curl_easy_init();
        if (!s[i].body || !s[i].easy)
            goto out_easy;
        CURL *e = s[i].easy;
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, s[i].body);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_http_data);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &s[i]);
        curl_easy_setopt(e, CURLOPT_PRIVATE, &s[i]);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)LEVEL_SECONDS);
    }
    double t0 = now();
    for (int i = 0; i < n; i++) {
        s[i].t_start = t0;
        curl_multi_add_handle(multi, s[i].easy);
    }
    int running = n;
    while (running) {
        if (curl_multi_perform(multi, &running) != CURLM_OK)
            break;
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            struct stream *st = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&st);
            long code = 0;
            curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            st->t_end = now();
            char msg[256];
            if (m->data.result != CURLE_OK) {
                snprintf(msg, sizeof msg, "%s", curl_easy_strerror(m->data.result));
                stream_fail(st, msg);
            } else if (code != 200) {
                snprintf(msg, sizeof msg, "HTTP %ld: %.200s", code, st->buf ? st->buf : "");
                stream_fail(st, msg);
            } else if (!st->done) {
                stream_fail(st, "the stream ended without [DONE]");
            }
        }
        if (running && curl_multi_poll(multi, NULL, 0, 100, NULL) != CURLM_OK)
            break;
    }
    rc = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].t_end) {
            s[i].t_end = now();
            stream_fail(&s[i], "unfinished");
        }
        if (s[i].failed) {
            fprintf(stderr, "bench-serve: HTTP stream %d of %d: %s\n", i + 1, n, s[i].error);
            rc = -1;
        }
    }
out_easy:
    for (int i = 0; i < n; i++)
        if (s[i].easy) {
            curl_multi_remove_handle(multi, s[i].easy);
            curl_easy_cleanup(s[i].easy);
            s[i].easy = NULL;
        }
out_free:
    if (multi)
        curl_multi_cleanup(multi);
    curl_slist_free_all(hdrs);
    return rc;
}

static int run_http(const char *exe, const char *model, int n_threads, int n_prompt, int n_gen)
{
    struct server sv;
    double t0 = now();
    if (server_start(&sv, exe, model, n_threads))
        return -1;
    printf("\nsplash serve over HTTP (port %d, SSE via libcurl multi), ready in %.1f s:\n", sv.port,
           now() - t0);
    static struct stream s[MAX_STREAMS];
    int rc = 0;
    /* warm-up: every weight paged in, every buffer sized */
    rc |= http_level(sv.port, 0, 1, n_prompt, 4, s);
    streams_free(s, 1);
    print_header();
    int any_timing = 1;
    for (int l = 0; l < N_LEVELS && !rc; l++) {
        struct level_result r;
        rc |= http_level(sv.port, l + 1, levels[l], n_prompt, n_gen, s);
        summarize(s, levels[l], &r);
        any_timing &= r.have_timing;
        print_row(&r);
        streams_free(s, levels[l]);
    }
    server_stop(&sv);
    if (!rc && !any_timing)
        printf("  (TTFT and ITL: '-' where most tokens rendered no text, so the SSE stream had\n"
               "   no chunk to time them by; the engine section below times every token)\n");
    return rc;
}

/* ---- engine: the serving loop over its frame protocol -------------------------- */

struct engine_run {
    struct splash_engine_opts opts;
    pthread_t thread;
    int fd; /* our end */
    atomic_int exited;
    int status;
};

static void *engine_main(void *arg)
{
    struct engine_run *e = arg;
    e->status = splash_engine_main(&e->opts);
    e->exited = 1;
    return NULL;
}

/* One frame within the deadline: 1 read, 0 timed out, -1 failed. */
static int engine_read(struct engine_run *e, double deadline, struct splash_frame *f)
{
    while (now() < deadline) {
        struct pollfd p = {.fd = e->fd, .events = POLLIN};
        int rc = poll(&p, 1, 200);
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc == 0 && e->exited)
            return -1; /* every frame it wrote has been read */
        if (rc <= 0)
            continue;
        struct splash_err err;
        if (splash_frame_read(e->fd, f, &err) != SPLASH_OK) {
            fprintf(stderr, "bench-serve: engine: %s\n", err.msg);
            return -1;
        }
        return 1;
    }
    return 0;
}

static int engine_level(struct engine_run *e, int level, int n, int n_prompt, int n_gen,
                        struct stream *s)
{
    struct splash_err err;
    uint64_t base = (uint64_t)level * 100 + 1;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        json_t *ids = prompt_ids(level, i, n_prompt);
        struct splash_submit sub = {.n_prompt = json_array_size(ids), .reuse_token = -1};
        splash_gen_params_init(&sub.params);
        sub.params.max_tokens = n_gen;
        sub.params.sampling.temperature = 0;
        int32_t *prompt = malloc(sub.n_prompt * sizeof *prompt);
        for (size_t k = 0; prompt && k < sub.n_prompt; k++)
            prompt[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        json_decref(ids);
        sub.prompt = prompt;
        s[i].t_start = t0;
        enum splash_status st =
            prompt ? splash_frame_write_submit(e->fd, base + (uint64_t)i, &sub, &err)
                   : splash_err_set(&err, SPLASH_ERR_NOMEM, "out of memory for the prompt");
        free(prompt);
        if (st) {
            fprintf(stderr, "bench-serve: engine: %s\n", err.msg);
            return -1;
        }
    }
    double deadline = t0 + LEVEL_SECONDS;
    int left = n;
    while (left > 0) {
        struct splash_frame f;
        int got = engine_read(e, deadline, &f);
        if (got <= 0)
            break;
        double t = now();
        struct stream *st = f.id >= base && f.id < base + (uint64_t)n ? &s[f.id - base] : NULL;
        if (st && !st->done) {
            if (f.type == SPLASH_FRAME_TOKENS) {
                for (size_t k = 0; k < json_array_size(json_object_get(f.body, "t")); k++)
                    stream_seen(st, t);
            } else if (f.type == SPLASH_FRAME_DONE) {
                st->tokens = json_integer_value(json_object_get(f.body, "completion_tokens"));
                st->t_end = t;
                st->done = 1;
                left--;
            } else if (f.type == SPLASH_FRAME_ERROR) {
                const char *m = json_string_value(json_object_get(f.body, "message"));
                st->t_end = t;
                stream_fail(st, m ? m : "error");
                left--;
            }
        }
        splash_frame_free(&f);
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].done) {
            splash_frame_write(e->fd, SPLASH_FRAME_CANCEL, base + (uint64_t)i, NULL, &err);
            s[i].t_end = now();
            stream_fail(&s[i], e->exited ? "the engine stopped" : "unfinished in time");
        }
        if (s[i].failed) {
            fprintf(stderr, "bench-serve: engine stream %d of %d: %s\n", i + 1, n, s[i].error);
            rc = -1;
        }
    }
    return rc;
}

static int run_engine(const char *model, int n_threads, int n_prompt, int n_gen)
{
    static struct engine_run e;
    memset(&e, 0, sizeof e);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
        fprintf(stderr, "bench-serve: socketpair: %s\n", strerror(errno));
        return -1;
    }
    e.fd = sp[0];
    e.opts = (struct splash_engine_opts){.fd = sp[1],
                                         .model_path = model,
                                         .n_threads = n_threads,
                                         .max_context = strtoll(MAX_CONTEXT, NULL, 10),
                                         .decode_share = 0.5};
    double t0 = now();
    if (pthread_create(&e.thread, NULL, engine_main, &e) != 0) {
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    int rc = -1;
    struct splash_frame f;
    int got = engine_read(&e, t0 + READY_SECONDS, &f);
    if (got <= 0) {
        fprintf(stderr, "bench-serve: the engine did not start within %.0f s\n", READY_SECONDS);
        goto out_stop;
    }
    if (f.type != SPLASH_FRAME_READY) {
        const char *m = json_string_value(json_object_get(f.body, "message"));
        fprintf(stderr, "bench-serve: the engine refused to start: %s\n", m ? m : "?");
        splash_frame_free(&f);
        goto out_stop;
    }
    splash_frame_free(&f);
    printf("\nengine loop (what splash serve runs, in-process over its frame protocol), ready in "
           "%.1f s:\n",
           now() - t0);
    static struct stream s[MAX_STREAMS];
    rc = engine_level(&e, 0, 1, n_prompt, 4, s);
    streams_free(s, 1);
    print_header();
    for (int l = 0; l < N_LEVELS && !rc; l++) {
        struct level_result r;
        rc |= engine_level(&e, l + 1, levels[l], n_prompt, n_gen, s);
        summarize(s, levels[l], &r);
        print_row(&r);
        streams_free(s, levels[l]);
    }
out_stop : {
    struct splash_err err;
    splash_frame_write(e.fd, SPLASH_FRAME_SHUTDOWN, 0, NULL, &err);
}
    /* a SHUTDOWN ends the loop after the step under way; closing our end ends a
     * loop blocked elsewhere */
    shutdown(e.fd, SHUT_WR);
    pthread_join(e.thread, NULL);
    close(sp[0]);
    close(sp[1]);
    if (!rc && e.status) {
        fprintf(stderr, "bench-serve: the engine ended with status %d\n", e.status);
        rc = -1;
    }
    return rc;
}

/* ---- the batched decode step ----------------------------------------------------- */

static int run_step(const struct splash_registry *r, const char *model, int n_threads)
{
    static const int32_t lanes[] = {1, 2, 4, 8, 16};
    const int32_t n_counts = (int32_t)(sizeof lanes / sizeof lanes[0]);
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8, .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    if (splash_model_load(r, model, &opts, n_threads, &lm, &err)) {
        fprintf(stderr, "bench-serve: %s\n", err.msg);
        return -1;
    }
    struct splash_step_bench_result res;
    if (splash_step_bench(lm, lanes, n_counts, STEP_PREFILL, STEP_REPS, &res, &err)) {
        fprintf(stderr, "bench-serve: step: %s\n", err.msg);
        splash_model_unload(lm);
        return -1;
    }
    printf("\nbatched decode step (forward over N lanes of 1 token, logits per lane, "
           "%d threads, best of %d, context ~%d):\n",
           n_threads, STEP_REPS, res.context);
    printf("    lanes   ms/step (best / mean)   ms/token   x 1-lane step\n");
    double one = res.best_seconds[0], ratio16 = 0;
    for (int32_t c = 0; c < res.n_counts; c++) {
        double x = one > 0 ? res.best_seconds[c] / one : 0;
        printf("  %7d   %8.1f / %8.1f       %8.2f   %6.2f\n", res.lanes[c],
               1e3 * res.best_seconds[c], 1e3 * res.mean_seconds[c],
               1e3 * res.best_seconds[c] / res.lanes[c], x);
        if (res.lanes[c] == 16)
            ratio16 = x;
    }
    printf("  16-lane step / 1-lane step: %.2f (target <= %.1f): %s\n", ratio16, STEP_TARGET,
           ratio16 <= STEP_TARGET ? "met" : "MISSED");
    fflush(stdout);
    splash_model_unload(lm);
    return 0;
}

/* ---- the model ---------------------------------------------------------------------- */

/* build/bench-models/ beside this binary's build/bench/, as bench-model keeps it */
static void exe_dir(char *out, size_t size)
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, size, "build/bench");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, size, "%s", exe);
}

/* The cached model bench-model builds (same path, seed and mix), built here
 * once if bench-model has not run yet. */
static int ensure_model(const struct splash_registry *r, const char *dir, char *path, size_t size)
{
    snprintf(path, size, "%s/%s-Q4_K_M.gguf", dir, SHAPE);
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0)
        return 0;
    struct splash_model_write_opts opts = {
        .mix = "Q4_K_M", .seed = 7, .n_threads = N_THREADS, .max_sample = 0};
    struct splash_model_write_stats stats;
    struct splash_err err = {{0}};
    printf("building %s (once) ...\n", path);
    fflush(stdout);
    if (splash_model_write_preset(r, SHAPE, &opts, path, &stats, &err)) {
        fprintf(stderr, "bench-serve: %s: %s\n", SHAPE, err.msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int n_prompt = 128, n_gen = 64, n_threads = N_THREADS;
    const char *sections = "http,engine,step", *other_model = NULL;
    /* unknown options are other benches' (run-bench.sh passes $BENCH_ARGS to all) */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-p"))
            n_prompt = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-n"))
            n_gen = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-s"))
            sections = argv[i + 1];
        else if (!strcmp(argv[i], "-t"))
            n_threads = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "-m"))
            other_model = argv[i + 1];
    }
    if (n_prompt < 1 || n_gen < 2 || n_prompt + n_gen > 4000 || n_threads < 1) {
        fprintf(stderr, "usage: bench-serve [-p N] [-n N] [-t N] [-s http,engine,step] [-m GGUF]\n"
                        "  -p prompt tokens (128), -n generated tokens (64, at least 2), "
                        "together under 4000;\n  -t threads (2); -m another model than the "
                        "cached 0.8B shape\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct splash_registry *r = splash_registry_global();
    splash_registry_add_builtins(r, splash_builtin_plugins);

    char bin[PATH_MAX - 64], dir[PATH_MAX], model[PATH_MAX + 64], exe[PATH_MAX + 16];
    exe_dir(bin, sizeof bin);
    snprintf(model, sizeof model, "%s/../bench-models", bin);
    mkdir(model, 0755);
    if (!realpath(model, dir)) {
        fprintf(stderr, "bench-serve: %s: cannot create the model cache\n", model);
        return 1;
    }
    if (other_model)
        snprintf(model, sizeof model, "%s", other_model);
    else if (ensure_model(r, dir, model, sizeof model))
        return 1;
    snprintf(exe, sizeof exe, "%s/../splash", bin);

    const char *name = strrchr(model, '/');
    printf("serving benchmark: %s%s, %d threads, prompt %d tokens, %d generated, temperature 0\n",
           name ? name + 1 : model, other_model ? "" : " (random weights)", n_threads, n_prompt,
           n_gen);
    print_load("before");
    int rc = 0;
    if (strstr(sections, "http")) {
        if (access(exe, X_OK) != 0) {
            fprintf(stderr, "bench-serve: %s: not built (make all)\n", exe);
            rc = 1;
        } else if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            fprintf(stderr, "bench-serve: libcurl did not initialise\n");
            rc = 1;
        } else {
            rc |= run_http(exe, model, n_threads, n_prompt, n_gen) ? 1 : 0;
            curl_global_cleanup();
        }
    }
    if (strstr(sections, "engine"))
        rc |= run_engine(model, n_threads, n_prompt, n_gen) ? 1 : 0;
    if (strstr(sections, "step"))
        rc |= run_step(r, model, n_threads) ? 1 : 0;
    print_load("after");
    return rc;
}
