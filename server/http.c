/* HTTP front. Thread-per-connection: a streaming response's producer may block
 * on its request's events without holding up other connections. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/console.h"
#include "server/http_framing.h"
#include "server/http_relay.h"
#include "server/ip_limit.h"
#include "server/refused_lines.h"

/* Connection bounds (issue "Hardening" item 3): a request's headers must come
 * within HEADER_TIMEOUT_S of silence, a kept-alive or slow connection is closed
 * after IDLE_TIMEOUT_S without a byte either way, and one address holds at most
 * PER_IP_CONNECTIONS, so idle sockets cannot lock others out. */
#define HEADER_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 60
#define PER_IP_CONNECTIONS 256
#define MAX_CONNECTIONS 4096

struct splash_http {
    struct MHD_Daemon *daemon;
    int listen_fd;
    pthread_t acceptor;
    int stopping;  /* the acceptor and the gates end */
    int gates;     /* connections open: each one's bytes pass through its gate */
    struct splash_relay_env relay_env;
    unsigned max_connections;
    pthread_cond_t gates_done;
    const struct splash_serve_opts *opts;
    const struct splash_route *routes;
    size_t n_routes;
    void *app;
    pthread_mutex_t lock;
    char refused_origins[32][128]; /* printed once each */
    struct splash_refused_lines refused;
    struct splash_ip_limit ip_limit;
    int draining;  /* stopping: new requests get 503 shutting_down */
    int in_flight; /* requests admitted and not yet completed */
    int n_refused_origins;
};

struct conn_ctx {
    const struct splash_route *route; /* NULL once answered from the headers */
    char *body;
    size_t len, cap;
};

const char *splash_http_header(const struct splash_http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

void splash_reply_error(struct splash_http_reply *reply, int status, const char *type,
                        const char *code, const char *message)
{
    reply->status = status;
    reply->json = json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", message, "type", type,
                            "code", code, "param");
}

void splash_reply_error_anthropic(struct splash_http_reply *reply, int status, const char *type,
                                  const char *message)
{
    reply->status = status;
    reply->json = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type,
                            "message", message);
}

/* ---- security checks (server.md "Network and authentication") -------------- */

/* The Host header names this server: loopback names, the bind address, or an
 * --allowed-host (a port suffix is ignored). */
static int host_allowed(const struct splash_http *h, const char *host)
{
    if (!host)
        return 1; /* HTTP/1.0 clients send none */
    char name[256];
    if (!splash_http_host_name(host, name, sizeof name))
        return 0;
    if (!strcasecmp(name, "localhost") || !strcmp(name, "127.0.0.1") || !strcmp(name, "[::1]"))
        return 1;
    if (!strcmp(name, h->opts->host) && strcmp(h->opts->host, "0.0.0.0"))
        return 1;
    /* any literal IPv4 address when bound to all interfaces (LAN clients connect by IP) */
    struct in_addr a;
    if (!strcmp(h->opts->host, "0.0.0.0") && inet_pton(AF_INET, name, &a) == 1)
        return 1;
    for (int i = 0; i < h->opts->n_allowed_hosts; i++)
        if (!strcasecmp(name, h->opts->allowed_hosts[i]))
            return 1;
    return 0;
}

static int origin_allowed(const struct splash_http *h, const char *origin)
{
    for (int i = 0; i < h->opts->n_allowed_origins; i++)
        if (!strcmp(h->opts->allowed_origins[i], "*") || !strcmp(h->opts->allowed_origins[i], origin))
            return 1;
    return 0;
}

/* A browser page of this server's own origin may call it. */
static int same_origin(const char *origin, const char *host)
{
    if (!host)
        return 0;
    const char *sep = strstr(origin, "://");
    return sep && !strcasecmp(sep + 3, host);
}

