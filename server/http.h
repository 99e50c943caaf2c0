/* The HTTP front on libmicrohttpd: routing, request bodies, security checks
 * (Host allowlist, Origin/CORS, API key), JSON and SSE responses. */
#ifndef SPLASH_SERVER_HTTP_H
#define SPLASH_SERVER_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server/options.h"

struct splash_http;
struct splash_http_request;

/* What a route handler returns. */
struct splash_http_reply {
    int status;
    json_t *json;              /* a JSON body (owned), or */
    char *text;                /* a text body (malloc'ed, owned) with content_type */
    size_t text_len;
    const char *content_type;
    int retry_after;           /* > 0: a Retry-After header */
    int close_connection;      /* Connection: close (a request whose framing is refused) */
    char affinity[176];        /* X-Splash-Affinity (server/affinity.c), "" for none */
    /* a streamed body: produce() fills buf with up to max bytes and returns the count,
     * 0 when it has nothing yet (it should block briefly instead), -1 at the end.
     * done() runs once when the stream ends or the client goes away. */
    ssize_t (*produce)(void *ctx, char *buf, size_t max);
    void (*done)(void *ctx);
    void *stream_ctx;
};

struct splash_http_request {
    const char *method;
    const char *path;          /* without the query */
    const char *body;          /* NUL-terminated, body_len bytes */
    size_t body_len;
    void *connection;          /* struct MHD_Connection *, for headers */
};

typedef void (*splash_route_fn)(void *app, const struct splash_http_request *req,
                                struct splash_http_reply *reply);

struct splash_route {
    const char *method;        /* "GET", "POST" */
    const char *path;          /* exact, or a prefix ending in '*' */
    splash_route_fn fn;
    int public_route;          /* no API key needed (chat page, /health, /ready) */
};

/* The value of a request header, or NULL. */
const char *splash_http_header(const struct splash_http_request *req, const char *name);

/* Fails with msg ("port 8000 is in use (another splash serve?)") when the port
 * cannot be listened on, so a second server stops before loading its model. */
int splash_http_check_port(const struct splash_serve_opts *opts, char *msg, size_t msg_size);
/* Whether the client of the request this thread answers (a route handler or a
 * stream's producer) has closed its connection; 0 on any other thread. */
int splash_http_client_gone(void);

/* Starts listening; routes are searched in order. Returns NULL with msg on failure. */
struct splash_http *splash_http_start(const struct splash_serve_opts *opts,
                                      const struct splash_route *routes, size_t n_routes,
                                      void *app, char *msg, size_t msg_size);
/* The port it listens on (the one the kernel chose for --port 0). */
int splash_http_port(const struct splash_http *h);
/* Stopping: from now on every request but /health gets 503 shutting_down with
 * Retry-After, while those in flight go on. */
void splash_http_drain(struct splash_http *h);
/* Requests admitted and not yet answered in full (streams included). */
int splash_http_in_flight(struct splash_http *h);
/* Closes every connection and stops listening. */
void splash_http_stop(struct splash_http *h);

/* Error bodies in each API's shape. */
void splash_reply_error(struct splash_http_reply *reply, int status, const char *type,
                        const char *code, const char *message);
/* The Anthropic shape: {"type":"error","error":{"type":...,"message":...}}. */
void splash_reply_error_anthropic(struct splash_http_reply *reply, int status, const char *type,
                                  const char *message);

#endif
