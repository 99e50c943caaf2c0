/* The head gate: each accepted connection's bytes pass through a thread that finds
 * every request head in them (http_scan.h) and checks it before libmicrohttpd reads
 * it. libmicrohttpd 0.9.75 lets shapes through that a proxy in front may read
 * differently (RFC 9112 §2.2, §3, §5.2): a NUL byte (it cuts the value there: "Bearer
 * KEY\0junk" passed as the key), a request line without its two spaces, obs-fold
 * (joined), a bare CR (a line end to it). Such a head is answered 400 and the
 * connection closed, after the answers to the requests before it on the connection.
 *
 * A sound first head hands the connection to libmicrohttpd over a socket pair; the
 * gate then relays both ways for the connection's life. The client's end of stream
 * and its reset reach libmicrohttpd's side as they happened, so a handler sees a
 * client that left (splash_http_client_gone) as before. */
#ifndef SPLASH_SERVER_HTTP_RELAY_H
#define SPLASH_SERVER_HTTP_RELAY_H

#include <microhttpd.h>
#include <sys/socket.h>

#include "server/ip_limit.h"
#include "server/refused_lines.h"

struct splash_relay_env {
    struct MHD_Daemon *daemon;
    const int *stopping; /* read atomically: the server is stopping */
    struct splash_refused_lines *refused;
    struct splash_ip_limit *ip_limit; /* the gate gives the address back when it ends */
    unsigned head_timeout_s;          /* a head's bytes must come within this silence */
};

/* Runs one accepted connection to its end: reads and checks heads, relays, closes
 * the client's socket and gives its address back to ip_limit. */
void splash_relay_run(const struct splash_relay_env *env, int client_fd,
                      const struct sockaddr_storage *addr, socklen_t addr_len);

/* libmicrohttpd's notifications, from the HTTP front's callbacks: a connection the
 * gate handed over started or closed (its socket context), or finished a request
 * (its answer is written: the gate may answer a later refused head after it; answered
 * is 0 when it ended without its answer going out whole, e.g. cut off mid-body). */
void splash_relay_started(struct MHD_Connection *c, void **socket_context);
void splash_relay_closed(void **socket_context);
void splash_relay_request_done(struct MHD_Connection *c, int answered);

#endif