static void note_refused_origin(struct splash_http *h, const char *origin)
{
    if (!strcmp(origin, "null"))
        return;
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->n_refused_origins; i++)
        if (!strcmp(h->refused_origins[i], origin)) {
            pthread_mutex_unlock(&h->lock);
            return;
        }
    if (h->n_refused_origins < 32)
        snprintf(h->refused_origins[h->n_refused_origins++], 128, "%s", origin);
    pthread_mutex_unlock(&h->lock);
    splash_console_line(SPLASH_CONSOLE_ERR,
                        "Warning · refused a request from origin %s; serve --allowed-origin %s "
                        "would accept it",
                        origin, origin);
}

static int key_ok(const struct splash_http *h, struct MHD_Connection *c)
{
    const char *key = h->opts->api_key;
    if (!key)
        return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    int bearer_ok = 0, have_bearer = 0;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        have_bearer = 1;
        bearer_ok = !strcmp(auth + 7, key);
    }
    if (have_bearer && xkey)
        return bearer_ok && !strcmp(xkey, key);
    if (have_bearer)
        return bearer_ok;
    return xkey && !strcmp(xkey, key);
}

/* ---- the client of the request this thread answers ----------------------------- */

/* libmicrohttpd runs each connection on its own thread, and a route handler (or a
 * stream's producer) blocks on that thread while the engine works: the socket it
 * answers is this thread's. */
static _Thread_local int answering_fd = -1;

static void answer_on(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    answering_fd = ci ? ci->connect_fd : -1;
}

int splash_http_client_gone(void)
{
    if (answering_fd < 0)
        return 0;
    struct pollfd pfd = {.fd = answering_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0)
        return 0;
    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
        return 1;
    /* readable: the end of its stream (as nginx reads it), or a pipelined request */
    char byte;
    ssize_t n = recv(answering_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- responses ------------------------------------------------------------------ */

struct stream_box {
    struct splash_http_reply reply;
    int fd; /* the client's socket */
};

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream_box *b = cls;
    answering_fd = b->fd;
    for (;;) {
        ssize_t n = b->reply.produce(b->reply.stream_ctx, buf, max);
        if (n < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n > 0)
            return n;
    }
}

static void stream_free(void *cls)
{
    struct stream_box *b = cls;
    if (b->reply.done)
        b->reply.done(b->reply.stream_ctx);
    free(b);
}

static void add_common_headers(struct splash_http *h, struct MHD_Response *r, const char *origin,
                               int retry_after)
{
    if (origin && origin_allowed(h, origin)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Access-Control-Expose-Headers",
                                "Retry-After, WWW-Authenticate, X-Splash-Affinity");
        MHD_add_response_header(r, "Vary", "Origin");
    }
    if (retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
}

/* The Refused · line of a 4xx answer, its code and message read from the error body. */
static void note_refusal(struct splash_http *h, struct MHD_Connection *c, const char *method,
                         const char *url, const struct splash_http_reply *reply)
{
    json_t *err = json_object_get(reply->json, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    if (!code)
        code = json_string_value(json_object_get(err, "type"));
    const char *message = json_string_value(json_object_get(err, "message"));
    char client[INET6_ADDRSTRLEN] = "?";
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, client,
                  sizeof client);
    splash_refused_line(&h->refused, method, url, reply->status, code, message, client);
}

static enum MHD_Result send_reply(struct splash_http *h, struct MHD_Connection *c, const char *method,
                                  const char *url, struct splash_http_reply *reply, const char *origin)
{
    if (reply->status >= 400 && reply->status < 500)
        note_refusal(h, c, method, url, reply);
    struct MHD_Response *r;
    if (reply->produce) {
        struct stream_box *b = malloc(sizeof *b);
        if (!b)
            return MHD_NO;
        b->reply = *reply;
        b->fd = answering_fd;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, b, stream_free);
        MHD_add_response_header(r, "Content-Type",
                                reply->content_type ? reply->content_type : "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    } else if (reply->json) {
        char *text = json_dumps(reply->json, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(reply->json);
        if (!text)
            return MHD_NO;
        r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(r, "Content-Type", "application/json");
    } else {
        r = MHD_create_response_from_buffer(reply->text_len, reply->text ? reply->text : (char *)"",
                                            reply->text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (reply->content_type)
            MHD_add_response_header(r, "Content-Type", reply->content_type);
    }
    if (!r)
        return MHD_NO;
    add_common_headers(h, r, origin, reply->retry_after);
    if (reply->close_connection)
        MHD_add_response_header(r, "Connection", "close");
    if (reply->affinity[0])
        MHD_add_response_header(r, "X-Splash-Affinity", reply->affinity);
    if (reply->status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)reply->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* An error the front answers itself, in the vocabulary of the API the path belongs to:
 * Anthropic's {"type":"error","error":{"type"}} under /v1/messages, OpenAI's
 * {"error":{"type","code"}} elsewhere. */
static void front_error(struct splash_http_reply *reply, const char *url, int status,
                        const char *type, const char *code, const char *message)
{
    if (strncmp(url, "/v1/messages", 12)) {
        splash_reply_error(reply, status, type, code, message);
        return;
    }
    const char *anthropic = status == 401   ? "authentication_error"
                            : status == 403 ? "permission_error"
                            : status == 404 ? "not_found_error"
                            : status == 413 ? "request_too_large"
                            : status == 503 ? "overloaded_error"
                                            : "invalid_request_error";
    splash_reply_error_anthropic(reply, status, anthropic, message);
}

static enum MHD_Result simple_error(struct splash_http *h, struct MHD_Connection *c,
                                    const char *method, const char *url, int status,
                                    const char *type, const char *code, const char *message,
                                    const char *origin)
{
    struct splash_http_reply reply = {0};
    front_error(&reply, url, status, type, code, message);
    return send_reply(h, c, method, url, &reply, origin);
}

static const struct splash_route *find_route(const struct splash_http *h, const char *method,
                                             const char *path, int *path_known)
{
    *path_known = 0;
    for (size_t i = 0; i < h->n_routes; i++) {
        const struct splash_route *r = &h->routes[i];
        size_t n = strlen(r->path);
        int match = r->path[n - 1] == '*' ? !strncmp(path, r->path, n - 1) : !strcmp(path, r->path);
        if (!match)
            continue;
        *path_known = 1;
        if (!strcmp(r->method, method))
            return r;
    }
    return NULL;
}

static enum MHD_Result answer_preflight(struct splash_http *h, struct MHD_Connection *c,
                                        const char *origin)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    add_common_headers(h, r, origin, 0);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, x-api-key, anthropic-version, "
                            "anthropic-beta, openai-organization, openai-project");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ret;
}

/* The declared Content-Length, or -1 when there is none (a chunked or empty body). */
static long long declared_length(struct MHD_Connection *c)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (!v)
        return -1;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    return *end || end == v ? -1 : (long long)(n > (1ull << 62) ? 1ull << 62 : n);
}

/* Every check a request's headers settle (server.md "Network and authentication"),
 * run before a byte of its body is read: a refused request's body is never
 * buffered, and an Expect: 100-continue gets the final status instead of 100.
 * Returns NULL once an answer is queued, else the route to run. */
static const struct splash_route *admit(struct splash_http *h, struct MHD_Connection *c,
                                        const char *url, const char *method, const char *version,
                                        enum MHD_Result *ret)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    char msg[700];
    const char *framing = splash_http_framing_problem(c, method, version);
    if (framing) {
        struct splash_http_reply reply = {.close_connection = 1};
        snprintf(msg, sizeof msg, "malformed request: %s", framing);
        front_error(&reply, url, 400, "invalid_request_error", "bad_request", msg);
        *ret = send_reply(h, c, method, url, &reply, NULL);
        return NULL;
    }
    if (!host_allowed(h, host)) {
        char name[256];
        splash_http_host_name(host, name, sizeof name);
        snprintf(msg, sizeof msg,
                 "this server does not answer to the host name %s; serve --allowed-host %s accepts it",
                 name, name);
        *ret = simple_error(h, c, method, url, 403, "forbidden", "host_not_allowed", msg, NULL);
        return NULL;
    }
    if (origin && !origin_allowed(h, origin) && !same_origin(origin, host)) {
        note_refused_origin(h, origin);
        if (!strcmp(origin, "null"))
            snprintf(msg, sizeof msg, "origin null (a file:// page or a sandboxed frame) is not "
                                      "allowed; only serve --allowed-origin '*' admits it");
        else
            snprintf(msg, sizeof msg,
                     "origin %.300s is not allowed; serve --allowed-origin %.300s admits it", origin,
                     origin);
        *ret = simple_error(h, c, method, url, 403, "forbidden", "origin_not_allowed", msg, NULL);
        return NULL;
    }
    if (!strcmp(method, "OPTIONS")) {
        *ret = answer_preflight(h, c, origin);
        return NULL;
    }
    /* HEAD answers as GET does; libmicrohttpd sends the headers alone */
    int path_known;
    const struct splash_route *route =
        find_route(h, !strcmp(method, "HEAD") ? "GET" : method, url, &path_known);
    if (!route) {
        if (path_known) {
            *ret = simple_error(h, c, method, url, 405, "invalid_request_error", "method_not_allowed",
                                "this path does not take that method", origin);
            return NULL;
        }
        snprintf(msg, sizeof msg, "no route %.20s %.200s", method, url);
        *ret = simple_error(h, c, method, url, 404, "invalid_request_error", "not_found", msg, origin);
        return NULL;
    }
    pthread_mutex_lock(&h->lock);
    int draining = h->draining;
    pthread_mutex_unlock(&h->lock);
    if (draining && strcmp(route->path, "/health")) {
        struct splash_http_reply reply = {.retry_after = 5, .close_connection = 1};
        front_error(&reply, url, 503, "server_error", "shutting_down",
                    "the server is stopping; retry once it is back");
        *ret = send_reply(h, c, method, url, &reply, origin);
        return NULL;
    }
    if (!route->public_route && !key_ok(h, c)) {
        *ret = simple_error(h, c, method, url, 401, "authentication_error", "invalid_api_key",
                            "a valid API key is required (Authorization: Bearer KEY or x-api-key)",
                            origin);
        return NULL;
    }
    long long length = declared_length(c);
    if (length > 0 && (unsigned long long)length > h->opts->max_request_size) {
        snprintf(msg, sizeof msg,
                 "the request body (%lld bytes) is larger than --max-request-size (%llu bytes)",
                 length, (unsigned long long)h->opts->max_request_size);
        *ret = simple_error(h, c, method, url, 413, "invalid_request_error", "request_too_large", msg, origin);
        return NULL;
    }
    pthread_mutex_lock(&h->lock);
    h->in_flight++;
    pthread_mutex_unlock(&h->lock);
    return route;
}

/* Appends an upload piece; 0 once the body passes --max-request-size (a chunked
 * body, whose length no header declared) or memory runs out. */
static int take_body(struct splash_http *h, struct conn_ctx *ctx, const char *upload, size_t n)
{
    if (ctx->len + n > h->opts->max_request_size)
        return 0;
    if (ctx->len + n + 1 > ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap : 4096;
        while (cap < ctx->len + n + 1)
            cap *= 2;
        char *grown = realloc(ctx->body, cap);
        if (!grown)
            return 0;
        ctx->body = grown;
        ctx->cap = cap;
    }
    memcpy(ctx->body + ctx->len, upload, n);
    ctx->len += n;
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct splash_http *h = cls;
    struct conn_ctx *ctx = *con_cls;
    if (!ctx) {
        /* the first call has the headers and no body yet */
        ctx = calloc(1, sizeof *ctx);
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        /* the headers are in: from here on only silence closes it */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S);
        enum MHD_Result ret = MHD_YES;
        ctx->route = admit(h, c, url, method, version, &ret);
        return ret;
    }
    if (!ctx->route)
        return MHD_YES; /* answered from the headers; libmicrohttpd discards any body */
    if (*upload_size) {
        /* a chunked body past the limit: libmicrohttpd cannot answer mid-upload, so
         * close rather than read on */
        if (!take_body(h, ctx, upload, *upload_size))
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    struct splash_http_request req = {.method = method, .path = url,
                                      .body = ctx->body ? ctx->body : "", .body_len = ctx->len,
                                      .connection = c};
    if (ctx->body)
        ctx->body[ctx->len] = 0;
    struct splash_http_reply reply = {.status = 200};
    answer_on(c);
    ctx->route->fn(h->app, &req, &reply);
    if (!reply.json && !reply.text && !reply.produce && reply.status == 200)
        splash_reply_error(&reply, 500, "server_error", "internal_error",
                           "the response could not be encoded");
    return send_reply(h, c, method, url, &reply, origin);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct splash_http *h = cls;
    struct conn_ctx *ctx = *con_cls;
    splash_relay_request_done(c, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (ctx) {
        if (ctx->route) {
            pthread_mutex_lock(&h->lock);
            h->in_flight--;
            pthread_mutex_unlock(&h->lock);
        }
        free(ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

/* ---- the head gate (http_relay.h): every connection's bytes pass through it ---- */

struct gate {
    struct splash_http *h;
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
};

static void gate_end(struct splash_http *h)
{
    pthread_mutex_lock(&h->lock);
    if (--h->gates == 0)
        pthread_cond_broadcast(&h->gates_done);
    pthread_mutex_unlock(&h->lock);
}

static void *head_gate(void *arg)
{
    struct gate *g = arg;
    struct splash_http *h = g->h;
    splash_relay_run(&h->relay_env, g->fd, &g->addr, g->addr_len);
    gate_end(h);
    free(g);
    return NULL;
}

static void *acceptor(void *arg)
{
    struct splash_http *h = arg;
    while (!__atomic_load_n(&h->stopping, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = h->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        struct gate *g = calloc(1, sizeof *g);
        if (!g)
            continue;
        g->h = h;
        g->addr_len = sizeof g->addr;
        g->fd = accept4(h->listen_fd, (struct sockaddr *)&g->addr, &g->addr_len, SOCK_CLOEXEC);
        if (g->fd < 0) {
            free(g);
            if (errno == EMFILE || errno == ENFILE) {
                struct timespec ts = {0, 50000000L};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        /* the per-address limit counts connections from accept, so heads that never
         * finish count too; the total bounds the gates and libmicrohttpd's together */
        pthread_mutex_lock(&h->lock);
        int room = h->gates < (int)h->max_connections;
        if (room)
            h->gates++;
        pthread_mutex_unlock(&h->lock);
        if (!room || !splash_ip_limit_take(&h->ip_limit, (struct sockaddr *)&g->addr)) {
            close(g->fd);
            free(g);
            if (room)
                gate_end(h);
            continue;
        }
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        if (pthread_create(&t, &attr, head_gate, g)) {
            splash_ip_limit_give(&h->ip_limit, (struct sockaddr *)&g->addr);
            close(g->fd);
            free(g);
            gate_end(h);
        }
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct splash_http *h = cls;
    (void)h; /* the gate gives the client's address back: it holds the client's socket */
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        splash_relay_started(c, socket_context);
    else
        splash_relay_closed(socket_context);
}

/* Each connection is a descriptor and a thread: the limit is what the process
 * may open (its soft limit raised to the hard one), less room for the rest. */
static unsigned connection_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 512;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > MAX_CONNECTIONS + 256)
        return MAX_CONNECTIONS;
    return rl.rlim_cur > 512 ? (unsigned)rl.rlim_cur - 256 : 256;
}

/* The listening socket, bound here rather than by libmicrohttpd so a port in use
 * is refused with its reason: SO_REUSEADDR only takes over a port left in
 * TIME_WAIT, never one another server listens on. */
static int listen_socket(const struct splash_serve_opts *opts, char *msg, size_t msg_size)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opts->port)};
    if (inet_pton(AF_INET, opts->host, &addr.sin_addr) != 1) {
        snprintf(msg, msg_size, "--host: %s is not an IPv4 address", opts->host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(msg, msg_size, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0) {
        if (errno == EADDRINUSE)
            snprintf(msg, msg_size, "port %d is in use (another splash serve?)", opts->port);
        else
            snprintf(msg, msg_size, "cannot listen on %s:%d: %s", opts->host, opts->port,
                     strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int splash_http_check_port(const struct splash_serve_opts *opts, char *msg, size_t msg_size)
{
    int fd = listen_socket(opts, msg, msg_size);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

struct splash_http *splash_http_start(const struct splash_serve_opts *opts,
                                      const struct splash_route *routes, size_t n_routes,
                                      void *app, char *msg, size_t msg_size)
{
    struct splash_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    h->opts = opts;
    h->routes = routes;
    h->n_routes = n_routes;
    h->app = app;
    pthread_mutex_init(&h->lock, NULL);
    splash_refused_lines_init(&h->refused);
    splash_ip_limit_init(&h->ip_limit, PER_IP_CONNECTIONS);
    pthread_cond_init(&h->gates_done, NULL);
    int fd = listen_socket(opts, msg, msg_size);
    if (fd < 0) {
        free(h);
        return NULL;
    }
    h->listen_fd = fd;
    h->max_connections = connection_limit();
    h->relay_env = (struct splash_relay_env){.stopping = &h->stopping, .refused = &h->refused,
                                             .ip_limit = &h->ip_limit,
                                             .head_timeout_s = HEADER_TIMEOUT_S};
    /* connections come through the head gate (acceptor above), not libmicrohttpd's accept */
    h->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET,
                                 0, NULL, NULL, on_request, h,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HEADER_TIMEOUT_S,
                                 MHD_OPTION_CONNECTION_LIMIT, h->max_connections,
                                 MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_END);
    h->relay_env.daemon = h->daemon;
    if (!h->daemon || pthread_create(&h->acceptor, NULL, acceptor, h)) {
        snprintf(msg, msg_size, "cannot serve HTTP on %s:%d", opts->host, opts->port);
        if (h->daemon)
            MHD_stop_daemon(h->daemon);
        close(fd);
        free(h);
        return NULL;
    }
    return h;
}

int splash_http_port(const struct splash_http *h)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(h->listen_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    return ntohs(a.sin_port);
}

void splash_http_drain(struct splash_http *h)
{
    pthread_mutex_lock(&h->lock);
    h->draining = 1;
    pthread_mutex_unlock(&h->lock);
}

int splash_http_in_flight(struct splash_http *h)
{
    pthread_mutex_lock(&h->lock);
    int n = h->in_flight;
    pthread_mutex_unlock(&h->lock);
    return n;
}

void splash_http_stop(struct splash_http *h)
{
    if (!h)
        return;
    __atomic_store_n(&h->stopping, 1, __ATOMIC_RELEASE);
    pthread_join(h->acceptor, NULL);
    pthread_mutex_lock(&h->lock);
    while (h->gates > 0) /* each sees stopping within 200 ms, then sends what is left */
        pthread_cond_wait(&h->gates_done, &h->lock);
    pthread_mutex_unlock(&h->lock);
    close(h->listen_fd);
    MHD_stop_daemon(h->daemon);
    free(h);
}
